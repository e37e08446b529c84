"""The controller's knobs: one definition of each default and of each valid range.

The scenario format (``controller:``), the ``makeroom run`` flags, the Helm chart's values (checked by
a test) and the simulator all take their defaults and their limits from here; ``problems()`` is the one
validation, which the scenario schema and the CLI flags share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import Field, dataclass, field, fields
from enum import StrEnum
from typing import Any

from makeroom.errors import Problem
from makeroom.model import limits
from makeroom.model.expander import Expander, expander


class Strategy(StrEnum):
    """How pending pods are helped (spec v1: ``controller.strategy``, ``--strategy``)."""

    NONE = "none"
    """No relocation controller, and the scheduler does not preempt: the status quo."""
    PREEMPTION = "preemption"
    """No relocation controller; the scheduler preempts as kube-scheduler does, for pods whose policy
    allows it."""
    EVICT = "evict"
    """makeroom relocates: it chooses the victims, checks each has somewhere to go, keeps the room and
    evicts within PodDisruptionBudgets."""
    MIGRATE = "migrate"
    """As ``evict``, but make-before-break: a victim's replacement is Ready elsewhere before the victim
    is removed."""

    HEADROOM = "headroom"
    """As ``migrate``, and ahead of demand: room for the GPU pods of ``controller.headroom`` is kept
    free on their nodes by moving CPU-only pods off them (docs/headroom.md)."""

    @property
    def relocates(self) -> bool:
        """Whether the strategy needs the relocation controller."""
        return self in RELOCATING

    @property
    def make_before_break(self) -> bool:
        """Whether a victim's replacement is Ready before the victim goes."""
        return self in (Strategy.MIGRATE, Strategy.HEADROOM)


CURES: tuple[Strategy, ...] = tuple(s for s in Strategy if s is not Strategy.HEADROOM)
"""The strategies that act once a pod waits: what ``compare`` and ``demo`` run by default."""

RELOCATING = frozenset({Strategy.EVICT, Strategy.MIGRATE, Strategy.HEADROOM})
"""The strategies that run the relocation controller (``makeroom run`` accepts only these)."""


Rule = Callable[[Any], Any]
"""A check of ``makeroom.model.limits``: the value converted, or ``InvalidValueError`` saying what was
expected. The knobs use the same rules as every other number makeroom reads, so a flag, a scenario
and a Helm value are refused with the same words."""


def _positive_duration(value: Any) -> float:
    return limits.duration(value, positive=True)


POSITIVE: Rule = _positive_duration
"""A duration longer than zero."""
NON_NEGATIVE: Rule = limits.duration
"""A duration, zero included."""
PERIOD: Rule = limits.interval
"""The period of a loop: not faster than any cluster's pace."""
AT_LEAST_ONE: Rule = limits.moves
"""A number of pods to move."""
PRICE: Rule = limits.price
"""A price per hour, zero included."""


def _pods(value: Any) -> int:
    return limits.count(value, low=0, high=limits.MAX_REPLICAS, what="a number of pods")


PODS: Rule = _pods
"""A number of pods, zero included."""
SHARE: Rule = limits.ratio
"""A share, from 0 to 1."""


def knob(default: Any, rule: Rule | None, flag: str | None, helm: str | None, doc: str) -> Any:
    """A field with its default, its rule, its ``makeroom run`` flag and its Helm value."""
    return field(default=default, metadata={"rule": rule, "flag": flag, "helm": helm, "doc": doc})


@dataclass(frozen=True, slots=True)
class ConsolidationConfig:
    """Moving replicas off costly nodes to cheaper groups when that lets the autoscaler remove the node
    for less than it costs (cortex issue 1965). Only when no pod waits to be scheduled."""

    enabled: bool = knob(True, None, "--consolidate/--no-consolidate", "consolidation.enabled", "on or off")
    min_saving: float = knob(
        0.2,
        SHARE,
        "--consolidation-min-saving",
        "consolidation.minSaving",
        "the share of the freed node's hourly price that a consolidation must save, after the price "
        "of any cheaper node it adds",
    )
    max_moves: int = knob(
        10,
        AT_LEAST_ONE,
        "--consolidation-max-moves",
        "consolidation.maxMoves",
        "the pods consolidation may move per window",
    )
    window: float = knob(
        600.0, POSITIVE, "--consolidation-window", "consolidation.window", "the window of that budget"
    )
    wait: float = knob(
        1800.0,
        POSITIVE,
        "--consolidation-wait",
        "consolidation.wait",
        "how long an emptied node may wait for the autoscaler to remove it before makeroom lifts its "
        "taint and gives up",
    )


