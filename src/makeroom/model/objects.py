"""The cluster's objects, reduced to what scheduling, autoscaling and relocation need."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum

from makeroom.model.nodepool import INSTANCE_TYPE_LABEL, Disruption, InstanceType
from makeroom.model.resources import PODS, Resources

GROUP_LABEL = "makeroom.io/group"
DO_NOT_MOVE = "makeroom.io/do-not-move"
MAKE_ROOM = "makeroom.io/make-room"  # on a pending pod: "false" and makeroom moves nothing for it
MOVED_AT = "makeroom.io/moved-at"  # seconds (a decimal string) when makeroom last moved the pod
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
SCALE_UP_DELAY = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
REPLICAS_OWNER = "makeroom.io/replicas-owner"  # on a Deployment: who else sets its replicas (KEDA...)
VICTIM_OF = "makeroom.io/victim-of"  # on a pod that makeroom moves, naming the pod it makes room for
RESERVED_FOR = "makeroom.io/reserved-for"  # NoSchedule taint holding a node's room for one pod (its id)
NODE_NAME_FIELD = "field:metadata.name"
"""A node affinity term's ``matchFields`` on ``metadata.name``, read as a requirement on this key,
which every node of a snapshot carries among its labels with its name (no real label key has a
colon, so none can pass for it)."""
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
EXPENDABLE_PRIORITY_CUTOFF = -10
"""The cluster-autoscaler's default --expendable-pods-priority-cutoff: it adds no node for a pod of
lower priority."""
SYSTEM_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class PreemptionPolicy(StrEnum):
    PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
    NEVER = "Never"


class OwnerKind(StrEnum):
    """Who recreates a pod when it goes: only pods with a controller can be relocated."""

    REPLICA_SET = "ReplicaSet"
    STATEFUL_SET = "StatefulSet"
    DAEMON_SET = "DaemonSet"
    JOB = "Job"
    NODE = "Node"  # a mirror pod of a static pod
    NONE = "None"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: TaintEffect = TaintEffect.NO_SCHEDULE


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty matches every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator in ("Gt", "Lt") and present and self.values:
            try:
                have, bound = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return have > bound if self.operator == "Gt" else have < bound
        return False


NodeSelectorTerm = tuple[NodeSelectorRequirement, ...]

HOSTNAME_LABEL = "kubernetes.io/hostname"  # the kubelet sets it to the node's name
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # the API server sets it on every namespace


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector: matchLabels and matchExpressions, ANDed. The empty selector matches
    everything; where Kubernetes distinguishes a missing selector (matches nothing), the field holding
    it is ``LabelSelector | None``. Expressions use In, NotIn, Exists and DoesNotExist."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.match_expressions
        )

    def narrowed(
        self, labels: Mapping[str, str], match_keys: tuple[str, ...], mismatch_keys: tuple[str, ...] = ()
    ) -> LabelSelector:
        """The selector with matchLabelKeys / mismatchLabelKeys merged in, from the incoming pod's own
        labels (``key in (value)``, ``key notin (value)``); a key the pod lacks is ignored."""
        extra = tuple(
            NodeSelectorRequirement(k, "In", (labels[k],)) for k in match_keys if k in labels
        ) + tuple(NodeSelectorRequirement(k, "NotIn", (labels[k],)) for k in mismatch_keys if k in labels)
        if not extra:
            return self
        return LabelSelector(self.match_labels, self.match_expressions + extra)


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A required (or, inside ``WeightedPodAffinityTerm``, preferred) inter-pod (anti-)affinity term.

    The namespaces it looks in: ``namespaces`` united with those ``namespace_selector`` matches; both
    empty/None means the namespace of the pod carrying the term. ``label_selector`` None matches no pod.
    """

    topology_key: str
    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int  # 1-100
    term: PodAffinityTerm


class UnsatisfiableAction(StrEnum):
    DO_NOT_SCHEDULE = "DoNotSchedule"
    SCHEDULE_ANYWAY = "ScheduleAnyway"


