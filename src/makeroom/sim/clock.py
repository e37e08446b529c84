"""A virtual clock and an event heap keyed by (time, phase, sequence), so that ties always break
the same way and a run is deterministic for a given scenario and seed."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from enum import IntEnum


class Phase(IntEnum):
    """Order of work at one instant: the world changes first, then controllers react to it."""

    WORLD = 0  # scenario events, kubelets, nodes becoming Ready
    CONTROLLER = 1  # makeroom's controller loop
    SCHEDULER = 2  # kube-scheduler's pass over the queue
    AUTOSCALER = 3  # cluster-autoscaler's scan


Action = Callable[[], None]


class EventLoop:
    def __init__(self) -> None:
        self.now = 0.0
        self.phase = Phase.WORLD  # of the action running now (or last run)
        self._heap: list[tuple[float, int, int, Action]] = []
        self._seq = 0
        self.processed = 0

    def at(self, time: float, phase: Phase, action: Action) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (max(time, self.now), int(phase), self._seq, action))

    def after(self, delay: float, phase: Phase, action: Action) -> None:
        self.at(self.now + delay, phase, action)

    def next_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def run_until(
        self, horizon: float, on_step: Callable[[float], None] | None = None, before: Phase | None = None
    ) -> None:
        """Run every action up to ``horizon``; with ``before``, at ``horizon`` only those of the earlier
        phases (the cluster as a component of phase ``before`` sees it at that instant)."""
        while self._heap and (
            self._heap[0][0] < horizon
            or (self._heap[0][0] == horizon and (before is None or self._heap[0][1] < before))
        ):
            time, phase, _, action = heapq.heappop(self._heap)
            self.now = time
            self.phase = Phase(phase)
            action()
            self.processed += 1
            if on_step is not None:
                on_step(time)
        self.now = max(self.now, horizon)
