"""Kubernetes objects (plain dicts, as ``kubectl get -o yaml`` or ``sanitize_for_serialization`` give
them) to a ClusterState: nodes, pods, PodDisruptionBudgets, and the autoscaler's status ConfigMap.

Only the fields that planning needs are read. Every problem is reported with its key path
(``items[3].spec.containers[0].resources.requests.cpu``) and nothing is guessed: a node group whose
min or max nobody gives is an error.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from makeroom.errors import InputError, Problem
from makeroom.model import (
    REPLICAS_OWNER,
    AutoscalerKind,
    DisruptionBudget,
    Node,
    NodeGroup,
    NodeSelectorRequirement,
    OwnerKind,
    Pod,
    PodSpec,
    PreemptionPolicy,
    QuantityError,
    Resources,
    Taint,
    Toleration,
    Workload,
)
from makeroom.model.resources import DEFAULT_MAX_PODS, PODS
from makeroom.model.state import ClusterState
from makeroom.snapshot.groups import (
    STATUS_CONFIGMAP,
    GroupConfig,
    bounds_for,
    group_of,
    parse_autoscaler_status,
    parse_taints,
)
from makeroom.snapshot.nodepools import KINDS as KARPENTER_KINDS
from makeroom.snapshot.nodepools import Karpenter, pool_group, upcoming
from makeroom.snapshot.quantities import quantity

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
UNGROUPED = ""  # group of a node that carries none of the group labels
_PER_NODE_LABELS = frozenset({"kubernetes.io/hostname"})
_TRANSIENT_TAINTS = (
    "node.kubernetes.io/",  # not-ready, unreachable, unschedulable ... set by the control plane
    "ToBeDeletedByClusterAutoscaler",
    "DeletionCandidateOfClusterAutoscaler",
    "node.cloudprovider.kubernetes.io/uninitialized",
)
_PREEMPT = PreemptionPolicy.PREEMPT_LOWER_PRIORITY.value
_POLICIES = frozenset(p.value for p in PreemptionPolicy)
_OWNER_KINDS = {
    "ReplicaSet": OwnerKind.REPLICA_SET,
    "StatefulSet": OwnerKind.STATEFUL_SET,
    "DaemonSet": OwnerKind.DAEMON_SET,
    "Job": OwnerKind.JOB,
    "Node": OwnerKind.NODE,
}


class _Problems:
    def __init__(self) -> None:
        self.items: list[Problem] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(Problem(path, message))


_EMPTY: Mapping[str, Any] = {}


def _is_map(x: Any) -> bool:
    return type(x) is dict or isinstance(x, Mapping)


def _map(obj: Any, key: str) -> Mapping[str, Any]:
    value = obj.get(key) if _is_map(obj) else None
    return value if value is not None and _is_map(value) else _EMPTY


def _list(obj: Any, key: str) -> list[Any]:
    value = obj.get(key) if _is_map(obj) else None
    return value if type(value) is list else []


def _str_map(value: Any) -> dict[str, str]:
    """Labels and annotations: string to string. A plain dict from a dump is kept as it is (the API
    server only stores strings there); anything else is converted."""
    if type(value) is dict and all(type(v) is str for v in value.values()):
        return value
    if not _is_map(value):
        return {}
    return {str(k): "" if v is None else str(v) for k, v in value.items()}


def _timestamp(value: Any) -> float:
    if not isinstance(value, str):
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _resources(value: Any, path: str, problems: _Problems) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.add(path, "expected a mapping of resource name to quantity")
        return {}
    out: dict[str, int] = {}
    for name, q in value.items():
        try:
            out[str(name)] = quantity(q)
        except QuantityError as exc:
            problems.add(f"{path}.{name}", str(exc))
    return out


def _is_true(conditions: list[Any], kind: str) -> bool:
    return any(
        isinstance(c, Mapping) and c.get("type") == kind and c.get("status") == "True" for c in conditions
    )


@dataclass(slots=True)
class _Builder:
    groups_config: GroupConfig | None
    prefix: str
    problems: _Problems = field(default_factory=_Problems)
    nodes: list[Node] = field(default_factory=list)
    pods: list[tuple[Pod, str]] = field(default_factory=list)
    pdbs: list[tuple[str, Mapping[str, Any], DisruptionBudget, str]] = field(default_factory=list)
    deployments: dict[str, tuple[int | None, dict[str, str]]] = field(default_factory=dict)
    replica_owners: dict[str, str] = field(default_factory=dict)  # workload -> who sets its replicas
    status: Mapping[str, Any] | None = None
    karpenter: Karpenter = field(default_factory=Karpenter)  # NodePools and NodeClaims
    _specs: dict[PodSpec, PodSpec] = field(default_factory=dict)
    _requests: dict[tuple[tuple[str, int], ...], Resources] = field(default_factory=dict)
    _by_key: dict[tuple[Any, ...], PodSpec] = field(default_factory=dict)

    def where(self, i: int) -> str:
        return f"{self.prefix}[{i}]" if self.prefix else f"[{i}]"

    def add(self, i: int, obj: Any) -> None:
        where = self.where(i)
        if not isinstance(obj, Mapping):
            self.problems.add(where, "expected a Kubernetes object (a mapping with kind and metadata)")
            return
        kind = obj.get("kind")
        meta = _map(obj, "metadata")
        if kind in ("Node", "Pod", "PodDisruptionBudget") and not isinstance(meta.get("name"), str):
            self.problems.add(f"{where}.metadata.name", "expected the object's name")
            return
        if kind == "Node":
            self.node(obj, where)
        elif kind == "Pod":
            self.pod(obj, where)
        elif kind == "PodDisruptionBudget":
            self.pdb(obj, where)
        elif kind == "Deployment" and isinstance(meta.get("name"), str):
            self.deployment(meta, _map(obj, "spec"))
        elif kind == "HorizontalPodAutoscaler" and isinstance(meta.get("name"), str):
            self.autoscaler(meta, _map(obj, "spec"))
        elif kind == "ConfigMap" and meta.get("name") == STATUS_CONFIGMAP and self.status is None:
            self.status = obj
        elif kind in KARPENTER_KINDS:
            self.karpenter.add(obj, where, self.problems.items)
        elif not isinstance(kind, str):
            self.problems.add(f"{where}.kind", "expected the object's kind (Node, Pod, ...)")

    # --- nodes -----------------------------------------------------------------------------------
    def node(self, obj: Mapping[str, Any], where: str) -> None:
        meta, spec, status = _map(obj, "metadata"), _map(obj, "spec"), _map(obj, "status")
        labels = _str_map(meta.get("labels"))
        problems = self.problems
        alloc_src = status.get("allocatable") or status.get("capacity")
        key = "allocatable" if status.get("allocatable") else "capacity"
        if not isinstance(alloc_src, Mapping):
            problems.add(f"{where}.status.allocatable", "expected the node's allocatable resources")
            return
        alloc = _resources(alloc_src, f"{where}.status.{key}", problems)
        alloc.setdefault(PODS, DEFAULT_MAX_PODS * 1000)
        inner = _Problems()
        taints = parse_taints(spec.get("taints") or [], f"{where}.spec.taints", inner.items)
        problems.items += inner.items
        self.nodes.append(
            Node(
                name=str(meta["name"]),
                group=group_of(labels) or UNGROUPED,
                allocatable=Resources(alloc),
                labels=labels,
                taints=taints,
                unschedulable=bool(spec.get("unschedulable")),
                ready=_is_true(_list(status, "conditions"), "Ready"),
                created_at=_timestamp(meta.get("creationTimestamp")),
                annotations=_str_map(meta.get("annotations")),
            )
        )

    # --- pods ------------------------------------------------------------------------------------
    def pod(self, obj: Mapping[str, Any], where: str) -> None:
        meta, spec, status = _map(obj, "metadata"), _map(obj, "spec"), _map(obj, "status")
        if status.get("phase") in ("Succeeded", "Failed"):
            return  # finished pods hold no room
        annotations = _str_map(meta.get("annotations"))
        labels = _str_map(meta.get("labels"))
        namespace = str(meta.get("namespace") or "default")
        owner_kind, workload = self.owner(meta, labels, annotations, namespace)
        key = self._spec_key(spec)
        pod_spec = self._by_key.get(key) if key is not None else None
        if pod_spec is None:
            before = len(self.problems.items)
            pod_spec = self.pod_spec(spec, where)
            if key is not None and len(self.problems.items) == before:
                self._by_key[key] = pod_spec
        node_name = spec.get("nodeName")
        created = _timestamp(meta.get("creationTimestamp"))
        conditions = _list(status, "conditions")
        nominated = status.get("nominatedNodeName")
        unschedulable = _unschedulable_since(conditions) if not node_name else None
        pod = Pod(
            name=str(meta["name"]),
            spec=pod_spec,
            workload=workload,
            namespace=namespace,
            owner_kind=owner_kind,
            node=str(node_name) if node_name else None,
            ready=_is_true(conditions, "Ready"),
            terminating=meta.get("deletionTimestamp") is not None,
            nominated_node=str(nominated) if nominated else None,
            created_at=created,
            unschedulable_since=unschedulable,
            annotations=annotations,
            labels=labels,
        )
        self.pods.append((pod, where))

    @staticmethod
    def _spec_key(spec: Mapping[str, Any]) -> tuple[Any, ...] | None:
        """Everything a PodSpec is made of, as text: pods of one template share it, and their
        PodSpec is parsed once. None when the spec is too odd to key (it is then parsed as is)."""
        containers = spec.get("containers")
        inits = spec.get("initContainers")
        if type(containers) is not list or not (inits is None or type(inits) is list):
            return None
        try:
            return (
                repr([c.get("resources") for c in containers]),
                repr([(c.get("resources"), c.get("restartPolicy")) for c in inits]) if inits else "",
                repr(spec.get("overhead")),
                repr(spec.get("priority")),
                spec.get("preemptionPolicy"),
                repr(spec.get("nodeSelector")),
                repr(spec.get("tolerations")),
                repr(spec.get("affinity", {}).get("nodeAffinity")) if spec.get("affinity") else "",
                repr(spec.get("priorityClassName")),
                repr(spec.get("terminationGracePeriodSeconds")),
                any(
                    type(v) is dict and ("emptyDir" in v or "hostPath" in v)
                    for v in spec.get("volumes") or ()
                ),
            )
        except (AttributeError, TypeError):
            return None

    def pod_spec(self, spec: Mapping[str, Any], where: str) -> PodSpec:
        requests = self.requests(spec, f"{where}.spec")
        priority = spec.get("priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int):
            self.problems.add(f"{where}.spec.priority", f"expected an integer priority, got {priority!r}")
            priority = 0
        policy = spec.get("preemptionPolicy") or _PREEMPT
        if policy not in _POLICIES:
            self.problems.add(
                f"{where}.spec.preemptionPolicy", f"expected PreemptLowerPriority or Never, got {policy!r}"
            )
            policy = _PREEMPT
        selector = spec.get("nodeSelector") or {}
        if not isinstance(selector, Mapping):
            self.problems.add(f"{where}.spec.nodeSelector", "expected a mapping of label to value")
            selector = {}
        pod_spec = PodSpec(
            requests=requests,
            priority=priority,
            preemption_policy=PreemptionPolicy(policy),
            node_selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
            tolerations=self.tolerations(spec.get("tolerations"), f"{where}.spec.tolerations"),
            required_affinity=self.affinity(spec, f"{where}.spec.affinity"),
            priority_class=str(spec.get("priorityClassName") or ""),
            termination_grace=float(spec.get("terminationGracePeriodSeconds") or 30),
            local_storage=any(
                isinstance(v, Mapping) and ("emptyDir" in v or "hostPath" in v)
                for v in _list(spec, "volumes")
            ),
        )
        return self._specs.setdefault(pod_spec, pod_spec)

    @staticmethod
    def owner(
        meta: Mapping[str, Any], labels: Mapping[str, str], annotations: Mapping[str, str], namespace: str
    ) -> tuple[OwnerKind, str | None]:
        refs = [r for r in _list(meta, "ownerReferences") if isinstance(r, Mapping)]
        ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
        if MIRROR_ANNOTATION in annotations:
            return OwnerKind.NODE, None
        if ref is None:
            return OwnerKind.NONE, None
        kind = _OWNER_KINDS.get(str(ref.get("kind")), OwnerKind.NONE)
        name = str(ref.get("name") or "")
        if kind == OwnerKind.REPLICA_SET:
            suffix = labels.get("pod-template-hash")
            if suffix and name.endswith("-" + suffix):
                name = name[: -len(suffix) - 1]
        if kind == OwnerKind.NODE:
            return kind, None
        return kind, name if namespace == "default" else f"{namespace}/{name}"

    def requests(self, spec: Mapping[str, Any], where: str) -> Resources:
        """What the scheduler counts: the sum over containers (and restartable init containers, the
        sidecars), at least the largest other init container, plus the pod overhead. A container
        with limits but no requests requests its limits."""
        total: dict[str, int] = {}
        for i, c in enumerate(_list(spec, "containers")):
            for k, v in self._container(c, f"{where}.containers[{i}]").items():
                total[k] = total.get(k, 0) + v
        sidecars: dict[str, int] = {}
        floor: dict[str, int] = {}
        for i, c in enumerate(_list(spec, "initContainers")):
            req = self._container(c, f"{where}.initContainers[{i}]")
            if isinstance(c, Mapping) and c.get("restartPolicy") == "Always":
                for k, v in req.items():
                    sidecars[k] = sidecars.get(k, 0) + v
                    total[k] = total.get(k, 0) + v
            else:
                for k, v in req.items():
                    floor[k] = max(floor.get(k, 0), v + sidecars.get(k, 0))
        for k, v in floor.items():
            total[k] = max(total.get(k, 0), v)
        for k, v in _resources(spec.get("overhead"), f"{where}.overhead", self.problems).items():
            total[k] = total.get(k, 0) + v
        key = tuple(sorted(total.items()))
        res = self._requests.get(key)
        if res is None:
            res = self._requests[key] = Resources(total)
        return res

    def _container(self, c: Any, where: str) -> dict[str, int]:
        resources = _map(c, "resources")
        requests = _resources(resources.get("requests"), f"{where}.resources.requests", self.problems)
        limits = _resources(resources.get("limits"), f"{where}.resources.limits", self.problems)
        for k, v in limits.items():
            requests.setdefault(k, v)
        return requests

    def tolerations(self, value: Any, where: str) -> tuple[Toleration, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.problems.add(where, "expected a list of tolerations")
            return ()
        out = []
        for i, t in enumerate(value):
            if not isinstance(t, Mapping):
                self.problems.add(f"{where}[{i}]", "expected a toleration {key, operator, value, effect}")
                continue
            op = t.get("operator") or "Equal"
            if op not in ("Equal", "Exists"):
                self.problems.add(f"{where}[{i}].operator", f"expected Equal or Exists, got {op!r}")
                continue
            out.append(
                Toleration(str(t.get("key") or ""), op, str(t.get("value") or ""), str(t.get("effect") or ""))
            )
        return tuple(out)

    def affinity(
        self, spec: Mapping[str, Any], where: str
    ) -> tuple[tuple[NodeSelectorRequirement, ...], ...]:
        required = _map(
            _map(_map(spec, "affinity"), "nodeAffinity"), "requiredDuringSchedulingIgnoredDuringExecution"
        )
        terms = []
        path = f"{where}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        ops = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"}
        for i, term in enumerate(_list(required, "nodeSelectorTerms")):
            reqs = []
            for j, e in enumerate(_list(term, "matchExpressions")):
                if not isinstance(e, Mapping) or not isinstance(e.get("key"), str):
                    self.problems.add(f"{path}[{i}].matchExpressions[{j}].key", "expected a label key")
                    continue
                op = e.get("operator")
                if op not in ops:
                    self.problems.add(
                        f"{path}[{i}].matchExpressions[{j}].operator",
                        f"expected one of {sorted(ops)}, got {op!r}",
                    )
                    continue
                values = tuple(str(v) for v in (e.get("values") or []))
                reqs.append(NodeSelectorRequirement(e["key"], str(op), values))
            terms.append(tuple(reqs))
        return tuple(terms)

    # --- workloads ---------------------------------------------------------------------------------
    def deployment(self, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
        """A Deployment gives its workload the replicas it wants (spec.replicas, not the pods that
        happen to exist) and its annotations, keyed as pods key their workload."""
        namespace = str(meta.get("namespace") or "default")
        name = str(meta["name"])
        replicas = spec.get("replicas")
        wanted = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else None
        key = name if namespace == "default" else f"{namespace}/{name}"
        self.deployments[key] = (wanted, _str_map(meta.get("annotations")))

    def autoscaler(self, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
        """An HPA owns its target Deployment's replica count: makeroom must not change it."""
        target = _map(spec, "scaleTargetRef")
        if target.get("kind") != "Deployment" or not isinstance(target.get("name"), str):
            return
        namespace = str(meta.get("namespace") or "default")
        name = str(target["name"])
        key = name if namespace == "default" else f"{namespace}/{name}"
        self.replica_owners[key] = f"HorizontalPodAutoscaler/{meta['name']}"

    # --- budgets ---------------------------------------------------------------------------------
    def pdb(self, obj: Mapping[str, Any], where: str) -> None:
        meta, spec = _map(obj, "metadata"), _map(obj, "spec")
        namespace = str(meta.get("namespace") or "default")
        lo, hi = spec.get("minAvailable"), spec.get("maxUnavailable")
        for key, value in (("minAvailable", lo), ("maxUnavailable", hi)):
            if value is None:
                continue
            ok = (isinstance(value, int) and not isinstance(value, bool) and value >= 0) or (
                isinstance(value, str) and value.endswith("%") and value[:-1].isdigit()
            )
            if not ok:
                self.problems.add(
                    f"{where}.spec.{key}", f"expected a count or a percentage such as 50%, got {value!r}"
                )
                return
        if (lo is None) == (hi is None):
            self.problems.add(f"{where}.spec", "expected exactly one of minAvailable and maxUnavailable")
            return
        budget = DisruptionBudget(max_unavailable=hi, min_available=lo)
        self.pdbs.append((namespace, _map(spec, "selector"), budget, where))