class InclusionPolicy(StrEnum):
    HONOR = "Honor"
    IGNORE = "Ignore"


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    """A pod's topologySpreadConstraints entry. ``label_selector`` None matches no pod (the skew is then
    counted over nothing, as kube-scheduler does)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: UnsatisfiableAction = UnsatisfiableAction.DO_NOT_SCHEDULE
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: InclusionPolicy = InclusionPolicy.HONOR
    node_taints_policy: InclusionPolicy = InclusionPolicy.IGNORE
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HostPort:
    """A container port with a hostPort: two pods on one node conflict when protocol and port are
    equal and their host IPs are equal or either is the wildcard 0.0.0.0."""

    port: int
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"


@dataclass(frozen=True, slots=True)
class VolumeConstraint:
    """Where a bound PersistentVolume of the pod can be reached: its required node affinity (ORed terms)
    and its zone/region labels (VolumeZone: the node's label must be one of the values, a value may list
    several separated by ``__``)."""

    name: str
    node_affinity: tuple[NodeSelectorTerm, ...] = ()
    zone_labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """An autoscaled group of nodes: the cluster-autoscaler's group of identical nodes (an ASG, a
    managed node group), or a Karpenter NodePool, whose nodes may be of several instance types.

    ``capacity`` and ``price_per_hour`` are those of one node of the group (of a pool: its first
    instance type). ``max`` is the most nodes the group may have (of a pool: ``spec.limits.nodes``)."""

    name: str
    capacity: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    min: int = 0
    max: int = 0
    price_per_hour: float = 0.0
    provision_time: float = 120.0
    # What a NodePool says besides (model.nodepool; the cluster-autoscaler reads none of it):
    weight: int | None = None  # spec.weight, 1-100, higher first; None: not set (Karpenter counts 0)
    limits: Resources = field(default_factory=Resources)  # spec.limits by resource, besides max
    instance_types: tuple[InstanceType, ...] = ()  # empty: one type, of capacity and price_per_hour
    requirements: tuple[NodeSelectorRequirement, ...] = ()  # spec.template.spec.requirements
    disruption: Disruption = field(default_factory=Disruption)  # spec.disruption
    zones: tuple[str, ...] = ()  # the group's nodes spread round-robin over these zones (by number)

    def node_labels(self, number: int | None = None) -> dict[str, str]:
        """The labels of the group's nodes; of its node number ``number`` (0-based, in order of
        creation), with its zone when the group spans zones."""
        return {**self.labels, GROUP_LABEL: self.name, **self.zone_label(number)}

    def zone_label(self, number: int | None) -> dict[str, str]:
        if not self.zones or number is None:
            return {}
        return {ZONE_LABEL: self.zones[number % len(self.zones)]}

    def types(self) -> tuple[InstanceType, ...]:
        """The instance types the group's nodes may have: its own, or the one its capacity and price
        describe (named by its instance-type label, else after the group)."""
        if self.instance_types:
            return self.instance_types
        name = self.labels.get(INSTANCE_TYPE_LABEL, self.name)
        return (InstanceType(name, self.capacity, self.price_per_hour),)


@dataclass(slots=True, eq=False)
class Node:
    name: str
    group: str
    allocatable: Resources
    labels: dict[str, str]
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    created_at: float = 0.0
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PodSpec:
    """What a pod asks of the scheduler: shared by every replica of a workload."""

    requests: Resources
    priority: int = 0
    preemption_policy: PreemptionPolicy = PreemptionPolicy.PREEMPT_LOWER_PRIORITY
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    required_affinity: tuple[NodeSelectorTerm, ...] = ()  # ORed terms of ANDed requirements
    priority_class: str = ""
    startup_time: float = 10.0
    termination_grace: float = 30.0
    local_storage: bool = False
    claims_volume: bool = False  # a persistentVolumeClaim volume: its PV may be bound to a node or zone
    # Inter-pod (anti-)affinity, spreading, host ports, volumes and a nodeName pin (model.scheduling):
    pod_affinity: tuple[PodAffinityTerm, ...] = ()  # required, ANDed
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()  # required, ANDed
    preferred_pod_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    preferred_pod_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    topology_spread: tuple[TopologySpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    volumes: tuple[VolumeConstraint, ...] = ()
    node_name: str = ""  # spec.nodeName set before scheduling: the pod may go to that node only
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        # Specs key the planner's per-spec caches, looked up for every victim it weighs; a spec with
        # affinity and spreading is a deep tree of tuples, so its hash is computed once.
        h = self._hash
        if h is None:
            h = hash(tuple(getattr(self, name) for name in _SPEC_FIELDS))
            object.__setattr__(self, "_hash", h)
        return h

    @property
    def places_by_pods(self) -> bool:
        """Whether where this pod may go depends on other pods (not only on the node)."""
        return bool(
            self.pod_affinity
            or self.pod_anti_affinity
            or self.host_ports
            or any(c.when_unsatisfiable is UnsatisfiableAction.DO_NOT_SCHEDULE for c in self.topology_spread)
        )

    @staticmethod
    def effective(requests: Resources) -> Resources:
        """Requests as the scheduler counts them: every pod also takes one of the node's pod slots."""
        return requests + Resources({PODS: 1000}) if PODS not in requests else requests


