"""Relocation: make room on a node for a pending pod by moving lower-priority pods elsewhere.

The record on the pending pod (``makeroom.io/relocation``) is written before anything else and
removed last; every other step is decided from what the cluster shows, so a fresh controller resumes
or rolls back what a dead one started.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict

from makeroom.controller.records import RELOCATION, Phase, Relocation, Victim
from makeroom.controller.steps import Steps
from makeroom.model import SCALE_UP_DELAY, VICTIM_OF, Pod
from makeroom.model.state import ClusterState
from makeroom.planner import Move, Placement, PlacementReason, Policy, plan

log = logging.getLogger("makeroom.controller")


class Relocations:
    def __init__(self, steps: Steps) -> None:
        self.s = steps

    @staticmethod
    def scan(state: ClusterState) -> tuple[list[tuple[Pod, Relocation | None]], list[Pod]]:
        """One pass over the pods: the relocations recorded on pending pods, and the pods marked to
        leave (most pods carry no annotation at all, which keeps this cheap at 150,000 pods)."""
        records: list[tuple[Pod, Relocation | None]] = []
        marked: list[Pod] = []
        for pod in state.pods.values():
            annotations = pod.annotations
            if not annotations:
                continue
            text = annotations.get(RELOCATION)
            if text is not None:
                records.append((pod, Relocation.from_json(text)))
            if VICTIM_OF in annotations:
                marked.append(pod)
        return records, marked

    # --- starting ------------------------------------------------------------------------------
    def start(self, state: ClusterState, waiting: list[Pod], now: float) -> list[str]:
        """Plan for the pods the scheduler gave up on; start a relocation for each placement."""
        config = self.s.config
        skip = frozenset(p.key for p in state.pending() if p not in waiting or self.s.waiting(p.key, now))
        the_plan = plan(
            state,
            Policy(
                now=now,
                cooldown=config.cooldown,
                max_moves_in_flight=config.max_moves_in_flight,
                skip=skip,
                recently_moved=self.s.cooling(state, now),
                expander=config.autoscaler_expander,
            ),
        )
        moves: dict[str, list[Move]] = defaultdict(list)
        for move in the_plan.moves:
            moves[move.for_pod.key].append(move)
        started = []
        for placement in the_plan.placements:
            if placement.reason is PlacementReason.RELOCATION and placement.node is not None:
                self._begin(state, placement, moves[placement.pod.key], now)
                started.append(placement.pod.key)
        return started

    def _begin(self, state: ClusterState, placement: Placement, moves: list[Move], now: float) -> None:
        pod = placement.pod
        assert placement.node is not None
        config = self.s.config
        surge: dict[str, int] = defaultdict(int)
        if config.strategy == "migrate":
            for move in moves:
                w = state.workloads.get(move.workload) if move.workload is not None else None
                if move.workload is not None and w is not None and w.replicas_owner is None:
                    surge[move.workload] += 1
        record = Relocation(
            strategy=config.strategy,
            node=placement.node,
            started=now,
            deadline=now + config.timeout,
            victims=[Victim(m.pod.key, m.workload, m.from_node) for m in moves],
            since=now,
            surge=dict(surge),
        )
        # The record goes first: it is what a fresh controller finds to resume or roll back.
        self.s.act(self.s.cluster.annotate_pod, pod.key, {RELOCATION: record.to_json()})
        self.s.report.started.append(pod.name)
        self.s.event(
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
        self.advance(state, pod, record, now)

    # --- advancing -----------------------------------------------------------------------------
    def advance(self, state: ClusterState, pod: Pod, record: Relocation | None, now: float) -> None:
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
        self._hold(pod, record)
        if record.strategy == "migrate" and record.phase == Phase.HOLDING:
            if not self.s.surge(state, record, pod.key, pod.name):
                return
            record.phase, record.since = Phase.DRAINING, now
            text = record.to_json()
            self.s.act(self.s.cluster.annotate_pod, pod.key, {RELOCATION: text})
        if record.strategy == "migrate":
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

    def _hold(self, pod: Pod, record: Relocation) -> None:
        """Keep the room: nominate the pod to the node (the scheduler holds room for it against
        lower-priority pods; the autoscaler skips pods nominated to an existing node), and hold the
        autoscaler off with pod-scale-up-delay should the nomination be cleared."""
        if pod.nominated_node != record.node:
            self.s.act(self.s.cluster.nominate, pod.key, record.node)
        if SCALE_UP_DELAY not in pod.annotations:
            delay = math.ceil(record.deadline - pod.created_at)
            self.s.act(self.s.cluster.annotate_pod, pod.key, {SCALE_UP_DELAY: f"{delay}s"})

    # --- ending --------------------------------------------------------------------------------
    def _release(self, state: ClusterState, pod: Pod, record: Relocation, now: float) -> None:
        for workload in record.surge:
            self.s.moved_workloads[workload] = record.started
        self.s.undo_moves(state, record)
        if pod.nominated_node is not None:
            self.s.act(self.s.cluster.nominate, pod.key, None)
        self.s.act(self.s.cluster.annotate_pod, pod.key, {RELOCATION: None, SCALE_UP_DELAY: None})
        self.s.report.done.append(pod.name)
        self.s.event("Pod", pod.key, "RoomMade", f"bound to {pod.node} after {now - record.started:.0f}s")
        log.info("relocation done", extra={"pod": pod.key, "node": pod.node, "seconds": now - record.started})

    def _roll_back(
        self, state: ClusterState, pod: Pod, record: Relocation | None, why: str, now: float
    ) -> None:
        if record is not None:
            self.s.undo_moves(state, record)
        if pod.nominated_node is not None and pod.node is None:
            self.s.act(self.s.cluster.nominate, pod.key, None)
        self.s.act(self.s.cluster.annotate_pod, pod.key, {RELOCATION: None, SCALE_UP_DELAY: None})
        self.s.back_off(pod.key, now)
        self.s.report.rolled_back.append(pod.name)
        self.s.event("Pod", pod.key, "RelocationRolledBack", f"rolled back: {why}")
        log.warning("relocation rolled back", extra={"pod": pod.key, "reason": why})