def _unschedulable_since(conditions: list[Any]) -> float | None:
    """When the scheduler last found no node for the pod: the lastTransitionTime of its
    PodScheduled=False condition with reason Unschedulable; None for a pod it has not tried."""
    for c in conditions:
        if (
            isinstance(c, Mapping)
            and c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == "Unschedulable"
        ):
            return _timestamp(c.get("lastTransitionTime"))
    return None


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector; an empty selector matches every pod, as for a PDB in policy/v1."""
    for k, v in _str_map(selector.get("matchLabels")).items():
        if labels.get(k) != v:
            return False
    for e in _list(selector, "matchExpressions"):
        if not isinstance(e, Mapping):
            return False
        req = NodeSelectorRequirement(str(e.get("key")), str(e.get("operator")), tuple(e.get("values") or ()))
        if not req.matches(labels):
            return False
    return True


def pod_from_object(obj: Mapping[str, Any], *, source: str = "object") -> Pod | None:
    """One Pod as ``state_from_objects`` makes it (None for a finished pod), for a cache that keeps a
    ClusterState up to date pod by pod. Its node and nomination are the object's: the caller adds it
    with ``ClusterState.add_pod`` and ``nominate``. Raises InputError like ``state_from_objects``."""
    b = _Builder(None, "")
    b.add(0, {**obj, "kind": "Pod"})
    if b.problems.items:
        raise InputError(source, b.problems.items)
    return b.pods[0][0] if b.pods else None


def state_from_objects(
    objects: Iterable[Mapping[str, Any]],
    groups: GroupConfig | None = None,
    autoscaler_status: Mapping[str, Any] | None = None,
    *,
    source: str = "objects",
    prefix: str = "items",
) -> ClusterState:
    """Build the ClusterState of a cluster from its Node, Pod and PodDisruptionBudget objects (other
    kinds are ignored; the ``cluster-autoscaler-status`` ConfigMap may be among them; a Deployment
    gives its workload its spec.replicas and annotations). Node groups
    come from the well-known node labels; their min and max from ``autoscaler_status`` when given,
    else from ``groups``. Raises InputError naming ``source`` and key paths under ``prefix``."""
    with _without_cyclic_gc():
        b = _Builder(groups, prefix)
        b.status = autoscaler_status
        for i, obj in enumerate(objects):
            b.add(i, obj)
        node_groups = _node_groups(b, source)
        if b.problems.items:
            raise InputError(source, b.problems.items)
        return _assemble(b, node_groups, source)


@contextmanager
def _without_cyclic_gc() -> Iterator[None]:
    """Building 150,000 pods allocates millions of objects and no reference cycle; the cyclic
    collector would walk the growing graph again and again (a third of the build time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _node_groups(b: _Builder, source: str) -> list[NodeGroup]:
    status = parse_autoscaler_status(b.status) if b.status is not None else {}
    config = b.groups_config
    names: list[str] = []
    if config is not None:
        names += [g.name for g in config.groups]
    pools = {p.name: p for p in b.karpenter.pools}
    names += sorted(({n.group for n in b.nodes if n.group != UNGROUPED} | set(pools)) - set(names))
    out: list[NodeGroup] = []
    for name in names:
        members = [n for n in b.nodes if n.group == name]
        if name in pools:  # a Karpenter NodePool says its own bounds
            pool = pool_group(pools[name], members, b.karpenter.claims, config, b.problems.items)
            if pool is not None:
                out.append(pool)
            continue
        spec = config.get(name) if config is not None else None
        bounds = bounds_for(name, status)
        lo = bounds.min if bounds is not None else (spec.min if spec is not None else None)
        hi = bounds.max if bounds is not None else (spec.max if spec is not None else None)
        if (lo is None or hi is None) and b.status is not None and members and spec is None:
            lo = hi = len(members)  # the autoscaler does not manage the group: its size is fixed
        if lo is None or hi is None:
            where = spec.path if spec is not None else ""
            missing = " and ".join(k for k, v in (("min", lo), ("max", hi)) if v is None)
            b.problems.add(
                f"{where}.{missing.split(' ')[0]}" if where else "",
                f"node group {name!r} ({len(members)} node(s)): no {missing}; give the "
                f"{STATUS_CONFIGMAP} ConfigMap or a --groups file with groups[].min and groups[].max",
            )
            continue
        capacity = spec.capacity if spec is not None and spec.capacity is not None else None
        ready = [n for n in members if n.ready] or members
        if capacity is None and ready:
            capacity = max((n.allocatable for n in ready), key=lambda r: (r[PODS] > 0, sorted(r.items())))
        if capacity is None:
            b.problems.add(
                f"{spec.path}.capacity" if spec is not None else "",
                f"node group {name!r} has no node to copy a template from; give groups[].capacity",
            )
            continue
        labels = (
            dict(spec.labels) if spec is not None and spec.labels is not None else _common_labels(members)
        )
        taints = spec.taints if spec is not None and spec.taints is not None else _common_taints(members)
        out.append(
            NodeGroup(
                name=name,
                capacity=capacity,
                labels=labels,
                taints=taints,
                min=lo,
                max=max(hi, 0),
                price_per_hour=(spec.price_per_hour or 0.0) if spec is not None else 0.0,
            )
        )
    del source
    return out


def _common_labels(nodes: list[Node]) -> dict[str, str]:
    if not nodes:
        return {}
    common = dict(nodes[0].labels)
    for n in nodes[1:]:
        common = {k: v for k, v in common.items() if n.labels.get(k) == v}
    return {k: v for k, v in common.items() if k not in _PER_NODE_LABELS}


def _common_taints(nodes: list[Node]) -> tuple[Taint, ...]:
    if not nodes:
        return ()
    common = [t for t in nodes[0].taints if not t.key.startswith(_TRANSIENT_TAINTS)]
    for n in nodes[1:]:
        common = [t for t in common if t in n.taints]
    return tuple(common)


def _assemble(b: _Builder, groups: list[NodeGroup], source: str) -> ClusterState:
    workloads: dict[str, Workload] = {}
    counts: dict[str, int] = {}
    labels_of: dict[str, tuple[str, Mapping[str, str]]] = {}
    for pod, _ in b.pods:
        if pod.workload is None or pod.terminating:
            continue
        counts[pod.workload] = counts.get(pod.workload, 0) + 1
        if pod.workload not in workloads:
            workloads[pod.workload] = Workload(
                pod.workload, pod.spec, 0, pod.namespace, owner_kind=pod.owner_kind
            )
            labels_of[pod.workload] = (pod.namespace, pod.labels)
    for name, w in workloads.items():
        w.replicas = counts[name]
        deployment = b.deployments.get(name)
        if deployment is not None:
            wanted, annotations = deployment
            if wanted is not None:
                w.replicas = wanted
            w.annotations = dict(annotations)
        w.replicas_owner = b.replica_owners.get(name) or w.annotations.get(REPLICAS_OWNER)
    for namespace, selector, budget, _ in b.pdbs:
        for name, (ns, labels) in labels_of.items():
            if ns == namespace and workloads[name].pdb is None and selector_matches(selector, labels):
                workloads[name].pdb = budget
    names: set[str] = set()
    for n in b.nodes:
        names.update(n.allocatable)
    for spec in b._specs:
        names.update(spec.requests)
    for g in groups:
        names.update(g.capacity)
    coming = upcoming(b.karpenter.claims, {g.name: g for g in groups}, {n.name for n in b.nodes})
    kind = AutoscalerKind.KARPENTER if b.karpenter.pools else AutoscalerKind.CLUSTER_AUTOSCALER
    state = ClusterState(groups, workloads.values(), names, capacity=max(64, len(b.nodes)), autoscaler=kind)
    problems: list[Problem] = []
    seen_nodes: set[str] = set()
    for n in [*b.nodes, *coming]:
        if n.name in seen_nodes:
            problems.append(Problem("", f"node {n.name!r} appears twice"))
            continue
        seen_nodes.add(n.name)
        state.add_node(n)
    seen_pods: set[str] = set()
    accepted: list[Pod] = []
    nominations: list[tuple[Pod, str]] = []
    for pod, info in b.pods:
        if pod.key in seen_pods:
            problems.append(Problem(f"{info}.metadata.name", f"pod {pod.key!r} appears twice"))
            continue
        seen_pods.add(pod.key)
        if pod.node is not None and pod.node not in state.nodes:
            problems.append(
                Problem(f"{info}.spec.nodeName", f"expected a node of the dump, got {pod.node!r}")
            )
            continue
        if pod.node is None and pod.nominated_node in state.nodes:
            nominations.append((pod, pod.nominated_node))
        pod.nominated_node = None
        accepted.append(pod)
    if problems:
        raise InputError(source, problems)
    state.add_pods(accepted)
    for pod, node in nominations:
        state.nominate(pod, node)
    return state