_SPEC_FIELDS = tuple(f.name for f in fields(PodSpec) if f.compare)


@dataclass(slots=True, eq=False)
class Pod:
    name: str
    spec: PodSpec
    workload: str | None = None
    namespace: str = "default"
    owner_kind: OwnerKind = OwnerKind.REPLICA_SET
    node: str | None = None
    ready: bool = False
    terminating: bool = False
    nominated_node: str | None = None
    created_at: float = 0.0
    ready_since: float | None = None
    unschedulable_since: float | None = None
    seq: int = 0
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    gone_by: float | None = None
    """A terminating pod's deletionTimestamp: when its grace period ends and it should be gone."""
    gated: bool = False
    """Held back by spec.schedulingGates: the scheduler does not try it, so it holds no room and none
    is made for it."""

    @property
    def priority(self) -> int:
        return self.spec.priority

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        return self.node is not None

    def deletion_cost(self) -> int:
        try:
            return int(self.annotations.get(DELETION_COST, "0"))
        except ValueError:
            return 0

    def is_system_critical(self) -> bool:
        return (
            self.spec.priority >= SYSTEM_CRITICAL_PRIORITY
            or self.spec.priority_class in SYSTEM_PRIORITY_CLASSES
        )


def _scaled(bound: int | str, expected: int) -> int:
    """An IntOrString budget: a percentage is of the expected pods, rounded up as Kubernetes does."""
    if isinstance(bound, str):
        percent = int(bound.rstrip("%"))
        return -(-percent * expected // 100)
    return bound


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """A PodDisruptionBudget over one workload's pods: exactly one of the two bounds is set."""

    max_unavailable: int | str | None = None
    min_available: int | str | None = None

    def desired_healthy(self, expected: int) -> int:
        if self.min_available is not None:
            return _scaled(self.min_available, expected)
        return max(0, expected - _scaled(self.max_unavailable or 0, expected))

    def disruptions_allowed(self, healthy: int, expected: int) -> int:
        return max(0, healthy - self.desired_healthy(expected))


@dataclass(slots=True, eq=False)
class Workload:
    """A Deployment (through its ReplicaSet): the desired replicas of one pod spec."""

    name: str
    spec: PodSpec
    replicas: int
    namespace: str = "default"
    pdb: DisruptionBudget | None = None
    more_pdbs: tuple[DisruptionBudget, ...] = ()
    """Budgets besides ``pdb`` that select its pods: the Eviction API then refuses every eviction
    (HTTP 500), whatever each budget allows."""
    owner_kind: OwnerKind = OwnerKind.REPLICA_SET
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # its pod template's labels
    replicas_owner: str | None = None
    """Another controller that sets spec.replicas (a HorizontalPodAutoscaler, KEDA...): makeroom then
    never changes the replica count, since that controller would undo it."""
