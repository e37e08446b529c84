"""The scheduler's view of a cluster built from raw objects: nodes with the pods bound to them, the
namespaces' labels, the claims and volumes; and a pod's requests as resourcehelper.PodRequests sums them."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from tests.kubecheck.selectors import Obj, node_name

# Repeated on purpose from apimachinery's Quantity rather than taken from makeroom.model.quantity: the
# oracle must not share a parser (or a bug) with what it checks.
_SUFFIX = {
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)|[eE]([+-]?\d+))$")


def quantity(text: str | int | float) -> Decimal:
    """A resource.Quantity's exact value."""
    m = _QUANTITY.match(str(text).strip())
    if m is None:
        raise ValueError(f"quantity {text!r}")
    number, suffix, exponent = m.groups()
    if exponent is not None:
        return Decimal(number) * Decimal(10) ** int(exponent)
    return Decimal(number) * _SUFFIX[suffix or ""]


def amount(resource: str, value: Decimal) -> int:
    """The integer the scheduler compares: MilliValue() for cpu, Value() for the rest (both round up)."""
    return math.ceil(value * 1000) if resource == "cpu" else math.ceil(value)


def _container_requests(container: Obj) -> dict[str, Decimal]:
    """A container's requests after the API's defaulting: a limit with no request is the request."""
    res = container.get("resources") or {}
    out = {k: quantity(v) for k, v in (res.get("limits") or {}).items()}
    out.update({k: quantity(v) for k, v in (res.get("requests") or {}).items()})
    return out


def _add(into: dict[str, Decimal], more: Mapping[str, Decimal]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, Decimal(0)) + v


def _max(into: dict[str, Decimal], other: Mapping[str, Decimal]) -> None:
    for k, v in other.items():
        if v > into.get(k, Decimal(0)):
            into[k] = v


def pod_requests(pod: Obj) -> dict[str, int]:
    """resourcehelper.PodRequests: the containers' sum plus the sidecars (restartPolicy: Always init
    containers), at least the largest init container's need (which counts the sidecars started before
    it), plus the pod's overhead."""
    spec = pod.get("spec") or {}
    reqs: dict[str, Decimal] = {}
    for c in spec.get("containers") or ():
        _add(reqs, _container_requests(c))
    sidecars: dict[str, Decimal] = {}
    init_max: dict[str, Decimal] = {}
    for c in spec.get("initContainers") or ():
        own = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            _add(reqs, own)
            _add(sidecars, own)
            need = dict(sidecars)
        else:
            need = dict(own)
            _add(need, sidecars)
        _max(init_max, need)
    _max(reqs, init_max)
    _add(reqs, {k: quantity(v) for k, v in (spec.get("overhead") or {}).items()})
    return {k: amount(k, v) for k, v in reqs.items()}


def host_ports(pod: Obj) -> list[tuple[str, str, int]]:
    """schedutil.GetHostPorts: (hostIP, protocol, hostPort) of the containers and sidecars, defaults
    filled in as HostPortInfo sanitizes them (0.0.0.0, TCP)."""
    spec = pod.get("spec") or {}
    containers = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    containers += list(spec.get("containers") or ())
    out = []
    for c in containers:
        for p in c.get("ports") or ():
            port = int(p.get("hostPort") or 0)
            if port > 0:
                out.append((p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", port))
    return out


def pod_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def pod_namespace(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("namespace") or "default")


def pod_labels(pod: Obj) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


@dataclass
class Cluster:
    """Nodes by name, the pods bound to each (terminal pods are not in the scheduler's cache), pods
    nominated to a node and not bound, namespace labels, claims by namespace/name, volumes by name."""

    nodes: dict[str, Obj] = field(default_factory=dict)
    pods_on: dict[str, list[Obj]] = field(default_factory=dict)
    nominated: dict[str, list[Obj]] = field(default_factory=dict)
    namespaces: dict[str, Mapping[str, str]] = field(default_factory=dict)
    claims: dict[str, Obj] = field(default_factory=dict)
    volumes: dict[str, Obj] = field(default_factory=dict)

    @classmethod
    def of(cls, objects: Iterable[Obj]) -> Cluster:
        c = cls()
        pods: list[Obj] = []
        for obj in objects:
            kind, meta = obj.get("kind"), obj.get("metadata") or {}
            if kind == "Node":
                c.nodes[node_name(obj)] = obj
            elif kind == "Pod":
                pods.append(obj)
            elif kind == "Namespace":
                c.namespaces[str(meta.get("name"))] = meta.get("labels") or {}
            elif kind == "PersistentVolumeClaim":
                c.claims[pod_key(obj)] = obj
            elif kind == "PersistentVolume":
                c.volumes[str(meta.get("name"))] = obj
        c.pods_on = {name: [] for name in c.nodes}
        for pod in pods:
            c.place(pod)
        return c

    def place(self, pod: Obj) -> None:
        """Add a pod where its spec and status put it: bound to a node, or nominated to one."""
        if is_terminal(pod):
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            self.pods_on.setdefault(node, []).append(pod)
            return
        nominated = (pod.get("status") or {}).get("nominatedNodeName")
        if nominated:
            self.nominated.setdefault(nominated, []).append(pod)

    def without(self, key: str) -> Cluster:
        """The cluster with one pod removed from wherever it is (bound or nominated)."""
        return Cluster(
            self.nodes,
            {n: [p for p in ps if pod_key(p) != key] for n, ps in self.pods_on.items()},
            {n: [p for p in ps if pod_key(p) != key] for n, ps in self.nominated.items()},
            self.namespaces,
            self.claims,
            self.volumes,
        )

    def with_pods_on(self, node: str, pods: Iterable[Obj]) -> Cluster:
        """The cluster with more pods counted on one node (the nominated pods' first pass)."""
        on = dict(self.pods_on)
        on[node] = [*on.get(node, []), *pods]
        return Cluster(self.nodes, on, self.nominated, self.namespaces, self.claims, self.volumes)

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self.namespaces.get(namespace, {})

    def all_pods(self) -> Iterable[tuple[Obj, Obj]]:
        """(node, pod) for every bound pod on a known node."""
        for name, node in self.nodes.items():
            for pod in self.pods_on.get(name, ()):
                yield node, pod


def spec_of(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}
