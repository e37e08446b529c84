"""The controller's loop: observe, verify and act on what is under way, clean up, then plan.

Relocation always comes first: consolidation starts only when no pod waits to be scheduled and no
relocation runs, and a consolidation that is still moving pods stops as soon as one waits.
"""

from __future__ import annotations

from dataclasses import dataclass

from makeroom.controller.config import ControllerConfig
from makeroom.controller.consolidator import Consolidations
from makeroom.controller.port import Clock, Cluster
from makeroom.controller.records import SURGE
from makeroom.controller.relocator import Relocations
from makeroom.controller.steps import NODE_ANCHOR, RetryKey, Step, Steps, TickReport, node_anchor
from makeroom.model import Pod
from makeroom.model.state import ClusterState
from makeroom.planner import Plan, plan

EXPECTATION_TIMEOUT = 30.0
REPLAN_AFTER_CHANGE = 10.0  # one autoscaler scan
REPLAN_EVERY = 60.0


@dataclass(slots=True)
class Attempt:
    """The last planning attempt of a kind: when, on which cluster generation, for which pods."""

    at: float
    generation: int
    waiting: set[str]


class Controller:
    def __init__(self, cluster: Cluster, clock: Clock, config: ControllerConfig) -> None:
        self.steps = Steps(cluster, clock, config)
        self.relocations = Relocations(self.steps)
        self.consolidations = Consolidations(self.steps)
        self.config = config
        # Records written but perhaps not yet seen in a cached snapshot (a controller's expectations):
        # no new round is planned until they show, so a lagging cache never starts anything twice.
        self._expected: dict[str, float] = {}
        self._attempts: dict[Step, Attempt] = {}

    @property
    def report(self) -> TickReport:
        return self.steps.report

    def tick(self) -> TickReport:
        s = self.steps
        s.report = TickReport()
        now = s.clock.now()
        state = s.cluster.snapshot()
        waiting = _waiting(state)
        relocating, marked = self.relocations.scan(state)
        for pod, record in relocating:
            s.guarded(RetryKey.pod(pod.key), self.relocations.advance, state, pod, record, now)
        consolidating = self.consolidations.active(state)
        for node, consolidation in consolidating:
            retry = RetryKey.consolidation(node.name)
            s.guarded(retry, self.consolidations.advance, state, node, consolidation, now, waiting)
        live = {p.key for p, _ in relocating} | {node_anchor(n.name) for n, _ in consolidating}
        s.guarded(RetryKey.step(Step.ORPHANS), s.collect_orphans, state, live, marked)
        s.guarded(RetryKey.step(Step.ORPHAN_TAINTS), self.consolidations.collect_orphans, state)
        for key, when in list(self._expected.items()):
            gone = key not in state.pods and key.removeprefix(NODE_ANCHOR) not in state.nodes
            if key in live or gone or now - when > EXPECTATION_TIMEOUT:
                del self._expected[key]
        if relocating or self._expected:
            return s.report
        if waiting and self._worth_planning(Step.PLAN, state, {p.key for p in waiting}, now):
            s.guarded(RetryKey.step(Step.PLAN), self._plan, state, waiting, now)
        consolidate = self.config.consolidation.enabled and not waiting and not consolidating
        if consolidate and self._worth_planning(Step.CONSOLIDATE, state, set(), now):
            s.guarded(RetryKey.step(Step.CONSOLIDATE), self._consolidate, state, now)
        return s.report

    def preview(self, state: ClusterState) -> Plan:
        """The plan that a relocation round would carry out on ``state`` now, with exactly the policy
        of the real run: what ``makeroom run --dry-run`` logs."""
        return plan(state, self.relocations.policy(state, _waiting(state), self.steps.clock.now()))

    def _worth_planning(self, kind: Step, state: ClusterState, waiting: set[str], now: float) -> bool:
        """Planning again on an unchanged cluster gives the same answer. Plan at once for a pod that
        newly waits; after a fruitless attempt, again once the cluster changed and a little time
        passed (or, for what time alone changes, cooldowns and backoffs, after a longer while)."""
        last = self._attempts.get(kind)
        if last is None or waiting - last.waiting:
            return True
        since = now - last.at
        changed = state.generation != last.generation
        return (changed and since >= REPLAN_AFTER_CHANGE) or since >= REPLAN_EVERY

    def _plan(self, state: ClusterState, waiting: list[Pod], now: float) -> None:
        started = self.relocations.start(state, waiting, now)
        for key in started:
            self._expected[key] = now
        self._attempts[Step.PLAN] = Attempt(now, state.generation, {p.key for p in waiting})

    def _consolidate(self, state: ClusterState, now: float) -> None:
        node = self.consolidations.start(state, now)
        if node is not None:
            self._expected[node_anchor(node)] = now
        self._attempts[Step.CONSOLIDATE] = Attempt(now, state.generation, set())


def _waiting(state: ClusterState) -> list[Pod]:
    """The pods to make room for: unschedulable, and not the new pods of a surge (those wait for room
    by design)."""
    surging = {w for w, wl in state.workloads.items() if SURGE in wl.annotations}
    return [p for p in state.pending() if p.unschedulable_since is not None and p.workload not in surging]