@dataclass(frozen=True, slots=True)
class RoomTarget:
    """Room for ``count`` pods of one shape kept free in ``group`` (a node group or NodePool): the
    shape of the largest GPU workload matching ``priority_class`` or ``workload`` (``ns/name``), or
    ``requests`` as given (milli-units by resource). Exactly one of the three says which."""

    group: str
    count: int
    priority_class: str = ""
    workload: str = ""
    requests: tuple[tuple[str, int], ...] = ()

    @property
    def name(self) -> str:
        """The target's name in the records: its group and whom it keeps room for."""
        if self.priority_class:
            whom = f"class-{self.priority_class}"
        elif self.workload:
            whom = "workload-" + self.workload.replace("/", ".")
        else:
            whom = "requests"
        return f"{self.group}.{whom}".lower()

    def problems(self) -> list[str]:
        found = []
        try:
            limits.count(self.count, low=1, high=limits.MAX_REPLICAS, what="a number of pods")
        except limits.InvalidValueError as exc:
            found.append(f"count: {exc}")
        if sum(bool(x) for x in (self.priority_class, self.workload, self.requests)) != 1:
            found.append("for: expected exactly one of priority_class, workload, requests")
        return found


@dataclass(frozen=True, slots=True)
class HeadroomConfig:
    """Room kept free on GPU nodes ahead of demand by moving CPU-only pods off them (docs/headroom.md).
    Runs under the ``headroom`` strategy only."""

    targets: tuple[RoomTarget, ...] = knob(
        (),
        None,
        "--headroom-target",
        "headroom.targets",
        "the room to keep: per group, room for count pods of a PriorityClass's or a workload's GPU "
        "pods, or of given requests (none: under the headroom strategy, room for one pod of the "
        "highest-priority GPU workload in each GPU group)",
    )
    max_price_per_hour: float = knob(
        0.0,
        PRICE,
        "--headroom-max-price",
        "headroom.maxPricePerHour",
        "what keeping the room may cost: a new CPU node for moved pods only when its hourly price "
        "fits (0: only room that exists)",
    )
    cooldown: float = knob(
        1800.0,
        NON_NEGATIVE,
        "--headroom-cooldown",
        "headroom.cooldown",
        "a workload whose pods were moved to keep room is not moved for it again within this time",
    )
    max_moves_per_hour: int = knob(
        10,
        AT_LEAST_ONE,
        "--headroom-max-moves-per-hour",
        "headroom.maxMovesPerHour",
        "the pods moved to keep room per hour, at most",
    )
    cpu_buffer: int = knob(
        0,
        PODS,
        "--headroom-cpu-buffer",
        "headroom.cpuBuffer",
        "pods' worth of room the autoscaler is asked to keep in the CPU group for moved replicas (a "
        "CapacityBuffer where the API exists; 0: none)",
    )


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    strategy: Strategy = knob(
        Strategy.MIGRATE,
        None,
        "--strategy",
        "controller.strategy",
        "evict, migrate or headroom (migrate plus room kept for GPU pods: docs/headroom.md)",
    )
    interval: float = knob(
        2.0,
        PERIOD,
        "--interval",
        "controller.interval",
        "seconds between two reconciliations: well inside the autoscaler's 10 s scan, so that a "
        "decision lands before the autoscaler acts on the pending pod",
    )
    timeout: float = knob(
        900.0,
        POSITIVE,
        "--timeout",
        "controller.timeout",
        "a relocation whose pod is not bound by then is rolled back and planned again",
    )
    cooldown: float = knob(
        600.0,
        NON_NEGATIVE,
        "--cooldown",
        "controller.cooldown",
        "a pod that makeroom moved (a replacement) is not moved again within this time",
    )
    max_moves_in_flight: int = knob(
        20, AT_LEAST_ONE, "--max-moves", "controller.maxMoves", "the most pods one round may move at once"
    )
    backoff: float = knob(
        2.0,
        POSITIVE,
        None,
        None,
        "first wait after a refused eviction or a failed call; doubles up to max_backoff",
    )
    max_backoff: float = knob(30.0, POSITIVE, None, None, "the longest wait between two retries")
    autoscaler_expander: Expander = knob(
        Expander.LEAST_WASTE,
        expander,
        "--autoscaler-expander",
        "nodeGroups.autoscalerExpander",
        "the cluster-autoscaler's --expander (its default: least-waste). With priority (groups in "
        "preference order) a moved replica may wait for a new node of a cheaper group even where a "
        "group the pending pod could use might also grow; with any other, the planner does not count "
        'on it (docs/controller.md, "Moved replicas and the autoscaler\'s expander")',
    )
    move_jobs_in: tuple[str, ...] = knob(
        (),
        None,
        "--move-jobs-in",
        "controller.moveJobsIn",
        "namespaces whose Job pods (and pods no controller owns) makeroom may move: evicted, a Job's "
        "pod loses its work and may fail its Job, a bare pod is gone for good; none by default",
    )
    consolidation: ConsolidationConfig = field(default_factory=ConsolidationConfig)
    headroom: HeadroomConfig = field(default_factory=HeadroomConfig)

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", Strategy(self.strategy))
        object.__setattr__(self, "move_jobs_in", tuple(self.move_jobs_in))
        if self.autoscaler_expander in tuple(Expander):  # else problems() names it
            object.__setattr__(self, "autoscaler_expander", Expander(self.autoscaler_expander))

    def problems(self) -> list[Problem]:
        """Every knob out of its range, by key path (``interval``, ``consolidation.min_saving``)."""
        found = _problems(self, "")
        if self.max_backoff < self.backoff:
            found.append(Problem("max_backoff", f"expected at least backoff ({self.backoff:g})"))
        for i, target in enumerate(self.headroom.targets):  # one knob: the list, item by item
            found.extend(Problem("headroom.targets", f"[{i}].{p}") for p in target.problems())
        return found


