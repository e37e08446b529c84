"""The relocation controller: observe, plan, act, verify, through the Cluster port.

Each reconciliation reads the cluster, carries every relocation recorded on a pending pod one step
further, cleans up what a dead controller left half done, and, when no relocation is under way, asks
the planner for the next ones. Every step is idempotent and reads its progress back from the cluster,
so a controller can be stopped between any two actions and a fresh one finishes or rolls back.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from dataclasses import dataclass, field

from makeroom.controller.config import ControllerConfig
from makeroom.controller.port import Clock, Cluster, ClusterError, EvictionBlockedError, NotFoundError
from makeroom.controller.records import (
    PRIOR_DELETION_COST,
    RELOCATION,
    SURGE,
    VICTIM_DELETION_COST,
    Phase,
    Relocation,
    Surge,
    Victim,
)
from makeroom.model import DELETION_COST, SCALE_UP_DELAY, VICTIM_OF, Pod
from makeroom.model.state import ClusterState
from makeroom.planner import Move, Placement, PlacementReason, Policy, plan

log = logging.getLogger("makeroom.controller")
EXPECTATION_TIMEOUT = 30.0


@dataclass(slots=True)
class Retry:
    at: float
    attempts: int


@dataclass(slots=True)
class TickReport:
    """What one reconciliation did, for logs, metrics and tests."""

    started: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)
    actions: int = 0
    errors: int = 0


class Controller:
    def __init__(self, cluster: Cluster, clock: Clock, config: ControllerConfig) -> None:
        self.cluster = cluster
        self.clock = clock
        self.config = config
        self._retry: dict[str, Retry] = {}
        self._moved_workloads: dict[str, float] = {}  # workload -> when makeroom last moved its pods
        # Records written but perhaps not yet seen in a cached snapshot (a controller's expectations):
        # no new round is planned until they show, so a lagging cache never starts a pod twice.
        self._expected: dict[str, float] = {}
        self.report = TickReport()

    # --- the loop ------------------------------------------------------------------------------
    def tick(self) -> TickReport:
        self.report = TickReport()
        now = self.clock.now()
        state = self.cluster.snapshot()
        active = self._active(state)
        for pod, record in active:
            self._guarded(pod.key, lambda p=pod, r=record: self._advance(state, p, r, now))
        self._guarded("orphans", lambda: self._collect_orphans(state))
        seen = {p.key for p, _ in self._active(state)}
        for key, when in list(self._expected.items()):
            if key in seen or now - when > EXPECTATION_TIMEOUT:
                del self._expected[key]
        if not seen and not self._expected:
            self._guarded("plan", lambda: self._start(state, now))
        return self.report

    def _guarded(self, what: str, step: object) -> None:
        assert callable(step)
        try:
            step()
        except ClusterError as exc:
            self.report.errors += 1
            retry = self._retry.get(what)
            attempts = retry.attempts + 1 if retry else 1
            wait = min(self.config.max_backoff, self.config.backoff * 2 ** (attempts - 1))
            self._retry[what] = Retry(self.clock.now() + wait, attempts)
            log.warning("step failed; retrying", extra={"object": what, "error": str(exc), "wait_s": wait})

    def _waiting(self, key: str, now: float) -> bool:
        retry = self._retry.get(key)
        return retry is not None and retry.at > now

    def _active(self, state: ClusterState) -> list[tuple[Pod, Relocation | None]]:
        out = []
        for pod in state.pods.values():
            text = pod.annotations.get(RELOCATION)
            if text is not None:
                out.append((pod, Relocation.from_json(text)))
        return out

    # --- starting ------------------------------------------------------------------------------
    def _start(self, state: ClusterState, now: float) -> None:
        waiting = [p for p in state.pending() if p.unschedulable_since is not None]
        if not waiting:
            return
        skip = frozenset(p.key for p in state.pending() if p not in waiting or self._waiting(p.key, now))
        the_plan = plan(
            state,
            Policy(
                now=now,
                cooldown=self.config.cooldown,
                max_moves_in_flight=self.config.max_moves_in_flight,
                skip=skip,
                recently_moved=self._cooling(state, now),
            ),
        )
        moves: dict[str, list[Move]] = defaultdict(list)
        for move in the_plan.moves:
            moves[move.for_pod.key].append(move)
        for placement in the_plan.placements:
            if placement.reason is PlacementReason.RELOCATION and placement.node is not None:
                self._begin(state, placement, moves[placement.pod.key], now)

    def _cooling(self, state: ClusterState, now: float) -> frozenset[str]:
        """Pods that a relocation brought up (its replacements) stay put for the cooldown: the pods of a
        moved workload created since makeroom moved it."""
        for workload, when in list(self._moved_workloads.items()):
            if now - when >= self.config.cooldown:
                del self._moved_workloads[workload]
        return frozenset(
            p.key
            for p in state.pods.values()
            if p.workload in self._moved_workloads and p.created_at >= self._moved_workloads[p.workload]
        )

    def _begin(self, state: ClusterState, placement: Placement, moves: list[Move], now: float) -> None:
        pod = placement.pod
        assert placement.node is not None
        surge: dict[str, int] = defaultdict(int)
        if self.config.strategy == "migrate":
            for move in moves:
                w = state.workloads.get(move.workload) if move.workload is not None else None
                if move.workload is not None and w is not None and w.replicas_owner is None:
                    surge[move.workload] += 1
        record = Relocation(
            strategy=self.config.strategy,
            node=placement.node,
            started=now,
            deadline=now + self.config.timeout,
            victims=[Victim(m.pod.key, m.workload, m.from_node) for m in moves],
            since=now,
            surge=dict(surge),
        )
        # The record goes first: it is what a fresh controller finds to resume or roll back.
        self._act(lambda: self.cluster.annotate_pod(pod.key, {RELOCATION: record.to_json()}))
        self._expected[pod.key] = now
        self.report.started.append(pod.name)
        self._event(
            "Pod",
            pod.key,
            "Relocating",
            f"making room on {placement.node} by moving {len(moves)} pod(s) with {record.strategy}: "
            + ", ".join(m.pod.name for m in moves),
        )
        log.info(
            "relocation started",
            extra={
                "pod": pod.key,
                "node": placement.node,
                "victims": len(moves),
                "strategy": record.strategy,
            },
        )
        self._advance(state, pod, record, now)

    # --- advancing -----------------------------------------------------------------------------
    def _advance(self, state: ClusterState, pod: Pod, record: Relocation | None, now: float) -> None:
        if record is None:
            self._roll_back(state, pod, None, "its relocation record is unreadable", now)
            return
        if pod.node is not None:
            self._release(state, pod, record, now)
            return
        problem = self._changed(state, pod, record, now)
        if problem is not None:
            self._roll_back(state, pod, record, problem, now)
            return
        self._hold(pod, record, now)
        if record.strategy == "migrate" and record.phase == Phase.HOLDING:
            if not self._surge(state, pod, record):
                return
            record.phase, record.since = Phase.DRAINING, now
            self._act(lambda: self.cluster.annotate_pod(pod.key, {RELOCATION: record.to_json()}))
        if record.strategy == "migrate":
            self._shrink(state, record)
            if now - record.since < 2 * self.config.interval:
                return  # the ReplicaSets remove the victims; evict only those they left behind
        self._evict_victims(state, pod, record, now)

    def _changed(self, state: ClusterState, pod: Pod, record: Relocation, now: float) -> str | None:
        """Why the plan no longer holds, if it does not."""
        if now > record.deadline:
            return f"it was not bound within {self.config.timeout:g}s"
        node = state.nodes.get(record.node)
        if node is None:
            return f"node {record.node} is gone"
        if not node.ready or node.unschedulable:
            return f"node {record.node} is no longer schedulable"
        # The room the pod needs, once the victims are gone, must still be there.
        slot = state.slot_of[record.node]
        room = state.alloc[slot] - state.used[slot]
        victims = {v.pod for v in record.victims}
        for other in state.pods_on[record.node].values():
            if other.key in victims or (other.terminating and other.priority < pod.priority):
                room = room + state.requests_of(other.spec)
        for other in state.nominated.get(record.node, {}).values():
            if other is not pod and other.priority >= pod.priority:
                room = room - state.requests_of(other.spec)
        if (room < state.requests_of(pod.spec)).any():
            return f"the room on {record.node} was taken by other pods"
        return None

    def _hold(self, pod: Pod, record: Relocation, now: float) -> None:
        """Keep the room: nominate the pod to the node (the scheduler holds room for it against
        lower-priority pods; the autoscaler skips pods nominated to an existing node), and hold the
        autoscaler off with pod-scale-up-delay should the nomination be cleared."""
        if pod.nominated_node != record.node:
            self._act(lambda: self.cluster.nominate(pod.key, record.node))
        if SCALE_UP_DELAY not in pod.annotations:
            delay = math.ceil(record.deadline - pod.created_at)
            self._act(lambda: self.cluster.annotate_pod(pod.key, {SCALE_UP_DELAY: f"{delay}s"}))

    def _surge(self, state: ClusterState, pod: Pod, record: Relocation) -> bool:
        """migrate: scale each victim's workload up by its victims, lowest deletion cost on the
        victims; True once every replacement is Ready."""
        victims = {v.pod for v in record.victims}
        ready = True
        for workload, extra in record.surge.items():
            w = state.workloads.get(workload)
            if w is None:
                continue
            surge = Surge.from_json(w.annotations[SURGE]) if SURGE in w.annotations else None
            others_ready = sum(
                1
                for p in state.pods.values()
                if p.workload == workload and p.ready and not p.terminating and p.key not in victims
            )
            if surge is None:
                surge = Surge(base=w.replicas, by=extra, for_pod=pod.key, need_ready=others_ready + extra)
                self._act(
                    lambda wl=workload, s=surge: self.cluster.annotate_workload(wl, {SURGE: s.to_json()})
                )
            for v in record.victims:
                if v.workload == workload:
                    self._mark_victim(state, v, pod, lowest_cost=True)
            if w.replicas != surge.base + surge.by:
                self._act(lambda wl=workload, n=surge.base + surge.by: self.cluster.scale(wl, n))
            ready = ready and others_ready >= surge.need_ready
        return ready

    def _shrink(self, state: ClusterState, record: Relocation) -> None:
        """migrate, once the replacements are Ready: back to the replicas wanted; the ReplicaSet
        removes the victims first, for their deletion cost is the lowest."""
        for workload in record.surge:
            w = state.workloads.get(workload)
            if w is None or SURGE not in w.annotations:
                continue
            surge = Surge.from_json(w.annotations[SURGE])
            if surge is not None and w.replicas == surge.base + surge.by:
                self._act(lambda wl=workload, n=surge.base: self.cluster.scale(wl, n))
            self._act(lambda wl=workload: self.cluster.annotate_workload(wl, {SURGE: None}))

    def _mark_victim(self, state: ClusterState, victim: Victim, pod: Pod, lowest_cost: bool) -> None:
        p = state.pods.get(victim.pod)
        if p is None or p.terminating or p.annotations.get(VICTIM_OF) == pod.key:
            return
        changes: dict[str, str | None] = {VICTIM_OF: pod.key}
        if lowest_cost:
            changes[DELETION_COST] = VICTIM_DELETION_COST
            if DELETION_COST in p.annotations:
                changes[PRIOR_DELETION_COST] = p.annotations[DELETION_COST]
        self._act(lambda: self.cluster.annotate_pod(victim.pod, changes))
        self._event("Pod", victim.pod, "Moving", f"moving to make room for {pod.name} on {victim.node}")

    def _evict_victims(self, state: ClusterState, pod: Pod, record: Relocation, now: float) -> None:
        for victim in record.victims:
            p = state.pods.get(victim.pod)
            if p is None or p.terminating or p.node != victim.node or self._waiting(victim.pod, now):
                continue
            if record.strategy == "evict":
                self._mark_victim(state, victim, pod, lowest_cost=False)
            try:
                self._act(lambda v=victim.pod: self.cluster.evict(v))
            except EvictionBlockedError:
                retry = self._retry.get(victim.pod)
                attempts = retry.attempts + 1 if retry else 1
                wait = min(self.config.max_backoff, self.config.backoff * 2 ** (attempts - 1))
                self._retry[victim.pod] = Retry(now + wait, attempts)
                log.info(
                    "eviction refused by its budget; retrying", extra={"pod": victim.pod, "wait_s": wait}
                )
                continue
            except NotFoundError:
                continue
            self._retry.pop(victim.pod, None)
            self._event("Pod", victim.pod, "Evicted", f"evicted to make room for {pod.name}")
            if victim.workload is not None:
                self._moved_workloads[victim.workload] = now

    # --- ending --------------------------------------------------------------------------------
    def _release(self, state: ClusterState, pod: Pod, record: Relocation, now: float) -> None:
        self._clean_victims(state, record)
        for workload in record.surge:
            self._moved_workloads[workload] = record.started
            self._undo_surge(state, workload)
        if pod.nominated_node is not None:
            self._act(lambda: self.cluster.nominate(pod.key, None))
        self._act(lambda: self.cluster.annotate_pod(pod.key, {RELOCATION: None, SCALE_UP_DELAY: None}))
        self.report.done.append(pod.name)
        self._event("Pod", pod.key, "RoomMade", f"bound to {pod.node} after {now - record.started:.0f}s")
        log.info("relocation done", extra={"pod": pod.key, "node": pod.node, "seconds": now - record.started})

    def _roll_back(
        self, state: ClusterState, pod: Pod, record: Relocation | None, why: str, now: float
    ) -> None:
        if record is not None:
            self._clean_victims(state, record)
            for workload in record.surge:
                self._undo_surge(state, workload)
        if pod.nominated_node is not None and pod.node is None:
            self._act(lambda: self.cluster.nominate(pod.key, None))
        self._act(lambda: self.cluster.annotate_pod(pod.key, {RELOCATION: None, SCALE_UP_DELAY: None}))
        retry = self._retry.get(pod.key)
        attempts = retry.attempts + 1 if retry else 1
        self._retry[pod.key] = Retry(
            now + min(self.config.max_backoff, self.config.backoff * 2**attempts), attempts
        )
        self.report.rolled_back.append(pod.name)
        self._event("Pod", pod.key, "RelocationRolledBack", f"rolled back: {why}")
        log.warning("relocation rolled back", extra={"pod": pod.key, "reason": why})

    def _clean_victims(self, state: ClusterState, record: Relocation) -> None:
        for victim in record.victims:
            p = state.pods.get(victim.pod)
            if p is not None and not p.terminating:
                self._unmark(p)

    def _unmark(self, p: Pod) -> None:
        changes: dict[str, str | None] = {}
        if VICTIM_OF in p.annotations:
            changes[VICTIM_OF] = None
        if p.annotations.get(DELETION_COST) == VICTIM_DELETION_COST:
            changes[DELETION_COST] = p.annotations.get(PRIOR_DELETION_COST)
            changes[PRIOR_DELETION_COST] = None
        if changes:
            self._act(lambda: self.cluster.annotate_pod(p.key, changes))

    def _undo_surge(self, state: ClusterState, workload: str) -> None:
        w = state.workloads.get(workload)
        if w is None or SURGE not in w.annotations:
            return
        surge = Surge.from_json(w.annotations[SURGE])
        if surge is not None and w.replicas == surge.base + surge.by:
            self._act(lambda: self.cluster.scale(workload, surge.base))
        self._act(lambda: self.cluster.annotate_workload(workload, {SURGE: None}))

    def _collect_orphans(self, state: ClusterState) -> None:
        """What a controller that died between two actions left without a record: undo it."""
        live = {p.key for p, _ in self._active(state)}
        for name, w in state.workloads.items():
            surge = Surge.from_json(w.annotations[SURGE]) if SURGE in w.annotations else None
            if SURGE in w.annotations and (surge is None or surge.for_pod not in live):
                self._undo_surge(state, name)
        for p in state.pods.values():
            owner = p.annotations.get(VICTIM_OF)
            if owner is not None and owner not in live and not p.terminating:
                self._unmark(p)

    # --- plumbing ------------------------------------------------------------------------------
    def _act(self, action: object) -> None:
        assert callable(action)
        action()
        self.report.actions += 1

    def _event(self, kind: str, key: str, reason: str, message: str) -> None:
        try:
            self.cluster.emit_event(kind, key, reason, message)
        except ClusterError as exc:  # an event is worth a log line, never a failed step
            log.warning("event not recorded", extra={"object": key, "error": str(exc)})
