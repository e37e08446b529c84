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
from dataclasses import dataclass, field, replace
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
    Resources,
    Taint,
    TaintEffect,
    Toleration,
    Workload,
    limits,
)
from makeroom.model.expander import PRIORITY_CONFIGMAP, group_priorities
from makeroom.model.objects import NODE_NAME_FIELD
from makeroom.model.quantity import MAX_DURATION, MAX_QUANTITY
from makeroom.model.resources import DEFAULT_MAX_PODS, PODS
from makeroom.model.state import ClusterState
from makeroom.snapshot.fields import (
    EMPTY,
    NODE_OPERATORS,
    UNFIT,
    Problems,
    is_map,
    label_selector,
    list_at,
    map_at,
    maps_at,
    requirement,
    resources,
    str_map,
)
from makeroom.snapshot.groups import (
    STATUS_CONFIGMAP,
    GroupConfig,
    bounds_for,
    group_of,
    parse_taints,
    read_autoscaler_status,
    read_priority_expander,
)
from makeroom.snapshot.nodepools import KINDS as KARPENTER_KINDS
from makeroom.snapshot.nodepools import Karpenter, pool_group, upcoming
from makeroom.snapshot.placement import Storage, claim_names, host_ports, pod_affinity, topology_spread

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


_Problems = Problems  # the builder's problems, with their key paths
_is_map = is_map


def _map(obj: Any, key: str) -> Mapping[str, Any]:
    """For fields already checked (or where any shape is harmless): a mapping, else empty."""
    value = obj.get(key) if is_map(obj) else None
    return value if value is not None and is_map(value) else EMPTY


def _list(obj: Any, key: str) -> list[Any]:
    value = obj.get(key) if is_map(obj) else None
    return value if type(value) is list else []


def _timestamp(value: Any) -> float:
    if not isinstance(value, str):
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _is_true(conditions: list[Any], kind: str) -> bool:
    return any(
        isinstance(c, Mapping) and c.get("type") == kind and c.get("status") == "True" for c in conditions
    )


