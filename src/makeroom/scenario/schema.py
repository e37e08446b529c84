"""Scenario format v1 (../spec/scenario-v1.md) as pydantic models.

Quantities are parsed to milli-units and durations to seconds while the file is read, so that every
syntax problem is reported with its key path before anything runs. Unknown keys are refused: a typo in
a scenario (``replica: 3``) would otherwise silently change what is simulated.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from makeroom.controller.config import (
    ConsolidationConfig,
    ControllerConfig,
    HeadroomConfig,
    RoomTarget,
    Strategy,
    default_of,
    rule_of,
)
from makeroom.model import limits
from makeroom.model.expander import SIMULATED, Expander
from makeroom.model.nodepool import AutoscalerKind, ConsolidationPolicy
from makeroom.model.objects import EXPENDABLE_PRIORITY_CUTOFF

# Every number goes through the shared rules of makeroom.model.limits (the same as dumps, trace CSVs
# and flags): finite, in range, and whole where it counts things.


def _rule(check: Callable[[Any], Any]) -> BeforeValidator:
    return BeforeValidator(check)


Quantity = Annotated[int, _rule(limits.quantity)]
Duration = Annotated[float, _rule(limits.duration)]
PositiveDuration = Annotated[float, _rule(lambda v: limits.duration(v, positive=True))]
Interval = Annotated[float, _rule(limits.interval)]
Ratio = Annotated[float, _rule(limits.ratio)]
Price = Annotated[float, _rule(limits.price)]
Priority = Annotated[int, _rule(limits.priority)]
NodeCount = Annotated[int, _rule(lambda v: limits.count(v, high=limits.MAX_NODES, what="a number of nodes"))]
Replicas = Annotated[
    int, _rule(lambda v: limits.count(v, high=limits.MAX_REPLICAS, what="a number of replicas"))
]
_PERCENT = re.compile(r"^\d+%$")


def _simulated_expander(value: object) -> Expander:
    if isinstance(value, str) and value in SIMULATED:
        return Expander(value)
    raise ValueError(f"expected one of {', '.join(SIMULATED)} (the simulator's expanders), got {value!r}")


SimulatedExpander = Annotated[Expander, BeforeValidator(_simulated_expander)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaintSpec(Strict):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class TolerationSpec(Strict):
    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""


_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class InstanceTypeSpec(Strict):
    """Extension (Karpenter): one instance type a pool may launch."""

    name: Annotated[str, Field(min_length=1, pattern=r"^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$")]
    capacity: dict[str, Quantity]
    price_per_hour: Price = 0.0
    labels: dict[str, str] = {}


class RequirementSpec(Strict):
    """Extension (Karpenter): a NodePool requirement (spec.template.spec.requirements)."""

    key: Annotated[str, Field(min_length=1)]
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] = []


def _budget_nodes(value: object) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and _PERCENT.match(value) and int(value[:-1]) <= 100:
        return value
    raise ValueError(f"expected a whole number of nodes or a percentage such as 10%, got {value!r}")


class BudgetSpec(Strict):
    """Extension (Karpenter): one of spec.disruption.budgets (schedules are not modelled)."""

    nodes: Annotated[int | str, BeforeValidator(_budget_nodes)] = "10%"
    reasons: list[Literal["Empty", "Underutilized", "Drifted"]] = []


def _never_or_duration(value: object) -> float | None:
    return None if value == "Never" else limits.duration(value)


class DisruptionSpec(Strict):
    """Extension (Karpenter): a NodePool's spec.disruption; Karpenter's defaults."""

    consolidation_policy: ConsolidationPolicy = ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
    consolidate_after: Annotated[float | None, BeforeValidator(_never_or_duration)] = 0.0
    budgets: list[BudgetSpec] = [BudgetSpec()]


LabelKey = Annotated[str, _rule(limits.label_key)]
LabelValue = Annotated[str, _rule(limits.label_value)]
Zone = Annotated[str, _rule(lambda v: limits.label_value(v, empty=False))]


def _unique(values: list[str]) -> list[str]:
    if len(set(values)) != len(values):
        raise ValueError(f"expected each value once, got {values!r}")
    return values


class NodeGroupSpec(Strict):
    name: Annotated[str, Field(min_length=1, pattern=_NAME)]
    capacity: dict[str, Quantity] = {}  # spec v1 requires it; an extension: or instance_types instead
    labels: dict[str, str] = {}
    taints: list[TaintSpec] = []
    min: NodeCount = 0
    max: NodeCount
    initial: NodeCount = 0
    price_per_hour: Price = 0.0
    provision_time: Duration = 120.0
    # Extensions: what a Karpenter NodePool says besides (the cluster-autoscaler reads none of them)
    weight: Annotated[int, Field(ge=1, le=100, strict=True)] | None = None
    limits: dict[str, Quantity] = {}
    instance_types: list[InstanceTypeSpec] = []
    requirements: list[RequirementSpec] = []
    disruption: DisruptionSpec = DisruptionSpec()
    # Extension: the group's nodes spread round-robin over these zones (topology.kubernetes.io/zone)
    zones: Annotated[list[Zone], AfterValidator(_unique)] = []


class KarpenterSpec(Strict):
    """Extension: the settings of Karpenter's controller (its flags), Karpenter's defaults."""

    batch_idle_duration: PositiveDuration = 1.0
    batch_max_duration: PositiveDuration = 10.0


class AutoscalerSpec(Strict):
    kind: AutoscalerKind = AutoscalerKind.CLUSTER_AUTOSCALER  # extension: which autoscaler runs
    karpenter: KarpenterSpec = KarpenterSpec()  # extension: read when kind is karpenter
    enabled: bool = True
    scan_interval: Interval = 10.0
    expander: SimulatedExpander = Expander.LEAST_WASTE
    scale_down_unneeded_time: Duration = 600.0
    scale_down_utilization_threshold: Ratio = 0.5
    expendable_pods_priority_cutoff: Priority = EXPENDABLE_PRIORITY_CUTOFF
    scale_down_delay_after_add: Duration = 600.0
    max_graceful_termination: Duration = 600.0


class SchedulerSpec(Strict):
    preemption: bool = True
    scoring: Literal["LeastAllocated", "MostAllocated"] = "LeastAllocated"


def _int_or_percent(value: object) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= limits.MAX_REPLICAS:
        return value
    if isinstance(value, str) and _PERCENT.match(value) and int(value[:-1]) <= 100:
        return value
    raise ValueError(
        f"expected a whole number of pods (up to {limits.MAX_REPLICAS}) or a percentage such as 50%, "
        f"got {value!r}"
    )


IntOrPercent = Annotated[int | str, BeforeValidator(_int_or_percent)]


class PdbSpec(Strict):
    max_unavailable: IntOrPercent | None = None
    min_available: IntOrPercent | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> PdbSpec:
        if (self.max_unavailable is None) == (self.min_available is None):
            raise ValueError("expected exactly one of max_unavailable or min_available")
        return self


class SpreadSpec(Strict):
    """Extension: a topologySpreadConstraints entry over the workload's own pods (or match_labels)."""

    max_skew: Annotated[int, Field(ge=1, le=limits.MAX_REPLICAS, strict=True)]
    topology_key: LabelKey
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] = "DoNotSchedule"
    min_domains: Annotated[int, Field(ge=1, le=limits.MAX_NODES, strict=True)] | None = None
    node_affinity_policy: Literal["Honor", "Ignore"] = "Honor"
    node_taints_policy: Literal["Honor", "Ignore"] = "Ignore"
    match_labels: dict[LabelKey, LabelValue] | None = None  # None: the workload's own labels
    match_label_keys: list[LabelKey] = []

    @model_validator(mode="after")
    def _min_domains_needs_do_not_schedule(self) -> SpreadSpec:
        if self.min_domains is not None and self.when_unsatisfiable != "DoNotSchedule":
            raise ValueError("expected min_domains only with when_unsatisfiable: DoNotSchedule")
        return self


