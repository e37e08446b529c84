"""Scenario format v1 (../spec/scenario-v1.md) as pydantic models.

Quantities are parsed to milli-units and durations to seconds while the file is read, so that every
syntax problem is reported with its key path before anything runs. Unknown keys are refused: a typo in
a scenario (``replica: 3``) would otherwise silently change what is simulated.
"""

from __future__ import annotations

import re
from dataclasses import replace
from enum import StrEnum
from typing import Annotated, Literal

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
    Strategy,
    default_of,
    range_of,
)
from makeroom.model.nodepool import AutoscalerKind, ConsolidationPolicy
from makeroom.model.quantity import QuantityError, parse_duration, parse_quantity


class Expander(StrEnum):
    """How the simulated cluster-autoscaler picks the group to grow (as its ``--expander``)."""

    LEAST_WASTE = "least-waste"  # the group whose new node wastes the least of its CPU and memory
    PRIORITY = "priority"  # the first group in node_groups order
    PRICE = "price"  # the cheapest group
    RANDOM = "random"  # any group, from --seed


def _quantity(value: object) -> int:
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ValueError(f"expected a quantity such as 400m, 2 or 1.5Gi, got {value!r}")
    try:
        milli = parse_quantity(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    if milli < 0:
        raise ValueError(f"expected a quantity of zero or more, got {value!r}")
    return milli


def _duration(value: object) -> float:
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ValueError(f"expected a duration such as 30s, 5m or 1h30m, got {value!r}")
    try:
        return parse_duration(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None


Quantity = Annotated[int, BeforeValidator(_quantity)]
Duration = Annotated[float, BeforeValidator(_duration)]
NonNegative = Annotated[int, Field(ge=0, strict=True)]
_PERCENT = re.compile(r"^\d+%$")


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
    price_per_hour: Annotated[float, Field(ge=0)] = 0.0
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
    return None if value == "Never" else _duration(value)


class DisruptionSpec(Strict):
    """Extension (Karpenter): a NodePool's spec.disruption; Karpenter's defaults."""

    consolidation_policy: ConsolidationPolicy = ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
    consolidate_after: Annotated[float | None, BeforeValidator(_never_or_duration)] = 0.0
    budgets: list[BudgetSpec] = [BudgetSpec()]


class NodeGroupSpec(Strict):
    name: Annotated[str, Field(min_length=1, pattern=_NAME)]
    capacity: dict[str, Quantity] = {}  # spec v1 requires it; an extension: or instance_types instead
    labels: dict[str, str] = {}
    taints: list[TaintSpec] = []
    min: NonNegative = 0
    max: NonNegative
    initial: NonNegative = 0
    price_per_hour: Annotated[float, Field(ge=0)] = 0.0
    provision_time: Duration = 120.0
    # Extensions: what a Karpenter NodePool says besides (the cluster-autoscaler reads none of them)
    weight: Annotated[int, Field(ge=1, le=100, strict=True)] | None = None
    limits: dict[str, Quantity] = {}
    instance_types: list[InstanceTypeSpec] = []
    requirements: list[RequirementSpec] = []
    disruption: DisruptionSpec = DisruptionSpec()


class KarpenterSpec(Strict):
    """Extension: the settings of Karpenter's controller (its flags), Karpenter's defaults."""

    batch_idle_duration: Annotated[Duration, Field(gt=0)] = 1.0
    batch_max_duration: Annotated[Duration, Field(gt=0)] = 10.0


class AutoscalerSpec(Strict):
    kind: AutoscalerKind = AutoscalerKind.CLUSTER_AUTOSCALER  # extension: which autoscaler runs
    karpenter: KarpenterSpec = KarpenterSpec()  # extension: read when kind is karpenter
    enabled: bool = True
    scan_interval: Annotated[Duration, Field(gt=0)] = 10.0
    expander: Expander = Expander.LEAST_WASTE
    scale_down_unneeded_time: Duration = 600.0
    scale_down_utilization_threshold: Annotated[float, Field(ge=0, le=1)] = 0.5
    expendable_pods_priority_cutoff: int = -10
    scale_down_delay_after_add: Duration = 600.0
    max_graceful_termination: Duration = 600.0


class SchedulerSpec(Strict):
    preemption: bool = True
    scoring: Literal["LeastAllocated", "MostAllocated"] = "LeastAllocated"


def _int_or_percent(value: object) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and _PERCENT.match(value):
        return value
    raise ValueError(f"expected a whole number of pods or a percentage such as 50%, got {value!r}")


IntOrPercent = Annotated[int | str, BeforeValidator(_int_or_percent)]


class PdbSpec(Strict):
    max_unavailable: IntOrPercent | None = None
    min_available: IntOrPercent | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> PdbSpec:
        if (self.max_unavailable is None) == (self.min_available is None):
            raise ValueError("expected exactly one of max_unavailable or min_available")
        return self


class WorkloadSpec(Strict):
    name: Annotated[str, Field(min_length=1, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")]
    replicas: NonNegative
    priority: Annotated[int, Field(strict=True)] = 0
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    requests: dict[str, Quantity] = {}
    node_selector: dict[str, str] = {}
    tolerations: list[TolerationSpec] = []
    pdb: PdbSpec | None = None
    startup_time: Duration = 10.0
    termination_grace: Duration = 30.0
    placement: dict[str, NonNegative] = {}


class ScaleAction(Strict):
    workload: str
    replicas: NonNegative


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
    """The range of one of the controller's knobs, as ControllerConfig defines it."""
    limits = range_of(config, name)

    def check(value: float) -> float:
        message = limits.problem(float(value)) if limits is not None else None
        if message is not None:
            raise ValueError(message)
        return value

    return AfterValidator(check)


_C, _K = ConsolidationConfig, ControllerConfig


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
        )


class ScenarioSpec(Strict):
    version: Literal[1]
    name: str
    duration: Annotated[Duration, Field(gt=0)]
    node_groups: Annotated[list[NodeGroupSpec], Field(min_length=1)]
    autoscaler: AutoscalerSpec = AutoscalerSpec()
    scheduler: SchedulerSpec = SchedulerSpec()
    workloads: list[WorkloadSpec] = []
    events: list[EventSpec] = []
    controller: ControllerSpec = ControllerSpec()

    @field_validator("events")
    @classmethod
    def _events_in_time_order(cls, events: list[EventSpec]) -> list[EventSpec]:
        # The spec applies events in time order; a stable sort keeps same-time events as written.
        return sorted(events, key=lambda e: e.at)