@dataclass(slots=True)
class _Builder:
    groups_config: GroupConfig | None
    prefix: str
    skipped: list[Problem] | None = None  # the cluster's objects: leave a broken one out, go on
    problems: _Problems = field(default_factory=_Problems)
    nodes: list[Node] = field(default_factory=list)
    pods: list[tuple[Pod, str]] = field(default_factory=list)
    pdbs: list[tuple[str, Mapping[str, Any], DisruptionBudget, str]] = field(default_factory=list)
    deployments: dict[str, tuple[int | None, dict[str, str]]] = field(default_factory=dict)
    templates: dict[str, PodSpec] = field(default_factory=dict)  # Deployment -> its pods' shape
    replica_owners: dict[str, str] = field(default_factory=dict)  # workload -> who sets its replicas
    status: Mapping[str, Any] | None = None
    status_where: str = "the autoscaler status"
    priorities: Mapping[str, Any] | None = None  # the priority expander's ConfigMap
    priorities_where: str = "the priority expander's ConfigMap"
    priority_rules: dict[int, list[str]] | None = None
    unknown_groups: list[str] | None = None  # given: a group nothing bounds is fixed, and named here
    karpenter: Karpenter = field(default_factory=Karpenter)  # NodePools and NodeClaims
    storage: Storage = field(default_factory=Storage)  # bound claims and their volumes
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)  # labels, for namespaceSelector
    claimed: list[tuple[Pod, tuple[str, ...]]] = field(default_factory=list)  # pods whose claims to resolve
    _specs: dict[PodSpec, PodSpec] = field(default_factory=dict)
    _requests: dict[tuple[tuple[str, int], ...], Resources] = field(default_factory=dict)
    _by_key: dict[tuple[Any, ...], PodSpec] = field(default_factory=dict)
    # nodes alike share one taints tuple: the view groups nodes by it (model.view, ``_kinds``)
    _taints: dict[tuple[Taint, ...], tuple[Taint, ...]] = field(default_factory=dict)

    @property
    def lenient(self) -> bool:
        return self.skipped is not None

    def add(self, where: str, obj: Any) -> None:
        """One object at key path ``where``; with ``skipped``, an object with a problem is left out."""
        before = len(self.problems)
        counts = (len(self.nodes), len(self.pods), len(self.pdbs))
        self._add(where, obj)
        if self.skipped is not None and len(self.problems) > before:
            del self.nodes[counts[0] :], self.pods[counts[1] :], self.pdbs[counts[2] :]
            name = _name_of(obj)  # the cluster's objects are known by name, not by position
            for p in self.problems.items[before:]:
                path = name + p.path[len(where) :] if name and p.path.startswith(where) else p.path
                self.skipped.append(Problem(path, p.message))
            del self.problems.items[before:]

    def _add(self, where: str, obj: Any) -> None:
        if not isinstance(obj, Mapping):
            self.problems.add(where, "expected a Kubernetes object (a mapping with kind and metadata)")
            return
        kind = obj.get("kind")
        meta = map_at(obj, "metadata", where, self.problems)
        if kind in ("Node", "Pod", "PodDisruptionBudget") and not isinstance(meta.get("name"), str):
            self.problems.add(f"{where}.metadata.name", "expected the object's name")
            return
        if kind == "Node":
            self.node(obj, meta, where)
        elif kind == "Pod":
            self.pod(obj, meta, where)
        elif kind == "PodDisruptionBudget":
            self.pdb(obj, meta, where)
        elif kind == "Deployment" and isinstance(meta.get("name"), str):
            self.deployment(meta, map_at(obj, "spec", where, self.problems), where)
        elif kind == "HorizontalPodAutoscaler" and isinstance(meta.get("name"), str):
            self.autoscaler(meta, _map(obj, "spec"))
        elif kind == "ConfigMap" and meta.get("name") == STATUS_CONFIGMAP and self.status is None:
            self.status, self.status_where = obj, where
        elif kind == "ConfigMap" and meta.get("name") == PRIORITY_CONFIGMAP and self.priorities is None:
            self.priorities, self.priorities_where = obj, where
        elif kind in KARPENTER_KINDS:
            self.karpenter.add(obj, where, self.problems.items)
        elif kind in ("Namespace", "PersistentVolume", "PersistentVolumeClaim") and isinstance(
            meta.get("name"), str
        ):
            self.placement_input(kind, obj, meta, where)
        elif not isinstance(kind, str):
            self.problems.add(f"{where}.kind", "expected the object's kind (Node, Pod, ...)")

    def placement_input(self, kind: str, obj: Mapping[str, Any], meta: Mapping[str, Any], where: str) -> None:
        """What places pods besides nodes: namespaces' labels (namespaceSelector), claims and volumes."""
        if kind == "Namespace":
            self.namespaces[str(meta["name"])] = str_map(
                meta.get("labels"), f"{where}.metadata.labels", self.problems
            )
        elif kind == "PersistentVolumeClaim":
            self.storage.add_claim(obj, meta, where, self.problems)
        else:
            self.storage.add_volume(obj, meta, where, self.problems)

    def resolve_claims(self, storage: Storage) -> None:
        """Each pod that mounts claims gets the bound volumes' node affinity and zones in its spec."""
        for pod, claims in self.claimed:
            volumes = storage.constraints(pod.namespace, claims)
            if volumes:
                spec = replace(pod.spec, volumes=volumes)
                pod.spec = self._specs.setdefault(spec, spec)
        self.claimed.clear()

    # --- nodes -----------------------------------------------------------------------------------
    def node(self, obj: Mapping[str, Any], meta: Mapping[str, Any], where: str) -> None:
        problems = self.problems
        spec = map_at(obj, "spec", where, problems)
        status = map_at(obj, "status", where, problems)
        labels = str_map(meta.get("labels"), f"{where}.metadata.labels", problems)
        key = "allocatable" if status.get("allocatable") else "capacity"
        alloc_src = status.get(key)
        if not isinstance(alloc_src, Mapping):
            problems.add(f"{where}.status.allocatable", "expected the node's allocatable resources")
            return
        # A node beyond the range has at least the most any pod may ask: it stays in the plan.
        beyond = MAX_QUANTITY if self.lenient else None
        alloc = resources(alloc_src, f"{where}.status.{key}", problems, beyond)
        alloc.setdefault(PODS, DEFAULT_MAX_PODS * 1000)
        taints = parse_taints(spec.get("taints") or [], f"{where}.spec.taints", problems.items)
        taints = self._taints.setdefault(taints, taints)
        self.nodes.append(
            Node(
                name=str(meta["name"]),
                group=group_of(labels) or UNGROUPED,
                allocatable=Resources(alloc),
                labels={**labels, NODE_NAME_FIELD: str(meta["name"])},
                taints=taints,
                unschedulable=bool(spec.get("unschedulable")),
                ready=_is_true(list_at(status, "conditions", f"{where}.status", problems), "Ready"),
                created_at=_timestamp(meta.get("creationTimestamp")),
                annotations=str_map(meta.get("annotations"), f"{where}.metadata.annotations", problems),
            )
        )

    # --- pods ------------------------------------------------------------------------------------
    def pod(self, obj: Mapping[str, Any], meta: Mapping[str, Any], where: str) -> None:
        problems = self.problems
        spec = map_at(obj, "spec", where, problems)
        status = map_at(obj, "status", where, problems)
        if status.get("phase") in ("Succeeded", "Failed"):
            return  # finished pods hold no room
        annotations = str_map(meta.get("annotations"), f"{where}.metadata.annotations", problems)
        labels = str_map(meta.get("labels"), f"{where}.metadata.labels", problems)
        namespace = str(meta.get("namespace") or "default")
        owner_kind, workload = self.owner(meta, labels, annotations, namespace)
        key = self._spec_key(spec)
        pod_spec = self._by_key.get(key) if key is not None else None
        if pod_spec is None:
            before = len(problems)
            pod_spec = self.pod_spec(spec, where)
            if key is not None and len(problems) == before:
                self._by_key[key] = pod_spec
        node_name = spec.get("nodeName")
        if node_name is not None and not isinstance(node_name, str):
            problems.add(f"{where}.spec.nodeName", f"expected a node name, got {node_name!r}")
        created = _timestamp(meta.get("creationTimestamp"))
        conditions = list_at(status, "conditions", f"{where}.status", problems)
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
            gone_by=_timestamp(meta["deletionTimestamp"]) if meta.get("deletionTimestamp") else None,
            nominated_node=str(nominated) if nominated else None,
            created_at=created,
            unschedulable_since=unschedulable,
            annotations=annotations,
            labels=labels,
            gated=bool(spec.get("schedulingGates")) and not node_name,
        )
        claims = claim_names(spec, f"{where}.spec", problems)
        if claims:
            self.claimed.append((pod, claims))
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
                repr(spec.get("affinity")),
                repr(spec.get("topologySpreadConstraints")),
                repr([c.get("ports") for c in containers]),
                repr([c.get("ports") for c in inits]) if inits else "",
                repr(spec.get("priorityClassName")),
                repr(spec.get("terminationGracePeriodSeconds")),
                type(spec.get("volumes")).__name__,
                any(
                    type(v) is dict and ("emptyDir" in v or "hostPath" in v)
                    for v in spec.get("volumes") or ()
                ),
                any(type(v) is dict and "persistentVolumeClaim" in v for v in spec.get("volumes") or ()),
            )
        except (AttributeError, TypeError):
            return None

    def pod_spec(self, spec: Mapping[str, Any], where: str) -> PodSpec:
        problems = self.problems
        requests = self.requests(spec, f"{where}.spec")
        priority = spec.get("priority", 0)
        try:
            priority = limits.priority(priority)
        except limits.InvalidValueError as exc:
            problems.add(f"{where}.spec.priority", str(exc))
            priority = 0
        policy = spec.get("preemptionPolicy") or _PREEMPT
        if policy not in _POLICIES:
            problems.add(
                f"{where}.spec.preemptionPolicy", f"expected PreemptLowerPriority or Never, got {policy!r}"
            )
            policy = _PREEMPT
        selector = spec.get("nodeSelector")
        if selector is not None and not isinstance(selector, Mapping):
            problems.add(f"{where}.spec.nodeSelector", "expected a mapping of label to value")
            selector = None
        node_selector = str_map(selector, f"{where}.spec.nodeSelector", problems)
        volumes = list_at(spec, "volumes", f"{where}.spec", problems)
        affinity, preferred_affinity = pod_affinity(spec, "podAffinity", f"{where}.spec", problems)
        anti_affinity, preferred_anti = pod_affinity(spec, "podAntiAffinity", f"{where}.spec", problems)
        pod_spec = PodSpec(
            requests=requests,
            priority=priority,
            preemption_policy=PreemptionPolicy(policy),
            node_selector=tuple(sorted(node_selector.items())),
            tolerations=self.tolerations(spec.get("tolerations"), f"{where}.spec.tolerations"),
            required_affinity=self.affinity(spec, f"{where}.spec"),
            priority_class=str(spec.get("priorityClassName") or ""),
            termination_grace=self.grace(spec.get("terminationGracePeriodSeconds"), where),
            local_storage=any(
                isinstance(v, Mapping) and ("emptyDir" in v or "hostPath" in v) for v in volumes
            ),
            claims_volume=any(isinstance(v, Mapping) and "persistentVolumeClaim" in v for v in volumes),
            pod_affinity=affinity,
            pod_anti_affinity=anti_affinity,
            preferred_pod_affinity=preferred_affinity,
            preferred_pod_anti_affinity=preferred_anti,
            topology_spread=topology_spread(spec, f"{where}.spec", problems),
            host_ports=host_ports(spec, f"{where}.spec", problems),
        )
        return self._specs.setdefault(pod_spec, pod_spec)

    def grace(self, value: Any, where: str) -> float:
        """terminationGracePeriodSeconds: a whole number of seconds (30 when absent). Kubernetes
        takes any int64; beyond ``MAX_DURATION`` it makes no difference, and counts as that."""
        if value is None:
            return 30.0
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
            self.problems.add(
                f"{where}.spec.terminationGracePeriodSeconds",
                f"expected a whole number of seconds, 0 or more, got {value!r}",
            )
            return 30.0
        return min(float(min(value, 2**53)), MAX_DURATION)

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
        problems = self.problems
        total: dict[str, int] = {}
        for path, c in maps_at(spec, "containers", where, problems):
            for k, v in self._container(c, path).items():
                total[k] = total.get(k, 0) + v
        sidecars: dict[str, int] = {}
        floor: dict[str, int] = {}
        for path, c in maps_at(spec, "initContainers", where, problems):
            req = self._container(c, path)
            if c.get("restartPolicy") == "Always":
                for k, v in req.items():
                    sidecars[k] = sidecars.get(k, 0) + v
                    total[k] = total.get(k, 0) + v
            else:
                for k, v in req.items():
                    floor[k] = max(floor.get(k, 0), v + sidecars.get(k, 0))
        for k, v in floor.items():
            total[k] = max(total.get(k, 0), v)
        overhead = resources(spec.get("overhead"), f"{where}.overhead", problems, self._beyond)
        for k, v in overhead.items():
            total[k] = total.get(k, 0) + v
        for k, v in total.items():
            if v > MAX_QUANTITY:  # containers each in range, their sum not
                if not self.lenient:
                    problems.add(f"{where}.containers", f"expected requests of at most 1Pi of {k} in all")
                total[k] = UNFIT
        key = tuple(sorted(total.items()))
        res = self._requests.get(key)
        if res is None:
            res = self._requests[key] = Resources(total)
        return res

    @property
    def _beyond(self) -> int | None:
        return UNFIT if self.lenient else None

    def _container(self, c: Mapping[str, Any], where: str) -> dict[str, int]:
        problems = self.problems
        res = map_at(c, "resources", where, problems)
        requests = resources(res.get("requests"), f"{where}.resources.requests", problems, self._beyond)
        bounds = resources(res.get("limits"), f"{where}.resources.limits", problems, self._beyond)
        for k, v in bounds.items():
            requests.setdefault(k, v)
        return requests

    def tolerations(self, value: Any, where: str) -> tuple[Toleration, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.problems.add(where, "expected a list of tolerations")
            return ()
        out = []
        effects = ("", *(e.value for e in TaintEffect))
        for i, t in enumerate(value):
            if not isinstance(t, Mapping):
                self.problems.add(f"{where}[{i}]", "expected a toleration {key, operator, value, effect}")
                continue
            op = t.get("operator") or "Equal"
            if op not in ("Equal", "Exists"):
                self.problems.add(f"{where}[{i}].operator", f"expected Equal or Exists, got {op!r}")
                continue
            effect = t.get("effect") or ""
            if effect not in effects:
                self.problems.add(
                    f"{where}[{i}].effect",
                    f"expected NoSchedule, PreferNoSchedule or NoExecute, got {effect!r}",
                )
                continue
            out.append(Toleration(str(t.get("key") or ""), op, str(t.get("value") or ""), str(effect)))
        return tuple(out)

    def affinity(
        self, spec: Mapping[str, Any], where: str
    ) -> tuple[tuple[NodeSelectorRequirement, ...], ...]:
        problems = self.problems
        path = f"{where}.affinity"
        node_affinity = map_at(map_at(spec, "affinity", where, problems), "nodeAffinity", path, problems)
        path += ".nodeAffinity"
        key = "requiredDuringSchedulingIgnoredDuringExecution"
        required = map_at(node_affinity, key, path, problems)
        path += f".{key}"
        terms = []
        for term_path, term in maps_at(required, "nodeSelectorTerms", path, problems):
            reqs = []
            for j, e in enumerate(list_at(term, "matchExpressions", term_path, problems)):
                req = requirement(e, f"{term_path}.matchExpressions[{j}]", problems, NODE_OPERATORS)
                if req is not None:
                    reqs.append(req)
            for j, e in enumerate(list_at(term, "matchFields", term_path, problems)):
                # metadata.name is the one field Kubernetes matches: only the nodes named match
                req = requirement(e, f"{term_path}.matchFields[{j}]", problems, ("In", "NotIn"))
                if req is not None:
                    reqs.append(NodeSelectorRequirement(NODE_NAME_FIELD, req.operator, req.values))
            if not reqs:  # an empty term matches no node (the scheduler's rule), never every node
                reqs.append(NodeSelectorRequirement(NODE_NAME_FIELD, "In", ()))
            terms.append(tuple(reqs))
        return tuple(terms)

    # --- workloads ---------------------------------------------------------------------------------
    def deployment(self, meta: Mapping[str, Any], spec: Mapping[str, Any], where: str) -> None:
        """A Deployment gives its workload the replicas it wants (spec.replicas, not the pods that
        happen to exist) and its annotations, keyed as pods key their workload."""
        namespace = str(meta.get("namespace") or "default")
        name = str(meta["name"])
        replicas = spec.get("replicas")
        if replicas is not None:
            try:
                replicas = limits.count(replicas, high=2**31 - 1, what="a number of replicas")
            except limits.InvalidValueError as exc:
                self.problems.add(f"{where}.spec.replicas", str(exc))
                return
        annotations = str_map(meta.get("annotations"), f"{where}.metadata.annotations", self.problems)
        key = name if namespace == "default" else f"{namespace}/{name}"
        self.deployments[key] = (replicas, annotations)
        # A template's priority is nobody's word: the API server resolves a pod's from its class on
        # admission, and a tenant may write any number here (to steer headroom's default target).
        template = {k: v for k, v in _map(_map(spec, "template"), "spec").items() if k != "priority"}
        if template.get("containers"):
            before = len(self.problems)
            parsed = self.pod_spec(template, f"{where}.spec.template")
            if len(self.problems) == before:
                self.templates[key] = parsed

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
    def pdb(self, obj: Mapping[str, Any], meta: Mapping[str, Any], where: str) -> None:
        spec = map_at(obj, "spec", where, self.problems)
        namespace = str(meta.get("namespace") or "default")
        lo, hi = spec.get("minAvailable"), spec.get("maxUnavailable")
        for key, value in (("minAvailable", lo), ("maxUnavailable", hi)):
            if value is None:
                continue
            ok = (isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31) or (
                isinstance(value, str)
                and value.endswith("%")
                and value[:-1].isdigit()
                and int(value[:-1]) <= 100
            )
            if not ok:
                self.problems.add(
                    f"{where}.spec.{key}", f"expected a count or a percentage such as 50%, got {value!r}"
                )
                return
        if (lo is None) == (hi is None):
            self.problems.add(f"{where}.spec", "expected exactly one of minAvailable and maxUnavailable")
            return
        selector = spec.get("selector")
        if label_selector(selector, f"{where}.spec.selector", self.problems) is None:
            return
        budget = DisruptionBudget(max_unavailable=hi, min_available=lo)
        self.pdbs.append((namespace, selector if isinstance(selector, Mapping) else EMPTY, budget, where))


def _name_of(obj: Any) -> str:
    """``Pod default/web-1``: how a person finds the object in the cluster."""
    if not is_map(obj):
        return ""
    meta = _map(obj, "metadata")
    name, ns = meta.get("name"), meta.get("namespace")
    return f"{obj.get('kind')} {ns}/{name}" if ns else f"{obj.get('kind')} {name}"


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
    for k, v in str_map(selector.get("matchLabels"), "", Problems()).items():
        if labels.get(k) != v:
            return False
    for e in _list(selector, "matchExpressions"):
        if not isinstance(e, Mapping):
            return False
        req = NodeSelectorRequirement(str(e.get("key")), str(e.get("operator")), tuple(e.get("values") or ()))
        if not req.matches(labels):
            return False
    return True


def pod_from_object(
    obj: Mapping[str, Any],
    *,
    source: str = "object",
    skipped: list[Problem] | None = None,
    storage: Storage | None = None,
) -> Pod | None:
    """One Pod as ``state_from_objects`` makes it (None for a finished pod), for a cache that keeps a
    ClusterState up to date pod by pod. Its node and nomination are the object's: the caller adds it
    with ``ClusterState.add_pod`` and ``nominate``. Its claims are resolved through ``storage`` (the
    claims and volumes of the last full build, ``storage_from_objects``). Raises InputError like
    ``state_from_objects``; with ``skipped``, a broken pod is None and its problems are added there."""
    b = _Builder(None, "", skipped)
    b.add("[0]", {**obj, "kind": "Pod"})
    if b.problems.items:
        raise InputError(source, b.problems.items)
    b.resolve_claims(storage or Storage())
    return b.pods[0][0] if b.pods else None


def storage_from_objects(objects: Iterable[Mapping[str, Any]]) -> Storage:
    """The bound claims and volumes among the objects (others are ignored; broken ones left out)."""
    b = _Builder(None, "", [])
    for i, obj in enumerate(objects):
        if obj.get("kind") in ("PersistentVolume", "PersistentVolumeClaim"):
            b.add(f"[{i}]", obj)
    return b.storage


def on_unknown_node(node: str) -> str:
    """Why a live cluster's pod is left out of planning: the node it is bound to is not there."""
    return f"bound to {node!r}, a node the cluster does not have (gone, or not seen yet): left out"


def state_from_objects(
    objects: Iterable[Mapping[str, Any]],
    groups: GroupConfig | None = None,
    autoscaler_status: Mapping[str, Any] | None = None,
    *,
    source: str = "objects",
    prefix: str = "items",
    skipped: list[Problem] | None = None,
    unknown_groups: list[str] | None = None,
) -> ClusterState:
    """Build the ClusterState of a cluster from its Node, Pod and PodDisruptionBudget objects (other
    kinds are ignored; the ``cluster-autoscaler-status`` ConfigMap may be among them; a Deployment
    gives its workload its spec.replicas and annotations). Node groups
    come from the well-known node labels; their min and max from ``autoscaler_status`` when given,
    else from ``groups``. With ``unknown_groups`` (a list), a group that neither names is fixed at
    the nodes it has (the autoscaler does not manage it, as far as makeroom can tell) and its name is
    added to the list, where a controller must never stop at it; without, it is refused. Raises
    InputError naming ``source`` and key paths under ``prefix``.

    Every field is checked with the shared rules (``makeroom.model.limits``). With ``skipped`` (the
    cluster's own objects, which the API server has checked already), an object with a problem is
    left out and its problems added there, a quantity beyond the range makes a pod that fits
    nowhere, and only what spans the whole cluster (node groups) still raises."""
    with _without_cyclic_gc():
        b = _Builder(groups, prefix, skipped)
        b.status = autoscaler_status
        b.unknown_groups = unknown_groups
        for where, obj in _flatten(objects, prefix, b):
            b.add(where, obj)
        b.resolve_claims(b.storage)
        node_groups = _node_groups(b, source)
        if b.priorities is not None:  # the cluster's own: read what it can, say what it cannot
            found = b.skipped if b.skipped is not None else b.problems.items
            b.priority_rules = read_priority_expander(b.priorities, b.priorities_where, found)
        if b.problems.items:
            raise InputError(source, b.problems.items)
        return _assemble(b, node_groups, source)


def _flatten(objects: Iterable[Any], prefix: str, b: _Builder) -> Iterator[tuple[str, Any]]:
    """Each object with its key path; a List among the items (``kind: List``, ``PodList`` ...) is
    read as its items, ``items[3].items[0]``, so that concatenated dumps lose nothing."""
    stack: list[tuple[str, Iterator[Any]]] = [(prefix, iter(enumerate(objects)))]
    while stack:
        path, it = stack[-1]
        step = next(it, None)
        if step is None:
            stack.pop()
            continue
        i, obj = step
        where = f"{path}[{i}]"
        kind = obj.get("kind") if is_map(obj) else None
        if isinstance(kind, str) and kind.endswith("List") and "items" in obj:
            items = obj["items"]
            if type(items) is list:
                stack.append((f"{where}.items", iter(enumerate(items))))
            else:
                b.problems.add(f"{where}.items", "expected a list of Kubernetes objects")
            continue
        yield where, obj


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
    status: dict[str, tuple[int, int]] = {}
    if b.status is not None:
        before = len(b.problems)
        status = read_autoscaler_status(b.status, b.status_where, b.problems.items)
        if b.skipped is not None and len(b.problems) > before:
            b.skipped.extend(b.problems.items[before:])  # the cluster: say so, and go on without it
            del b.problems.items[before:]
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
        if (lo is None or hi is None) and members and spec is None:
            if b.unknown_groups is not None:
                b.unknown_groups.append(name)
                lo = hi = len(members)  # nothing says the autoscaler manages it: its size is fixed
            elif b.status is not None:
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
    # A Deployment without pods (scaled to zero, as a GPU workload before its burst) is a workload of
    # its template's shape, as the simulator has it: headroom keeps room for its pods ahead of them.
    for name, spec in b.templates.items():
        if name not in workloads:
            namespace = name.split("/", 1)[0] if "/" in name else "default"
            workloads[name] = Workload(name, spec, 0, namespace)
            counts[name] = 0
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
            if ns == namespace and selector_matches(selector, labels):
                w = workloads[name]
                if w.pdb is None:
                    w.pdb = budget
                else:  # kept: the Eviction API refuses a pod under two budgets
                    w.more_pdbs = (*w.more_pdbs, budget)
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
    if b.priority_rules is not None:
        state.expander_priorities = group_priorities(b.priority_rules, state.groups)
    state.namespaces = b.namespaces
    problems: list[Problem] = []
    seen_nodes: set[str] = set()
    for n in [*b.nodes, *coming]:
        if n.name in seen_nodes:
            problems.append(Problem("", f"node {n.name!r} appears twice"))
            continue
        seen_nodes.add(n.name)
        state.add_node(n)
    seen_pods: set[str] = set()
    full: set[str] = set()  # nodes already holding a pod that asks beyond any node (UNFIT)
    accepted: list[Pod] = []
    nominations: list[tuple[Pod, str]] = []
    for pod, info in b.pods:
        if pod.key in seen_pods:
            problems.append(Problem(f"{info}.metadata.name", f"pod {pod.key!r} appears twice"))
            continue
        seen_pods.add(pod.key)
        if pod.node is not None and pod.node not in state.nodes:
            if b.skipped is not None:
                # The cluster's own pods: one bound to a node that is gone (until the pod garbage
                # collector deletes it) or not yet seen is left out. Any tenant may create a pod with
                # any nodeName: it must not stop planning cluster-wide.
                b.skipped.append(Problem(f"Pod {pod.key}.spec.nodeName", on_unknown_node(pod.node)))
                continue
            problems.append(
                Problem(f"{info}.spec.nodeName", f"expected a node of the dump, got {pod.node!r}")
            )
            continue
        if pod.node is not None and any(v >= UNFIT for v in pod.spec.requests.values()):
            # A hostile nodeName: the kubelet will refuse the pod; until then one such pod takes the
            # whole node, and a pile of them must not add up past int64.
            if pod.node in full:
                continue
            full.add(pod.node)
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