class AffinitySpec(Strict):
    """Extension: a required pod (anti-)affinity term against the workload's own pods (or match_labels)."""

    topology_key: LabelKey
    match_labels: dict[LabelKey, LabelValue] | None = None  # None: the workload's own labels
    namespaces: list[Annotated[str, Field(min_length=1, pattern=_NAME)]] = []


class HostPortSpec(Strict):
    """Extension: a container port bound on the node (hostPort)."""

    port: Annotated[int, Field(ge=1, le=65535, strict=True)]
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    host_ip: Annotated[str, BeforeValidator(limits.ip_address)] = "0.0.0.0"


class WorkloadSpec(Strict):
    name: Annotated[str, Field(min_length=1, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")]
    replicas: Replicas
    priority: Priority = 0
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    requests: dict[str, Quantity] = {}
    node_selector: dict[str, str] = {}
    tolerations: list[TolerationSpec] = []
    pdb: PdbSpec | None = None
    startup_time: Duration = 10.0
    termination_grace: Duration = 30.0
    placement: dict[str, Replicas] = {}
    # Extensions: the pods' labels (default app: <name>) and the constraints kube-scheduler keeps
    labels: dict[LabelKey, LabelValue] = {}
    topology_spread: list[SpreadSpec] = []
    affinity: list[AffinitySpec] = []
    anti_affinity: list[AffinitySpec] = []
    host_ports: list[HostPortSpec] = []


class ScaleAction(Strict):
    workload: str
    replicas: Replicas


class DeleteAction(Strict):
    workload: str


class NodeAction(Strict):
    node: str


class EventSpec(Strict):
    at: Duration
    scale: ScaleAction | None = None
    deploy: WorkloadSpec | None = None
    delete: DeleteAction | None = None
    remove_node: NodeAction | None = None
    cordon: NodeAction | None = None
    uncordon: NodeAction | None = None

    @model_validator(mode="after")
    def _one_action(self) -> EventSpec:
        kinds = [k for k in EVENT_KINDS if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(f"expected exactly one of {', '.join(EVENT_KINDS)} besides 'at'")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in EVENT_KINDS if getattr(self, k) is not None)


EVENT_KINDS = ("scale", "deploy", "delete", "remove_node", "cordon", "uncordon")


def _knob(config: type, name: str) -> AfterValidator:
    """The rule of one of the controller's knobs, as ControllerConfig defines it."""
    rule = rule_of(config, name)

    def check(value: float) -> float:
        if rule is not None:
            try:
                rule(value)
            except limits.InvalidValueError as exc:
                raise ValueError(str(exc)) from None
        return value

    return AfterValidator(check)


_C, _K = ConsolidationConfig, ControllerConfig


def _target_count(value: int) -> int:
    try:
        return limits.count(value, low=1, high=limits.MAX_REPLICAS, what="a number of pods")
    except limits.InvalidValueError as exc:
        raise ValueError(str(exc)) from None


class ConsolidationSpec(Strict):
    """Extension: the consolidation pass of the relocation controller (cortex issue 1965). Defaults and
    ranges are ConsolidationConfig's."""

    enabled: bool = default_of(_C, "enabled")
    min_saving: Annotated[float, _knob(_C, "min_saving")] = default_of(_C, "min_saving")
    max_moves: Annotated[int, Field(strict=True), _knob(_C, "max_moves")] = default_of(_C, "max_moves")
    window: Annotated[Duration, _knob(_C, "window")] = default_of(_C, "window")
    wait: Annotated[Duration, _knob(_C, "wait")] = default_of(_C, "wait")

    def config(self) -> ConsolidationConfig:
        return ConsolidationConfig(self.enabled, self.min_saving, self.max_moves, self.window, self.wait)


class RoomForSpec(Strict):
    """Whom a headroom target keeps room for: exactly one of the three."""

    priority_class: str | None = None
    workload: str | None = None
    requests: dict[str, Quantity] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> RoomForSpec:
        given = [k for k in ("priority_class", "workload", "requests") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError("expected exactly one of priority_class, workload, requests")
        return self


class RoomTargetSpec(Strict):
    group: str
    count: Annotated[int, Field(strict=True), AfterValidator(_target_count)]
    for_: RoomForSpec = Field(alias="for")

    def target(self) -> RoomTarget:
        f = self.for_
        return RoomTarget(
            group=self.group,
            count=self.count,
            priority_class=f.priority_class or "",
            workload=f.workload or "",
            requests=tuple(sorted((f.requests or {}).items())),
        )


_H = HeadroomConfig


class HeadroomSpec(Strict):
    """Extension: the room the ``headroom`` strategy keeps (docs/headroom.md). Defaults and ranges
    are HeadroomConfig's."""

    targets: list[RoomTargetSpec] = []
    max_price_per_hour: Annotated[float, _knob(_H, "max_price_per_hour")] = default_of(
        _H, "max_price_per_hour"
    )
    cooldown: Annotated[Duration, _knob(_H, "cooldown")] = default_of(_H, "cooldown")
    max_moves_per_hour: Annotated[int, Field(strict=True), _knob(_H, "max_moves_per_hour")] = default_of(
        _H, "max_moves_per_hour"
    )
    cpu_buffer: Annotated[int, Field(strict=True), _knob(_H, "cpu_buffer")] = default_of(_H, "cpu_buffer")

    def config(self) -> HeadroomConfig:
        return HeadroomConfig(
            targets=tuple(t.target() for t in self.targets),
            max_price_per_hour=self.max_price_per_hour,
            cooldown=self.cooldown,
            max_moves_per_hour=self.max_moves_per_hour,
            cpu_buffer=self.cpu_buffer,
        )


class ControllerSpec(Strict):
    strategy: Strategy = Strategy.NONE  # spec v1: without a controller section, no controller runs
    # Extensions: the relocation controller's knobs (evict and migrate only); defaults and ranges are
    # ControllerConfig's.
    interval: Annotated[Duration, _knob(_K, "interval")] = default_of(_K, "interval")
    timeout: Annotated[Duration, _knob(_K, "timeout")] = default_of(_K, "timeout")
    cooldown: Annotated[Duration, _knob(_K, "cooldown")] = default_of(_K, "cooldown")
    max_moves_in_flight: Annotated[int, Field(strict=True), _knob(_K, "max_moves_in_flight")] = default_of(
        _K, "max_moves_in_flight"
    )
    consolidation: ConsolidationSpec = ConsolidationSpec()
    headroom: HeadroomSpec = HeadroomSpec()

    def config(self, strategy: Strategy, consolidate: bool | None = None) -> ControllerConfig:
        """The controller's config for a run with ``strategy``; ``consolidate`` overrides the file's."""
        consolidation = self.consolidation.config()
        if consolidate is not None:
            consolidation = replace(consolidation, enabled=consolidate)
        return ControllerConfig(
            strategy=strategy,
            interval=self.interval,
            timeout=self.timeout,
            cooldown=self.cooldown,
            max_moves_in_flight=self.max_moves_in_flight,
            consolidation=consolidation,
            headroom=self.headroom.config(),
        )


class ScenarioSpec(Strict):
    version: Literal[1]
    name: str
    duration: PositiveDuration
    node_groups: Annotated[list[NodeGroupSpec], Field(min_length=1)]
    autoscaler: AutoscalerSpec = AutoscalerSpec()
    scheduler: SchedulerSpec = SchedulerSpec()
    workloads: list[WorkloadSpec] = []
    events: list[EventSpec] = []
    controller: ControllerSpec = ControllerSpec()

    def controller_config(self, strategy: Strategy, consolidate: bool | None = None) -> ControllerConfig:
        """The relocation controller's config for a run of this scenario with ``strategy``: its
        ``controller:`` knobs, told the expander its ``autoscaler:`` runs (as --autoscaler-expander)."""
        config = self.controller.config(strategy, consolidate)
        return replace(config, autoscaler_expander=self.autoscaler.expander)

    @field_validator("events")
    @classmethod
    def _events_in_time_order(cls, events: list[EventSpec]) -> list[EventSpec]:
        # The spec applies events in time order; a stable sort keeps same-time events as written.
        return sorted(events, key=lambda e: e.at)