def _problems(config: object, prefix: str) -> list[Problem]:
    found = []
    for f in fields(config):  # type: ignore[arg-type]
        value = getattr(config, f.name)
        rule = f.metadata.get("rule")
        if rule is not None:
            try:
                rule(value)
            except limits.InvalidValueError as exc:
                found.append(Problem(prefix + f.name, str(exc)))
        elif isinstance(value, ConsolidationConfig | HeadroomConfig):
            found.extend(_problems(value, f"{prefix}{f.name}."))
    return found


def _field(config: type, name: str) -> Field[Any]:
    return next(f for f in fields(config) if f.name == name)


def metadata_of(path: str) -> dict[str, Any]:
    """A knob's metadata (rule, flag, helm, doc) by key path (``consolidation.min_saving``)."""
    config: type = ControllerConfig
    *outer, name = path.split(".")
    for part in outer:
        config = _NESTED[part]
    return dict(_field(config, name).metadata)


def knobs(config: type = ControllerConfig, prefix: str = "") -> list[tuple[str, Any]]:
    """Every knob of the config as (key path, default), nested configs flattened."""
    out: list[tuple[str, Any]] = []
    for f in fields(config):
        if f.name in _NESTED:
            out.extend(knobs(_NESTED[f.name], f"{prefix}{f.name}."))
        else:
            out.append((prefix + f.name, f.default))
    return out


def rule_of(config: type, name: str) -> Rule | None:
    """The rule of one knob, for validators that check a field at a time (the scenario schema)."""
    rule: Rule | None = _field(config, name).metadata.get("rule")
    return rule


def default_of(config: type, name: str) -> Any:
    """The default of one knob."""
    return _field(config, name).default


_NESTED: dict[str, type] = {
    f.name: nested
    for f in fields(ControllerConfig)
    for nested in (ConsolidationConfig, HeadroomConfig)
    if f.type == nested.__name__  # annotations are strings here (from __future__)
}


def duration_text(seconds: float) -> str:
    """A default duration as flags and the chart write it: ``2s``, ``15m``, ``1h``."""
    for unit, size in (("h", 3600.0), ("m", 60.0), ("s", 1.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"
