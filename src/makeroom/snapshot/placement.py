"""A pod's fields that place it by other pods and by its volumes: inter-pod affinity and anti-affinity,
topology spread constraints, host ports, and its claims' PersistentVolumes; each read with the checks
of ``snapshot.fields`` (a broken field is a problem at its key path, never read as absent).

Claims are resolved through ``Storage``, made of the PersistentVolumeClaim and PersistentVolume objects:
a bound claim gives its volume's required node affinity and zone labels; a missing or unbound claim
gives nothing (its volume, if dynamically provisioned, is made where the pod goes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from makeroom.model import (
    HostPort,
    InclusionPolicy,
    LabelSelector,
    NodeSelectorRequirement,
    PodAffinityTerm,
    TopologySpreadConstraint,
    UnsatisfiableAction,
    VolumeConstraint,
    WeightedPodAffinityTerm,
)
from makeroom.snapshot.fields import (
    NODE_OPERATORS,
    Problems,
    is_map,
    label_selector,
    list_at,
    map_at,
    maps_at,
    requirement,
    str_map,
)

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
# The PV labels VolumeZone reads (a value may list zones separated by "__").
VOLUME_ZONE_LABELS = frozenset(
    {
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)
_PROTOCOLS = ("TCP", "UDP", "SCTP")
NEVER = NodeSelectorRequirement("makeroom.io/no-node", "In", ())
"""A requirement no node meets: a PV whose node affinity selects no node."""


def selector(value: Any, path: str, problems: Problems) -> LabelSelector | None:
    """A metav1.LabelSelector; None when absent (Kubernetes' nil selector, which selects nothing)."""
    if value is None:
        return None
    parsed = label_selector(value, path, problems)
    if parsed is None:
        return None
    labels, exprs = parsed
    return LabelSelector(tuple(sorted(labels.items())), exprs)


def _strings(obj: Mapping[str, Any], key: str, path: str, problems: Problems) -> tuple[str, ...]:
    items = list_at(obj, key, path, problems)
    if not all(isinstance(s, str) and s for s in items):
        problems.add(f"{path}.{key}", f"expected a list of names, got {items!r}"[:120])
        return ()
    return tuple(items)


def _topology_key(obj: Mapping[str, Any], path: str, problems: Problems) -> str:
    key = obj.get("topologyKey")
    if not isinstance(key, str) or not key:
        problems.add(f"{path}.topologyKey", f"expected a node label key, got {key!r}")
        return ""
    return key


def _int(obj: Mapping[str, Any], key: str, path: str, problems: Problems, low: int, high: int) -> int | None:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        problems.add(f"{path}.{key}", f"expected a whole number from {low} to {high}, got {value!r}")
        return None
    return value


def affinity_term(term: Mapping[str, Any], path: str, problems: Problems) -> PodAffinityTerm:
    ns_selector = term.get("namespaceSelector")
    return PodAffinityTerm(
        topology_key=_topology_key(term, path, problems),
        label_selector=selector(term.get("labelSelector"), f"{path}.labelSelector", problems),
        namespaces=_strings(term, "namespaces", path, problems),
        namespace_selector=selector(ns_selector, f"{path}.namespaceSelector", problems),
        match_label_keys=_strings(term, "matchLabelKeys", path, problems),
        mismatch_label_keys=_strings(term, "mismatchLabelKeys", path, problems),
    )


def pod_affinity(
    spec: Mapping[str, Any], kind: str, where: str, problems: Problems
) -> tuple[tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]]:
    """The required and the preferred terms of podAffinity or podAntiAffinity."""
    path = f"{where}.affinity"
    block = map_at(map_at(spec, "affinity", where, problems), kind, path, problems)
    path += f".{kind}"
    required = tuple(affinity_term(t, p, problems) for p, t in maps_at(block, REQUIRED, path, problems))
    preferred = []
    for p, w in maps_at(block, PREFERRED, path, problems):
        weight = _int(w, "weight", p, problems, 1, 100)
        term = map_at(w, "podAffinityTerm", p, problems)
        if weight is not None:
            preferred.append(
                WeightedPodAffinityTerm(weight, affinity_term(term, f"{p}.podAffinityTerm", problems))
            )
    return required, tuple(preferred)


def _choice(
    obj: Mapping[str, Any], key: str, path: str, problems: Problems, allowed: tuple[str, ...], default: str
) -> str:
    value = obj.get(key, default)
    if value is None:
        return default
    if value not in allowed:
        problems.add(f"{path}.{key}", f"expected {' or '.join(allowed)}, got {value!r}")
        return default
    return str(value)


def topology_spread(
    spec: Mapping[str, Any], where: str, problems: Problems
) -> tuple[TopologySpreadConstraint, ...]:
    out = []
    actions = tuple(a.value for a in UnsatisfiableAction)
    policies = tuple(p.value for p in InclusionPolicy)
    for path, c in maps_at(spec, "topologySpreadConstraints", where, problems):
        before = len(problems)
        max_skew = _int(c, "maxSkew", path, problems, 1, 2**31 - 1)
        min_domains = (
            None if c.get("minDomains") is None else _int(c, "minDomains", path, problems, 1, 2**31 - 1)
        )
        constraint = TopologySpreadConstraint(
            max_skew=max_skew or 1,
            topology_key=_topology_key(c, path, problems),
            when_unsatisfiable=UnsatisfiableAction(
                _choice(
                    c, "whenUnsatisfiable", path, problems, actions, UnsatisfiableAction.DO_NOT_SCHEDULE.value
                )
            ),
            label_selector=selector(c.get("labelSelector"), f"{path}.labelSelector", problems),
            min_domains=min_domains,
            node_affinity_policy=InclusionPolicy(
                _choice(c, "nodeAffinityPolicy", path, problems, policies, InclusionPolicy.HONOR.value)
            ),
            node_taints_policy=InclusionPolicy(
                _choice(c, "nodeTaintsPolicy", path, problems, policies, InclusionPolicy.IGNORE.value)
            ),
            match_label_keys=_strings(c, "matchLabelKeys", path, problems),
        )
        if len(problems) == before:
            out.append(constraint)
    return tuple(out)


