"""Consolidation: empty a costly node, make-before-break, so that the autoscaler removes it.

The record (``makeroom.io/consolidation`` on the node) is the anchor, as a relocation's is on its
pod. The node is tainted ``makeroom.io/consolidating:NoSchedule`` first, so that no replacement can
land back on it; the taint stays until the autoscaler removes the empty node (and goes with it), or
until makeroom gives up and removes it.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict

import numpy as np

from makeroom.controller.reasons import ObjectKind, Reason
from makeroom.controller.records import CONSOLIDATING_TAINT, CONSOLIDATION, Consolidation, Phase, Victim
from makeroom.controller.steps import Retry, RetryKey, Steps, node_anchor
from makeroom.model import Node, OwnerKind, Pod, Taint, TaintEffect
from makeroom.model.fit import label_fit
from makeroom.model.state import ClusterState
from makeroom.model.view import ClusterView
from makeroom.planner.consolidate import ConsolidationPolicy, consolidate

log = logging.getLogger("makeroom.controller")

TAINT = Taint(CONSOLIDATING_TAINT, "", TaintEffect.NO_SCHEDULE)


class Consolidations:
    def __init__(self, steps: Steps) -> None:
        self.s = steps
        self._moves: list[tuple[float, int]] = []  # (when, moves): the budget per window

    def active(self, state: ClusterState) -> list[tuple[Node, Consolidation | None]]:
        out = []
        for node in state.nodes.values():
            text = node.annotations.get(CONSOLIDATION)
            if text is not None:
                out.append((node, Consolidation.from_json(text)))
        return out

    def budget_left(self, now: float) -> int:
        window = self.s.config.consolidation.window
        self._moves = [(t, n) for t, n in self._moves if now - t < window]
        return self.s.config.consolidation.max_moves - sum(n for _, n in self._moves)

    def start(self, state: ClusterState, now: float) -> str | None:
        config = self.s.config
        budget = self.budget_left(now)
        if budget <= 0:
            return None
        started_at = time.perf_counter()  # a measurement for metrics, never an input to a decision
        found = consolidate(
            state,
            ConsolidationPolicy(
                now=now,
                cooldown=config.cooldown,
                recently_moved=self.s.cooling(state, now),
                max_moves=budget,
                min_saving=config.consolidation.min_saving,
                skip_nodes=frozenset(n for n in state.nodes if self.s.waiting(RetryKey.skipped_node(n), now)),
            ),
        )
        self.s.report.consolidation_plan_seconds = time.perf_counter() - started_at
        if found is None:
            return None
        surge: dict[str, int] = defaultdict(int)
        for shift in found.shifts:
            if shift.workload is not None:
                surge[shift.workload] += 1
        node = found.node
        record = Consolidation(
            node=node,
            started=now,
            deadline=now + config.timeout,
            victims=[Victim(s.pod.key, s.workload, node) for s in found.shifts],
            since=now,
            surge=dict(surge),
        )
        self.s.act(self.s.cluster.annotate_node, node, {CONSOLIDATION: record.to_json()})
        self._moves.append((now, len(found.shifts)))
        self.s.report.consolidating.append(node)
        self.s.event(ObjectKind.NODE, node, Reason.CONSOLIDATING, found.why())
        log.info("consolidation started", extra={"node": node, "saving_per_hour": found.saving_per_hour})
        self.advance(state, state.nodes[node], record, now, [])
        return node

    def advance(
        self, state: ClusterState, node: Node, record: Consolidation | None, now: float, waiting: list[Pod]
    ) -> None:
        anchor = node_anchor(node.name)
        label = f"the removal of {node.name}"
        if record is None:
            self._give_up(state, node, None, "its record is unreadable", now)
            return
        problem = self._changed(state, node, record, now, waiting)
        if problem is not None:
            self._give_up(state, node, record, problem, now)
            return
        if all(t.key != CONSOLIDATING_TAINT for t in node.taints):
            self.s.act(self.s.cluster.taint_node, node.name, TAINT)
        if record.phase is Phase.HOLDING:
            if not self.s.surge(state, record, anchor, label):
                return
            self._set_phase(node, record, Phase.DRAINING, now)
        if record.phase is Phase.DRAINING:
            self.s.shrink(state, record)
            if now - record.since >= 2 * self.s.config.interval:
                self.s.evict_victims(state, record, anchor, label, now)
            if not _movable_left(state, node):
                self.s.clean_victims(state, record)
                self._set_phase(node, record, Phase.EMPTY, now)
                self.s.report.consolidated.append(node.name)
                self.s.event(
                    ObjectKind.NODE,
                    node.name,
                    Reason.CONSOLIDATED,
                    f"{node.name} is empty for the autoscaler",
                )

    def _set_phase(self, node: Node, record: Consolidation, phase: Phase, now: float) -> None:
        record.phase, record.since = phase, now
        if phase is Phase.EMPTY:  # from now on the wait is the autoscaler's unneeded time
            record.deadline = now + self.s.config.consolidation.wait
        text = record.to_json()
        self.s.act(self.s.cluster.annotate_node, node.name, {CONSOLIDATION: text})

    def _changed(
        self, state: ClusterState, node: Node, record: Consolidation, now: float, waiting: list[Pod]
    ) -> str | None:
        if now > record.deadline:
            return "the node did not empty and go in time" if record.phase is Phase.EMPTY else "timed out"
        if record.phase is not Phase.EMPTY and waiting:
            # Relocation comes first: a pod the scheduler cannot place may need this node or the room
            # the consolidation's replacements are taking.
            return f"{len(waiting)} pod(s) wait to be scheduled"
        view = ClusterView(state)
        for pod in waiting:
            if _needs(view, pod, node):
                return f"pending pod {pod.name} needs {node.name}"
        return None

    def _give_up(
        self, state: ClusterState, node: Node, record: Consolidation | None, why: str, now: float
    ) -> None:
        if record is not None:
            self.s.undo_moves(state, record)
        if any(t.key == CONSOLIDATING_TAINT for t in node.taints):
            self.s.act(self.s.cluster.untaint_node, node.name, CONSOLIDATING_TAINT)
        self.s.act(self.s.cluster.annotate_node, node.name, {CONSOLIDATION: None})
        self.s.retry[RetryKey.skipped_node(node.name)] = Retry(now + self.s.config.cooldown, 1)
        self.s.report.consolidation_stopped.append(node.name)
        self.s.event(ObjectKind.NODE, node.name, Reason.CONSOLIDATION_STOPPED, f"stopped: {why}")
        log.info("consolidation stopped", extra={"node": node.name, "reason": why})

    def collect_orphans(self, state: ClusterState) -> None:
        """A consolidation taint without its record (a controller died in between): remove it."""
        for node in state.nodes.values():
            if CONSOLIDATION not in node.annotations and any(
                t.key == CONSOLIDATING_TAINT for t in node.taints
            ):
                self.s.act(self.s.cluster.untaint_node, node.name, CONSOLIDATING_TAINT)


def _needs(view: ClusterView, pod: Pod, node: Node) -> bool:
    """Whether a pending pod needs the emptied node: it may use it, and nothing cheaper can take it
    (no room on a cheaper node, no cheaper group that may grow for it). A CPU replica that merely
    tolerates a GPU node does not need it: giving the node back to it is the drift makeroom undoes."""
    if label_fit(pod.spec, node.labels, ()) is not None:
        return False
    state = view.state
    group = state.groups.get(node.group)
    price = group.price_per_hour if group is not None else 0.0
    fits = view.fits(pod.spec, view.room_for(pod))
    upcoming = view.upcoming_fit(pod.spec) & np.all(state.free() >= state.requests_of(pod.spec), axis=1)
    for other in state.nodes.values():
        cheaper = state.groups.get(other.group)
        if cheaper is None or cheaper.price_per_hour >= price:
            continue
        slot = state.slot_of[other.name]
        if fits[slot] or upcoming[slot]:
            return False  # room on a cheaper node, or the autoscaler is already bringing one up
    for g in state.groups.values():
        if g.price_per_hour < price and view.can_grow(g.name) and view.admits(pod.spec, g.name):
            return False
    return True


def _movable_left(state: ClusterState, node: Node) -> bool:
    return any(p.owner_kind != OwnerKind.DAEMON_SET for p in state.pods_on[node.name].values())
