"""The controller's loop: observe, verify and act on what is under way, clean up, then plan.

Relocation always comes first: consolidation starts only when no pod waits to be scheduled and no
relocation runs, and a consolidation that is still moving pods stops as soon as one waits. Planning for
the waiting pods goes on while relocations run (their pods, victims and moves are held out of the new
plans), so that no relocation, however long, stops makeroom for the rest of the cluster.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from makeroom.controller.config import ControllerConfig, Strategy
from makeroom.controller.consolidator import Consolidations
from makeroom.controller.keeper import KEEP_ANCHOR, Keepers, keep_anchor
from makeroom.controller.port import Clock, Cluster, ClusterError
from makeroom.controller.records import RecordKind, Records
from makeroom.controller.relocator import Relocations
from makeroom.controller.scope import Scope
from makeroom.controller.steps import NODE_ANCHOR, RetryKey, Step, Steps, TickReport, node_anchor
from makeroom.controller.validate import Live
from makeroom.model import EXPENDABLE_PRIORITY_CUTOFF, Pod
from makeroom.model.state import ClusterState
from makeroom.planner import Plan, plan

log = logging.getLogger("makeroom.controller")

EXPECTATION_TIMEOUT = 30.0
REPLAN_AFTER_CHANGE = 10.0  # one autoscaler scan
REPLAN_EVERY = 60.0
ORPHANS_PER_TICK = 50
"""Orphan marks removed per round at most: a tenant can put ``makeroom.io/victim-of`` on thousands of
its own pods, and each removal is an API call; the rest wait for the next rounds."""


@dataclass(slots=True)
class Attempt:
    """The last planning attempt of a kind: when, on which cluster generation, for which pods."""

    at: float
    generation: int
    waiting: set[str]


class Controller:
    def __init__(
        self, cluster: Cluster, clock: Clock, config: ControllerConfig, scope: Scope | None = None
    ) -> None:
        self.steps = Steps(cluster, clock, config, scope)
        self.relocations = Relocations(self.steps)
        self.consolidations = Consolidations(self.steps)
        self.keepers = Keepers(self.steps)
        self.config = config
        # Records written but not yet seen in the store (a dry run writes none): no new round is
        # planned until they show, so nothing is ever started twice.
        self._expected: dict[str, float] = {}
        self._attempts: dict[Step, Attempt] = {}

    @property
    def report(self) -> TickReport:
        return self.steps.report

    @property
    def scope(self) -> Scope:
        return self.steps.scope

    def tick(self) -> TickReport:
        s = self.steps
        s.report = TickReport()
        now = s.clock.now()
        state = s.cluster.snapshot()
        try:
            records = s.cluster.records()
            live = Live(state, s.cluster.namespaces(), now, records)
        except ClusterError as exc:  # without its records makeroom must not act at all
            s.report.errors += 1
            log.warning("records not read; nothing done this round", extra={"error": str(exc)})
            return s.report
        s.validator.see(live)
        s.see(records)
        self.relocations.forget_gone(state)
        waiting = _waiting(state, records)
        relocating, marked = self.relocations.scan(state, records)
        for key, pod, record in relocating:
            s.guarded(RetryKey.pod(key), self.relocations.advance, state, key, pod, record, now)
        consolidating = self.consolidations.active(state, records)
        pausing = self._pauses_consolidation(waiting, live)
        for name, node, consolidation in consolidating:
            retry = RetryKey.consolidation(name)
            s.guarded(retry, self.consolidations.advance, state, name, node, consolidation, now, pausing)
        for name, moving in self.keepers.active(records):
            s.guarded(RetryKey.keeping(name), self.keepers.advance, state, name, moving, now, pausing)
        anchors = set(records.relocations) | {node_anchor(n) for n in records.consolidations}
        anchors |= {keep_anchor(n) for n in records.keepings}
        # Planning before cleanup: what a tenant can multiply (marks on its own pods) is tidied after,
        # a bounded amount per round, so it can neither delay room-making nor stall the loop.
        self._plan_round(s, state, records, live, waiting, anchors, now)
        anchors |= set(self._expected)  # what this round started is no orphan
        consolidated = {a.removeprefix(NODE_ANCHOR) for a in anchors if a.startswith(NODE_ANCHOR)}
        s.guarded(RetryKey.step(Step.ORPHANS), s.collect_orphans, state, anchors, marked, ORPHANS_PER_TICK)
        s.guarded(RetryKey.step(Step.ORPHAN_TAINTS), self.consolidations.collect_orphans, state, consolidated)
        keeping = self.config.strategy is Strategy.HEADROOM
        s.guarded(
            RetryKey.step(Step.HEADROOM_TAINTS), self.keepers.collect_orphans, state, records, keeping, now
        )
        s.guarded(RetryKey.step(Step.COOLDOWNS), s.sweep_cooldowns, records, now)
        return s.report

    def _plan_round(
        self,
        s: Steps,
        state: ClusterState,
        records: Records,
        live: Live,
        waiting: list[Pod],
        anchors: set[str],
        now: float,
    ) -> None:
        for key, when in list(self._expected.items()):
            gone = (
                not key.startswith(KEEP_ANCHOR)
                and key not in state.pods
                and key.removeprefix(NODE_ANCHOR) not in state.nodes
            )
            if key in anchors or gone or now - when > EXPECTATION_TIMEOUT:
                del self._expected[key]
        if self._expected:
            return
        to_plan = self._room_for(waiting, records, live)
        if to_plan and self._worth_planning(Step.PLAN, state, {p.key for p in to_plan}, now):
            s.guarded(RetryKey.step(Step.PLAN), self._plan, live, to_plan, records)
        pausing = self._pauses_consolidation(waiting, live)
        idle = not pausing and not records.relocations and not records.consolidations and not records.keepings
        consolidate = self.config.consolidation.enabled and idle
        if consolidate and self._worth_planning(Step.CONSOLIDATE, state, set(), now):
            s.guarded(RetryKey.step(Step.CONSOLIDATE), self._consolidate, live, records)
        # Headroom after consolidation, and never beside a relocation: the waiting pod's cure first.
        keep = self.config.strategy is Strategy.HEADROOM and idle and not self._expected
        if keep and self._worth_planning(Step.KEEP, state, set(), now):
            s.guarded(RetryKey.step(Step.KEEP), self._keep, live, records)
            s.guarded(RetryKey.step(Step.BUFFER), self.keepers.buffer, state)

    def _pauses_consolidation(self, waiting: list[Pod], live: Live) -> list[Pod]:
        """The waiting pods consolidation gives way to: those makeroom may make room for (in the
        admin's scope), which the autoscaler would add a node for (not expendable). A pod outside the
        scope is nobody's business of makeroom's, and must not halt consolidation cluster-wide."""
        side, futile = self.scope.room_for, self.relocations.futile
        return [
            p
            for p in waiting
            if p.priority >= EXPENDABLE_PRIORITY_CUTOFF
            and p.key not in futile
            and side.refuses(p, live.namespaces) is None
        ]

    def clean_up(self, why: str) -> TickReport:
        """Undo everything makeroom has under way and every mark it left (``makeroom cleanup``, before
        an uninstall): each relocation rolled back, each consolidation given up, every victim mark and
        consolidation taint removed, every record deleted. Idempotent: a second pass finds nothing. A
        failed call raises ClusterError; the caller runs the pass again."""
        s = self.steps
        s.report = TickReport()
        now = s.clock.now()
        state = s.cluster.snapshot()
        records = s.cluster.records()
        s.see(records)
        relocating, marked = self.relocations.scan(state, records)
        for key, pod, record in relocating:
            self.relocations.roll_back(state, key, pod, record, why, now)
        for name, node, consolidation in self.consolidations.active(state, records):
            self.consolidations.give_up(state, name, node, consolidation, why, now)
        for name, moving in self.keepers.active(records):
            self.keepers.give_up(state, name, moving, why, now)
        self.keepers.collect_orphans(state, Records(), keeping=False, now=now)  # every headroom taint
        for target in sorted(records.headroom):
            s.act(s.cluster.delete_record, RecordKind.HEADROOM, target)
        handled = {v.pod for _, _, r in relocating if r is not None for v in r.victims}
        handled |= {v.pod for r in records.keepings.values() if r is not None for v in r.victims}
        s.collect_orphans(state, set(), [p for p in marked if p.key not in handled])
        self.consolidations.collect_orphans(state, set(records.consolidations))  # given up above
        for workload in sorted({*records.cooldowns, *s.cooldowns}):  # those just written too
            s.act(s.cluster.delete_record, RecordKind.COOLDOWN, workload)
        s.cooldowns.clear()
        return s.report

    def preview(self, state: ClusterState) -> Plan:
        """The plan that a relocation round would carry out on ``state`` now, with exactly the policy
        of the real run: what ``makeroom run --dry-run`` logs."""
        s = self.steps
        records = s.cluster.records()
        live = Live(state, s.cluster.namespaces(), s.clock.now(), records)
        to_plan = self._room_for(_waiting(state, records), records, live)
        return plan(state, self.relocations.policy(live, to_plan, records))

    def _room_for(self, waiting: list[Pod], records: Records, live: Live) -> list[Pod]:
        """The waiting pods makeroom may make room for: inside the admin's scope, without a relocation
        under way."""
        side = self.scope.room_for
        futile = self.relocations.futile
        # The planner counts only on nodes the scheduler's filters admit (model.scheduling: inter-pod
        # affinity, topology spread, host ports, volumes); ``futile`` catches, once, a pod that the
        # scheduler still left waiting on the room made for it.
        return [
            p
            for p in waiting
            if p.key not in records.relocations
            and p.key not in futile
            and side.refuses(p, live.namespaces) is None
        ]

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

    def _plan(self, live: Live, waiting: list[Pod], records: Records) -> None:
        started = self.relocations.start(live, waiting, records)
        for key in started:
            self._expected[key] = live.now
        self._attempts[Step.PLAN] = Attempt(live.now, live.state.generation, {p.key for p in waiting})

    def _keep(self, live: Live, records: Records) -> None:
        target = self.keepers.keep(live, records)
        if target is not None:
            self._expected[keep_anchor(target)] = live.now
        self._attempts[Step.KEEP] = Attempt(live.now, live.state.generation, set())

    def _consolidate(self, live: Live, records: Records) -> None:
        node = self.consolidations.start(live, records)
        if node is not None:
            self._expected[node_anchor(node)] = live.now
        self._attempts[Step.CONSOLIDATE] = Attempt(live.now, live.state.generation, set())


def _waiting(state: ClusterState, records: Records) -> list[Pod]:
    """The pods to make room for: unschedulable, and not the new pods of a surge (those wait for room
    by design)."""
    surging = records.surging()
    return [p for p in state.pending() if p.unschedulable_since is not None and p.workload not in surging]
