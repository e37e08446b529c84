"""Relocation: make room on a node for a pending pod by moving lower-priority pods elsewhere.

The record (a ``Relocation`` in makeroom's own store) is written before anything else and removed
last; every other step is decided from what the cluster shows, re-checked against it (the
validator), so a fresh controller resumes or rolls back what a dead one started.

Never worse than doing nothing: a relocation that cannot proceed (a budget that lets no victim go
while nothing of its workload is on its way, replacements with nowhere to go) gives up within
``STUCK_GRACE`` of noticing, and every roll-back leaves the pod to the autoscaler for a while
(``HANDS_OFF``, doubling with each roll-back in a row) before makeroom holds it again.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict

from makeroom.controller.policy import relocation_policy
from makeroom.controller.reasons import ObjectKind, Reason
from makeroom.controller.records import Phase, RecordKind, Records, Relocation, Victim
from makeroom.controller.room import somewhere_to_go
from makeroom.controller.steps import Retry, RetryKey, Steps
from makeroom.controller.validate import Action, Live, RefusedError
from makeroom.model import SCALE_UP_DELAY, VICTIM_OF, Pod
from makeroom.model.state import ClusterState
from makeroom.model.view import ClusterView
from makeroom.planner import Move, Placement, PlacementReason, Plan, Policy, UnplaceableReason, plan
from makeroom.planner.budgets import Budgets

log = logging.getLogger("makeroom.controller")

STUCK_GRACE = 30.0
"""Seconds a relocation may stay unable to proceed before it gives up: three scans of the
autoscaler, so that a node it is about to add counts, and a change seen a moment late does not."""
STUCK_TERMINATING = 30.0
"""Seconds past its grace period a victim may still be terminating (a finalizer of its own, a kubelet
that does not answer) before the relocation ends: its room may never come free, and the pending pod
must not be kept from the autoscaler meanwhile."""
ROOM_UNUSED = 60.0
"""Seconds the room made for a pod may stay unused (every victim gone, the pod still not bound) before
makeroom concludes that the scheduler will not place it there (a podAffinity, a hostPort, a topology
spread the plan did not see): the relocation ends, the pod is reported once and never planned for
again, so that no other pods are moved for it."""
HANDS_OFF = 60.0
"""After a roll-back, the pod is left to the autoscaler (no nomination, no scale-up delay) for this
long before makeroom plans for it again, doubling with each roll-back in a row up to the timeout:
makeroom never keeps the autoscaler away from a pod it cannot help."""


class Relocations:
    def __init__(self, steps: Steps) -> None:
        self.s = steps
        self._stuck: dict[str, tuple[str, float]] = {}  # pod key -> (why, since when)
        self._freed: dict[str, float] = {}  # pod key -> since when its room has been made
        self.futile: dict[str, str] = {}
        """Pending pods no relocation can help (pod key -> why): reported once, never planned for
        again while they exist. Kept in memory: a new leader tries each once more."""
        self.zone_unknown: dict[str, str] = {}
        """Pending pods a plan left waiting on a new node of unknown zone (pod key -> what blocks):
        each said once while the pod and the reason last."""

    def forget_gone(self, state: ClusterState) -> None:
        for key in [k for k in self.futile if k not in state.pods]:
            del self.futile[key]
        for key in [k for k in self.zone_unknown if k not in state.pods]:
            del self.zone_unknown[key]

    @staticmethod
    def scan(
        state: ClusterState, records: Records
    ) -> tuple[list[tuple[str, Pod | None, Relocation | None]], list[Pod]]:
        """The relocations in the store with their pending pods (in the pods' order; a record whose pod
        is gone last), and the pods marked to leave, in one pass over the pods (most pods carry no
        annotation at all, which keeps this cheap at 150,000 pods)."""
        found: list[tuple[str, Pod | None, Relocation | None]] = []
        marked: list[Pod] = []
        recorded = records.relocations
        for pod in state.pods.values():
            if recorded and pod.key in recorded:
                found.append((pod.key, pod, recorded[pod.key]))
            if pod.annotations and VICTIM_OF in pod.annotations:
                marked.append(pod)
        found.extend((key, None, record) for key, record in recorded.items() if key not in state.pods)
        return found, marked

    # --- starting ------------------------------------------------------------------------------
    def policy(self, live: Live, waiting: list[Pod], records: Records) -> Policy:
        """The planner's policy for this round: the one function that builds it, for the real run and
        for the dry run's log of what it would do. Relocations under way keep their pods: their
        pending pods are not planned for again, their victims and the pods of surging workloads are
        not moved by another plan, and their moves count against ``max_moves_in_flight``. Pods outside
        the admin's scope are never moved."""
        config = self.s.config
        state, now = live.state, live.now
        skip = frozenset(
            p.key
            for p in state.pending()
            if p not in waiting
            or self.s.waiting(RetryKey.pod(p.key), now)
            or self.s.waiting(RetryKey.hands_off(p.key), now)
        )
        return relocation_policy(
            config,
            now,
            skip=skip,
            recently_moved=self.s.cooling(state, records, now),
            pinned=self.s.pinned(state, records, live.namespaces),
            moves_in_flight=records.moves_in_flight(),
        )

    def start(self, live: Live, waiting: list[Pod], records: Records) -> list[str]:
        """Plan for the pods the scheduler gave up on; start a relocation for each placement."""
        state, now = live.state, live.now
        policy = self.policy(live, waiting, records)
        if policy.max_moves_in_flight is not None and policy.max_moves_in_flight <= 0:
            return []
        started_at = time.perf_counter()  # a measurement for metrics, never an input to a decision
        the_plan = plan(state, policy)
        self.s.report.relocation_plan_seconds = time.perf_counter() - started_at
        self._say_zone_unknown(the_plan)
        moves: dict[str, list[Move]] = defaultdict(list)
        for move in the_plan.moves:
            moves[move.for_pod.key].append(move)
        started = []
        owners = records.surge_owners()  # one owner of each workload's surge at a time
        for placement in the_plan.placements:
            if placement.reason is not PlacementReason.RELOCATION or placement.node is None:
                continue
            pod = placement.pod
            victims = [Victim(m.pod.key, m.workload, m.from_node) for m in moves[pod.key]]
            scalable = self.s.scalable(state, victims) if self.s.config.strategy.make_before_break else set()
            taken = sorted(w for w in scalable if w in owners)
            if taken:
                # Planned with the others, but its surge would scale a workload another relocation
                # surges: it is planned again once that one is over (never two surges at once).
                self.s.report.waiting_for_surge.append(pod.name)
                log.info(
                    "relocation waits for another's surge",
                    extra={"pod": pod.key, "workloads": taken, "surged_for": [owners[w] for w in taken]},
                )
                continue
            owners.update(dict.fromkeys(scalable, pod.key))
            self._begin(state, placement, victims, scalable, now)
            started.append(pod.key)
        return started

    def _say_zone_unknown(self, the_plan: Plan) -> None:
        """A pod the plan leaves waiting because a new node's zone is unknown: nothing else would show
        why makeroom does nothing for it. Said once (an Event, a warning, the counter) per pod and
        reason."""
        for u in the_plan.unplaceable:
            key = u.pod.key
            if u.reason is not UnplaceableReason.ZONE_UNKNOWN or self.zone_unknown.get(key) == u.detail:
                continue
            self.zone_unknown[key] = u.detail
            self.s.report.zone_unknown.append(key)
            self.s.event(ObjectKind.POD, key, Reason.ZONE_UNKNOWN, f"no relocation: {u.detail}")
            log.warning(
                "no relocation: a new node's zone is unknown", extra={"pod": key, "blocked_by": u.detail}
            )

    def _begin(
        self, state: ClusterState, placement: Placement, victims: list[Victim], scalable: set[str], now: float
    ) -> None:
        pod = placement.pod
        assert placement.node is not None
        config = self.s.config
        why = (
            f"making room on {placement.node} by moving {len(victims)} pod(s) with {config.strategy}: "
            + ", ".join(v.pod.rpartition("/")[2] for v in victims)
        )
        record = Relocation(
            pod=pod.key,
            strategy=config.strategy,
            node=placement.node,
            started=now,
            deadline=now + config.timeout,
            victims=victims,
            since=now,
            surge=self.s.plan_surges(state, victims, scalable),
            why=why,
        )
        # The record goes first: it is what a fresh controller finds to resume or roll back.
        self.s.save(record)
        self.s.report.started.append(pod.name)
        self.s.event(ObjectKind.POD, pod.key, Reason.RELOCATING, why)
        log.info(
            "relocation started",
            extra={
                "pod": pod.key,
                "node": placement.node,
                "victims": len(victims),
                "strategy": record.strategy,
            },
        )
        self.advance(state, pod.key, pod, record, now)

    # --- advancing -----------------------------------------------------------------------------
    def advance(
        self, state: ClusterState, key: str, pod: Pod | None, record: Relocation | None, now: float
    ) -> None:
        if record is None:
            self.roll_back(state, key, pod, None, "its relocation record is unreadable", now)
            return
        if pod is None:
            self.roll_back(state, key, None, record, f"{key} is gone", now)
            return
        if pod.node is not None:
            self._release(state, pod, record, now)
            return
        try:
            self.s.validator.record(record)  # first: is the record borne out by the cluster at all?
            problem = self._changed(state, pod, record, now) or self._given_up(state, pod, record, now)
            if problem is not None:
                self.roll_back(state, key, pod, record, problem, now)
                return
            self._carry_on(state, pod, record, now)
        except RefusedError as refused:
            self.roll_back(state, key, pod, record, f"refused: {refused}", now)

    def _carry_on(self, state: ClusterState, pod: Pod, record: Relocation, now: float) -> None:
        self._hold(pod, record)
        if record.strategy.make_before_break and record.phase is Phase.HOLDING:
            if not self.s.surge(state, record, pod.key, pod.name):
                return
            record.phase, record.since = Phase.DRAINING, now
            self.s.save(record)
        if record.strategy.make_before_break:
            self.s.shrink(state, record)
            if now - record.since < 2 * self.s.config.interval:
                return  # the ReplicaSets remove the victims; evict only those they left behind
        self.s.evict_victims(state, record, pod.key, pod.name, now)

    def _changed(self, state: ClusterState, pod: Pod, record: Relocation, now: float) -> str | None:
        """Why the plan no longer holds, if it does not."""
        if now > record.deadline:
            return f"it was not bound within {self.s.config.timeout:g}s"
        node = state.nodes.get(record.node)
        if node is None:
            return f"node {record.node} is gone"
        if not node.ready or node.unschedulable:
            return f"node {record.node} is no longer schedulable"
        stuck = self._stuck_terminating(state, record, now)
        if stuck is not None:
            return stuck
        # The room the pod needs, once the victims are gone, must still be there; a pod stuck
        # terminating keeps its room.
        victims = {v.pod for v in record.victims}
        leaving = [
            other
            for other in state.pods_on[record.node].values()
            if (other.key in victims or (other.terminating and other.priority < pod.priority))
            and not _stuck(other, now)
        ]
        room = ClusterView(state).room_on(state.slot_of[record.node], pod, leaving)
        if (room < state.requests_of(pod.spec)).any():
            return f"the room on {record.node} was taken by other pods"
        return self._unused(state, pod, record, now)  # the room is there: is it used?

    def _unused(self, state: ClusterState, pod: Pod, record: Relocation, now: float) -> str | None:
        """Why the pod is one no relocation can help, once its room has been made for ``ROOM_UNUSED``
        and the scheduler still did not place it."""
        gone = all((p := state.pods.get(v.pod)) is None or p.node != v.node for v in record.victims)
        if not gone:
            self._freed.pop(pod.key, None)
            return None
        since = self._freed.setdefault(pod.key, now)
        if now - since <= ROOM_UNUSED:
            return None
        why = (
            f"the room on {record.node} was made {now - since:.0f}s ago and the scheduler did not place "
            "it there (a rule the plan does not see, such as podAffinity or a hostPort)"
        )
        self.futile[pod.key] = why
        return why

    @staticmethod
    def _stuck_terminating(state: ClusterState, record: Relocation, now: float) -> str | None:
        for victim in record.victims:
            p = state.pods.get(victim.pod)
            if p is not None and p.node == victim.node and _stuck(p, now):
                assert p.gone_by is not None
                late = now - p.gone_by
                return f"{victim.pod} is still terminating {late:.0f}s after its grace period ended"
        return None

    def _given_up(self, state: ClusterState, pod: Pod, record: Relocation, now: float) -> str | None:
        """Why the relocation cannot proceed, once it has not for ``STUCK_GRACE``: the autoscaler may
        then do for the pod what it would have done without makeroom."""
        why = self._blocked(state, pod, record)
        if why is None:
            self._stuck.pop(pod.key, None)
            return None
        _, since = self._stuck.setdefault(pod.key, (why, now))
        if now - since < STUCK_GRACE:
            return None
        return f"it cannot proceed: {why}"

    def _blocked(self, state: ClusterState, pod: Pod, record: Relocation) -> str | None:
        """What keeps the relocation from ever proceeding as things are: a victim to evict whose budget
        lets none of its workload's pods go while none is on its way to Ready; replacements of a
        surge with nowhere to go (no room, none coming, no group that may grow)."""
        surged = record.strategy.make_before_break and record.phase is Phase.HOLDING
        node = state.nodes.get(record.node)
        needed = node.group if node is not None else None
        budgets = Budgets.of(state)
        for victim in record.victims:
            p = state.pods.get(victim.pod)
            if p is None or p.terminating or p.node != victim.node or victim.workload is None:
                continue
            if surged and victim.workload in record.surge:
                continue  # replaced first: its budget does not hold it
            if not budgets.budgeted(victim.workload) or budgets.allowed[victim.workload] > 0:
                continue
            if not self._on_its_way(state, victim.workload, needed):
                return f"the budget of {victim.workload} lets none of its pods go and none is starting"
        if surged:
            for workload, surge in record.surge.items():
                w = state.workloads.get(workload)
                if w is None or w.replicas != surge.base + surge.by:
                    continue
                waiting = [
                    p for p in state.pending() if p.workload == workload and p.unschedulable_since is not None
                ]
                stuck = somewhere_to_go(
                    state, waiting, not_group=needed, skip={pod.key, *(p.key for p in waiting)}
                )
                if stuck is not None:
                    return f"the new pods of {workload} have nowhere to go"
        return None

    @staticmethod
    def _on_its_way(state: ClusterState, workload: str, needed: str | None) -> bool:
        """Whether a pod of the workload may still become Ready (its budget then lets one more go):
        bound and starting, or pending with somewhere to go."""
        pending = []
        for p in state.pods.values():
            if p.workload != workload or p.terminating or p.ready:
                continue
            if p.node is not None or p.unschedulable_since is None:
                return True
            pending.append(p)
        if not pending:
            return False
        return somewhere_to_go(state, pending[:1], not_group=needed, skip={p.key for p in pending}) is None

    def _hold(self, pod: Pod, record: Relocation) -> None:
        """Keep the room: nominate the pod to the node (the scheduler holds room for it against
        lower-priority pods; the autoscaler skips pods nominated to an existing node), and hold the
        autoscaler off with pod-scale-up-delay should the nomination be cleared."""
        if pod.nominated_node != record.node:
            self.s.gated(Action.HOLD, record, pod.key, self.s.cluster.nominate, pod.key, record.node)
        if SCALE_UP_DELAY not in pod.annotations:
            delay = math.ceil(record.deadline - pod.created_at)
            changes = {SCALE_UP_DELAY: f"{delay}s"}
            self.s.gated(Action.HOLD, record, pod.key, self.s.cluster.annotate_pod, pod.key, changes)

    # --- ending --------------------------------------------------------------------------------
    def _release(self, state: ClusterState, pod: Pod, record: Relocation, now: float) -> None:
        self._stuck.pop(pod.key, None)
        self._freed.pop(pod.key, None)
        self.s.retry.pop(RetryKey.hands_off(pod.key), None)
        self.s.cool_down(state, record, now)
        self.s.undo_moves(state, record)
        if pod.nominated_node is not None:
            self.s.act(self.s.cluster.nominate, pod.key, None)
        if SCALE_UP_DELAY in pod.annotations:
            self.s.act(self.s.cluster.annotate_pod, pod.key, {SCALE_UP_DELAY: None})
        self.s.act(self.s.cluster.delete_record, RecordKind.RELOCATION, pod.key)
        self.s.report.done.append(pod.name)
        self.s.event(
            ObjectKind.POD,
            pod.key,
            Reason.ROOM_MADE,
            f"bound to {pod.node} after {now - record.started:.0f}s",
        )
        log.info("relocation done", extra={"pod": pod.key, "node": pod.node, "seconds": now - record.started})

    def roll_back(
        self,
        state: ClusterState,
        key: str,
        pod: Pod | None,
        record: Relocation | None,
        why: str,
        now: float,
    ) -> None:
        self._stuck.pop(key, None)
        self._freed.pop(key, None)
        if record is not None:
            self.s.cool_down(state, record, now)
            self.s.undo_moves(state, record)
        if pod is not None:
            if pod.nominated_node is not None and pod.node is None:
                self.s.act(self.s.cluster.nominate, pod.key, None)
            if SCALE_UP_DELAY in pod.annotations:
                self.s.act(self.s.cluster.annotate_pod, pod.key, {SCALE_UP_DELAY: None})
        self.s.act(self.s.cluster.delete_record, RecordKind.RELOCATION, key)
        self._hands_off(key, now)
        self.s.report.rolled_back.append(key.rpartition("/")[2])
        if pod is not None:
            self.s.event(ObjectKind.POD, key, Reason.ROLLED_BACK, f"rolled back: {why}")
        # A pod its owner deleted while room was made for it (a scale-down, a finished task) is routine;
        # any other roll-back is something an operator looks into.
        level = logging.INFO if pod is None and record is not None else logging.WARNING
        log.log(level, "relocation rolled back", extra={"pod": key, "reason": why})
        if key in self.futile:
            self.s.report.futile.append(key)
            if pod is not None:
                self.s.event(ObjectKind.POD, key, Reason.CANNOT_HELP, f"no relocation can help: {why}")
            log.warning("no relocation can help the pod; left to the scheduler", extra={"pod": key})

    def _hands_off(self, key: str, now: float) -> None:
        """The pod is left to the autoscaler for a while: no plan holds it again until then."""
        hold = RetryKey.hands_off(key)
        last = self.s.retry.get(hold)
        attempts = last.attempts + 1 if last is not None else 1
        wait = min(self.s.config.timeout, max(self.s.config.backoff, HANDS_OFF * 2.0 ** (attempts - 1)))
        self.s.retry[hold] = Retry(now + wait, attempts)


def _stuck(pod: Pod, now: float) -> bool:
    """A pod terminating past its grace period and the margin (``STUCK_TERMINATING``)."""
    return pod.terminating and pod.gone_by is not None and now > pod.gone_by + STUCK_TERMINATING