def host_ports(spec: Mapping[str, Any], where: str, problems: Problems) -> tuple[HostPort, ...]:
    """The host ports of the containers and of the sidecars (restartPolicy: Always init containers):
    what the pod holds on its node for as long as it runs."""
    out = []
    containers = [
        (p, c)
        for p, c in maps_at(spec, "initContainers", where, problems)
        if c.get("restartPolicy") == "Always"
    ]
    containers += maps_at(spec, "containers", where, problems)
    for path, c in containers:
        for p, port in maps_at(c, "ports", path, problems):
            if not port.get("hostPort"):
                continue
            number = _int(port, "hostPort", p, problems, 1, 65535)
            protocol = _choice(port, "protocol", p, problems, _PROTOCOLS, "TCP")
            ip = port.get("hostIP") or "0.0.0.0"
            if not isinstance(ip, str):
                problems.add(f"{p}.hostIP", f"expected an IP address, got {ip!r}")
                continue
            if number is not None:
                out.append(HostPort(number, protocol, ip))
    return tuple(sorted(set(out), key=lambda h: (h.port, h.protocol, h.host_ip)))


def claim_names(spec: Mapping[str, Any], where: str, problems: Problems) -> tuple[str, ...]:
    """The PersistentVolumeClaims the pod mounts, by name (in the pod's namespace)."""
    out = []
    for path, v in maps_at(spec, "volumes", where, problems):
        claim = v.get("persistentVolumeClaim")
        if claim is None:
            continue
        name = claim.get("claimName") if is_map(claim) else None
        if not isinstance(name, str) or not name:
            problems.add(f"{path}.persistentVolumeClaim.claimName", f"expected a claim name, got {name!r}")
            continue
        out.append(name)
    return tuple(out)


@dataclass
class Storage:
    """Bound claims (namespace/name -> volume name) and volumes (name -> where it can be reached)."""

    claims: dict[str, str] = field(default_factory=dict)
    volumes: dict[str, VolumeConstraint] = field(default_factory=dict)

    def add_claim(
        self, obj: Mapping[str, Any], meta: Mapping[str, Any], where: str, problems: Problems
    ) -> None:
        spec = map_at(obj, "spec", where, problems)
        status = map_at(obj, "status", where, problems)
        volume = spec.get("volumeName")
        if status.get("phase") == "Bound" and isinstance(volume, str) and volume:
            self.claims[f"{meta.get('namespace') or 'default'}/{meta['name']}"] = volume

    def add_volume(
        self, obj: Mapping[str, Any], meta: Mapping[str, Any], where: str, problems: Problems
    ) -> None:
        """A PV's required node affinity, matched as the volume plugin matches it: against the node's
        labels alone, so a matchFields term sees an empty node name (In never holds, NotIn always)."""
        spec = map_at(obj, "spec", where, problems)
        path = f"{where}.spec.nodeAffinity"
        node_affinity = map_at(spec, "nodeAffinity", f"{where}.spec", problems)
        terms: list[tuple[NodeSelectorRequirement, ...]] = []
        if node_affinity.get("required") is not None:
            required = map_at(node_affinity, "required", path, problems)
            for term_path, term in maps_at(required, "nodeSelectorTerms", f"{path}.required", problems):
                exprs = list_at(term, "matchExpressions", term_path, problems)
                fields = [f for f in list_at(term, "matchFields", term_path, problems) if is_map(f)]
                if (not exprs and not fields) or any(f.get("operator") == "In" for f in fields):
                    continue  # selects no node
                reqs = [
                    requirement(e, f"{term_path}.matchExpressions[{j}]", problems, NODE_OPERATORS)
                    for j, e in enumerate(exprs)
                ]
                terms.append(tuple(r for r in reqs if r is not None))
            if not terms:
                terms.append((NEVER,))
        labels = str_map(meta.get("labels"), f"{where}.metadata.labels", problems)
        zones = []
        for key, value in sorted(labels.items()):
            parts = [z.strip() for z in value.split("__")]
            if key in VOLUME_ZONE_LABELS and all(parts):  # VolumeZone ignores a value with an empty part
                zones.append((key, "__".join(parts)))
        name = str(meta["name"])
        self.volumes[name] = VolumeConstraint(name, tuple(terms), tuple(zones))

    def constraints(self, namespace: str, claims: tuple[str, ...]) -> tuple[VolumeConstraint, ...]:
        out = []
        for claim in claims:
            volume = self.claims.get(f"{namespace}/{claim}")
            found = self.volumes.get(volume) if volume is not None else None
            if found is not None and (found.node_affinity or found.zone_labels):
                out.append(found)
        return tuple(out)
