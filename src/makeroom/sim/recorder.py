"""What a run records: the event timeline, per-workload availability and per-group node counts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Removal(StrEnum):
    """How a running pod was removed, as the result's ``removed`` counts it (docs/report.md)."""

    EVICTED = "evicted"  # through the Eviction API (makeroom's evict, an autoscaler's drain)
    PREEMPTED = "preempted"  # deleted by kube-scheduler's preemption
    REPLACED = "replaced"  # removed by scale-down after its replacement was Ready (migrate)


def no_removals() -> dict[Removal, int]:
    return dict.fromkeys(Removal, 0)


@dataclass(slots=True)
class WorkloadTrack:
    priority: int
    desired: int
    ready: int = 0
    raised_at: float = 0.0
    ready_at: float | None = None  # first time ready >= desired after the last raise
    min_ready: int | None = None
    unavailable_s: float = 0.0
    evicted: int = 0  # every pod removed, however (spec v1's ``evicted``)
    removed: dict[Removal, int] = field(default_factory=no_removals)
    last_t: float = 0.0

    def advance(self, t: float) -> None:
        self.unavailable_s += max(0, self.desired - self.ready) * (t - self.last_t)
        self.last_t = t

    def observe(self, t: float) -> None:
        if self.ready >= self.desired and self.ready_at is None:
            self.ready_at = t
        if self.desired > 0 and self.ready >= self.desired and self.min_ready is None:
            self.min_ready = self.ready
        if self.min_ready is not None:
            self.min_ready = min(self.min_ready, self.ready)


@dataclass(slots=True)
class GroupTrack:
    price_per_hour: float
    nodes: int = 0  # every node that exists or is being provisioned (billed)
    ready: int = 0
    peak: int = 0
    added: int = 0
    removed: int = 0
    node_seconds: float = 0.0
    last_t: float = 0.0
    # Nodes of a pool priced otherwise than price_per_hour (by their instance type): the sum of their
    # differences, and its integral over time. Zero for a group of identical nodes.
    extra_price_per_hour: float = 0.0
    extra_price_seconds: float = 0.0

    def advance(self, t: float) -> None:
        self.node_seconds += self.nodes * (t - self.last_t)
        self.extra_price_seconds += self.extra_price_per_hour * (t - self.last_t)
        self.last_t = t

    def cost(self) -> float:
        """What the group's nodes cost until ``last_t``, in the unit of the prices."""
        return (self.node_seconds / 3600.0) * self.price_per_hour + self.extra_price_seconds / 3600.0


@dataclass(frozen=True, slots=True)
class TimelineEvent:
    """One entry of the result's ``events``: when, what kind, and the kind's own fields (pod, node,
    group, workload, reason, ...), in the order they were recorded."""

    t: float
    kind: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    def get(self, key: str) -> Any:
        """A field of the event, or None."""
        return self.fields.get(key)

    def to_json(self) -> dict[str, Any]:
        return {"t": self.t, "kind": self.kind, **self.fields}


@dataclass(slots=True)
class Sample:
    t: float
    nodes: dict[str, int]
    ready_nodes: dict[str, int]
    ready: dict[str, int]
    desired: dict[str, int]
    pending: int


@dataclass
class Recorder:
    """Integrates availability and cost exactly at each change, and keeps a series for pictures."""

    workloads: dict[str, WorkloadTrack] = field(default_factory=dict)
    groups: dict[str, GroupTrack] = field(default_factory=dict)
    events: list[TimelineEvent] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    evictions: int = 0  # every pod removed, however (spec v1's ``evictions``)
    removed: dict[Removal, int] = field(default_factory=no_removals)
    keep_events: bool = True
    keep_samples: bool = True
    resolution: float = 0.0  # simulated seconds between two samples; 0 keeps every change
    listeners: list[Callable[[float, str, Mapping[str, Any]], None]] = field(default_factory=list)
    """Told of every event, kept or not: a benchmark's own measures without the whole timeline."""

    def event(self, t: float, kind: str, **fields: Any) -> None:
        for listen in self.listeners:
            listen(t, kind, fields)
        if self.keep_events:
            self.events.append(TimelineEvent(round(t, 3), kind, fields))

    def count_removal(self, workload: str | None, how: Removal) -> None:
        self.evictions += 1
        self.removed[how] += 1
        track = self.workloads.get(workload) if workload is not None else None
        if track is not None:
            track.evicted += 1
            track.removed[how] += 1

    def advance(self, t: float) -> None:
        for w in self.workloads.values():
            w.advance(t)
        for g in self.groups.values():
            g.advance(t)

    def sample(self, t: float, pending: int) -> None:
        if not self.keep_samples:
            return
        if self.samples and 0 < t - self.samples[-1].t < self.resolution:
            return
        sample = Sample(
            t,
            {n: g.nodes for n, g in self.groups.items()},
            {n: g.ready for n, g in self.groups.items()},
            {n: w.ready for n, w in self.workloads.items()},
            {n: w.desired for n, w in self.workloads.items()},
            pending,
        )
        if self.samples and self.samples[-1].t == t:
            self.samples[-1] = sample
        else:
            self.samples.append(sample)
