"""The result of a run as typed values; the JSON contract of spec v1 is produced from them.

``Result.to_json()`` is the only place that knows the keys of that JSON object and their order;
``report/`` and ``cli/`` read the fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from makeroom.controller.config import Strategy
from makeroom.model import AutoscalerKind
from makeroom.sim.recorder import Removal, Sample, TimelineEvent

if TYPE_CHECKING:
    from makeroom.sim.simulation import Simulation


class PodPhase(StrEnum):
    """A pod's state at the end of a run, as ``pods[].phase`` reports it."""

    RUNNING = "Running"  # bound and Ready
    PENDING = "Pending"  # not bound, or bound and not yet Ready
    TERMINATING = "Terminating"  # being deleted, still holding its node


@dataclass(frozen=True, slots=True)
class WorkloadResult:
    priority: int
    desired: int
    """Replicas wanted at the end."""
    ready_at_end: int
    time_to_ready_s: float | None
    """From the last event that raised its replicas (or t=0) until ready == desired; None if never."""
    min_ready: int | None
    """Fewest Ready replicas after it first had all it wanted; None if it never had."""
    unavailable_replica_seconds: float
    evicted: int
    """Its pods removed, however: the sum of ``removed`` (spec v1's name, kept as it was)."""
    removed: Mapping[Removal, int] = field(default_factory=lambda: dict.fromkeys(Removal, 0))
    """Its pods removed, by how: evicted (the Eviction API only), preempted, or replaced (removed by
    scale-down after its replacement was Ready)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "priority": self.priority,
            "desired": self.desired,
            "ready_at_end": self.ready_at_end,
            "time_to_ready_s": self.time_to_ready_s,
            "min_ready": self.min_ready,
            "unavailable_replica_seconds": self.unavailable_replica_seconds,
            "evicted": self.evicted,
            "removed": removed_json(self.removed),
        }


@dataclass(frozen=True, slots=True)
class GroupResult:
    nodes_at_end: int
    peak_nodes: int
    nodes_added: int
    nodes_removed: int
    node_hours: float
    cost: float

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes_at_end": self.nodes_at_end,
            "peak_nodes": self.peak_nodes,
            "nodes_added": self.nodes_added,
            "nodes_removed": self.nodes_removed,
            "node_hours": self.node_hours,
            "cost": self.cost,
        }


@dataclass(frozen=True, slots=True)
class PodResult:
    name: str
    workload: str | None
    node: str | None
    group: str | None
    phase: PodPhase

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "workload": self.workload,
            "node": self.node,
            "group": self.group,
            "phase": self.phase.value,
        }


@dataclass(frozen=True, slots=True)
class Result:
    """One run: the summary of spec v1, the series for pictures, and how much the loop did."""

    scenario: str
    strategy: Strategy
    seed: int
    duration_s: float
    workloads: Mapping[str, WorkloadResult]
    node_groups: Mapping[str, GroupResult]
    evictions: int
    """All pods removed, however: the sum of ``removed`` (spec v1's name, kept as it was)."""
    cost: float
    pods: tuple[PodResult, ...]
    """Every pod that exists at the end, in creation order."""
    events: tuple[TimelineEvent, ...]
    samples: tuple[Sample, ...] = ()
    events_processed: int = 0
    autoscaler: AutoscalerKind = AutoscalerKind.CLUSTER_AUTOSCALER
    """Which autoscaler ran; the JSON names it when it is not the cluster-autoscaler (spec v1's)."""
    removed: Mapping[Removal, int] = field(default_factory=lambda: dict.fromkeys(Removal, 0))
    """All pods removed, by how (as ``WorkloadResult.removed``)."""

    @property
    def label(self) -> str:
        """The run's name in comparisons: its strategy, and the autoscaler when it is not the default."""
        if self.autoscaler is AutoscalerKind.CLUSTER_AUTOSCALER:
            return self.strategy.value
        return f"{self.strategy.value}/{self.autoscaler.value}"

    @property
    def pending_at_end(self) -> list[str]:
        """Names of the pods not running at the end (terminating pods are leaving, not waiting)."""
        return [p.name for p in self.pods if p.phase is PodPhase.PENDING]

    def to_json(self) -> dict[str, Any]:
        """The JSON object that ``makeroom simulate --json`` prints (spec v1; keys in this order)."""
        head: dict[str, Any] = {"scenario": self.scenario, "strategy": self.strategy.value}
        if self.autoscaler is not AutoscalerKind.CLUSTER_AUTOSCALER:
            head["autoscaler"] = self.autoscaler.value  # an extension: absent from spec v1 runs
        return {
            **head,
            "seed": self.seed,
            "duration_s": self.duration_s,
            "workloads": {name: w.to_json() for name, w in self.workloads.items()},
            "node_groups": {name: g.to_json() for name, g in self.node_groups.items()},
            "evictions": self.evictions,
            "removed": removed_json(self.removed),
            "cost": self.cost,
            "pending_at_end": self.pending_at_end,
            "pods": [p.to_json() for p in self.pods],
            "events": [e.to_json() for e in self.events],
        }

    @property
    def data(self) -> dict[str, Any]:
        """``to_json()``, for tests that compare against the JSON contract by key."""
        return self.to_json()


def removed_json(removed: Mapping[Removal, int]) -> dict[str, int]:
    """``{"evicted": n, "preempted": n, "replaced": n}``: an extension of spec v1 (docs/report.md)."""
    return {how.value: removed.get(how, 0) for how in Removal}


def _r(x: float) -> float:
    return round(x, 3)


def _phase(terminating: bool, ready: bool) -> PodPhase:
    if terminating:
        return PodPhase.TERMINATING
    return PodPhase.RUNNING if ready else PodPhase.PENDING


def summarize(sim: Simulation, horizon: float) -> Result:
    world = sim.world
    rec = sim.recorder
    workloads = {
        name: WorkloadResult(
            priority=t.priority,
            desired=t.desired,
            ready_at_end=t.ready,
            time_to_ready_s=None if t.ready_at is None else _r(t.ready_at - t.raised_at),
            min_ready=t.min_ready,
            unavailable_replica_seconds=_r(t.unavailable_s),
            evicted=t.evicted,
            removed=dict(t.removed),
        )
        for name, t in rec.workloads.items()
    }
    groups = {}
    for name, g in rec.groups.items():
        hours = g.node_seconds / 3600.0
        groups[name] = GroupResult(
            nodes_at_end=g.nodes,
            peak_nodes=g.peak,
            nodes_added=g.added,
            nodes_removed=g.removed,
            node_hours=round(hours, 6),
            cost=round(g.cost(), 6),
        )
    pods = []
    for pod in sorted(world.state.pods.values(), key=lambda p: p.seq):
        node = world.state.nodes.get(pod.node) if pod.node else None
        pods.append(
            PodResult(
                name=pod.name,
                workload=pod.workload,
                node=pod.node,
                group=node.group if node else None,
                phase=_phase(pod.terminating, pod.ready),
            )
        )
    return Result(
        scenario=sim.scenario.name,
        strategy=Strategy(sim.options.strategy),
        seed=sim.options.seed,
        duration_s=_r(horizon),
        workloads=workloads,
        node_groups=groups,
        evictions=rec.evictions,
        cost=round(sum(g.cost for g in groups.values()), 6),
        pods=tuple(pods),
        events=tuple(rec.events),
        samples=tuple(rec.samples),
        events_processed=sim.loop.processed,
        autoscaler=sim.kind,
        removed=dict(rec.removed),
    )
