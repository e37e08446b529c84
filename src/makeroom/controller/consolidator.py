"""Consolidation: empty a costly node, make-before-break, so that the autoscaler removes it.

The record (a ``Consolidation`` in makeroom's own store, by node) is the anchor, as a relocation's
is for its pod. The node is tainted ``makeroom.io/consolidating:NoSchedule`` first, so that no replacement can
land back on it; the taint stays until the autoscaler removes the empty node (and goes with it), or
until makeroom gives up and removes it.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from makeroom.controller.policy import consolidation_policy
from makeroom.controller.reasons import ObjectKind, Reason
from makeroom.controller.records import CONSOLIDATING_TAINT, Consolidation, Phase, RecordKind, Records, Victim
from makeroom.controller.steps import Retry, RetryKey, Steps, node_anchor
from makeroom.controller.validate import Action, Live, RefusedError
from makeroom.model import Node, OwnerKind, Pod, Taint, TaintEffect
from makeroom.model.fit import label_fit
from makeroom.model.state import ClusterState
from makeroom.model.view import ClusterView
from makeroom.planner.consolidate import answer_key, consolidate

log = logging.getLogger("makeroom.controller")

TAINT = Taint(CONSOLIDATING_TAINT, "", TaintEffect.NO_SCHEDULE)


class Consolidations:
    def __init__(self, steps: Steps) -> None:
        self.s = steps
        self._moves: list[tuple[float, int]] = []  # (when, moves): the budget per window
        # The last search that found nothing: its state object and answer_key. Searched again only
        # once either differs (a quiet cluster is not searched on every round).
        self._fruitless: tuple[ClusterState, tuple[object, ...]] | None = None

    @staticmethod
    def active(state: ClusterState, records: Records) -> list[tuple[str, Node | None, Consolidation | None]]:
        """The consolidations in the store with their nodes (in the nodes' order; a record whose node is
        gone last)."""
        recorded = records.consolidations
        out: list[tuple[str, Node | None, Consolidation | None]] = [
            (node.name, node, recorded[node.name]) for node in state.nodes.values() if node.name in recorded
        ]
        out.extend((name, None, record) for name, record in recorded.items() if name not in state.nodes)
        return out

    def budget_left(self, now: float) -> int:
        window = self.s.config.consolidation.window
        self._moves = [(t, n) for t, n in self._moves if now - t < window]
        return self.s.config.consolidation.max_moves - sum(n for _, n in self._moves)

    def start(self, live: Live, records: Records) -> str | None:
        state, now = live.state, live.now
        config = self.s.config
        budget = self.budget_left(now)
        if budget <= 0:
            return None
        policy = consolidation_policy(
            config,
            now,
            budget=budget,
            recently_moved=self.s.cooling(state, records, now),
            skip_nodes=self.s.skipped_nodes(state, now),
            pinned=self.s.pinned(state, records, live.namespaces),
        )
        key = answer_key(state, policy)
        if self._fruitless is not None and self._fruitless[0] is state and self._fruitless[1] == key:
            return None
        started_at = time.perf_counter()  # a measurement for metrics, never an input to a decision
        found = consolidate(state, policy)
        self.s.report.consolidation_plan_seconds = time.perf_counter() - started_at
        self._fruitless = (state, key) if found is None else None
        if found is None:
            return None
        node = found.node
        victims = [Victim(s.pod.key, s.workload, node) for s in found.shifts]
        record = Consolidation(
            node=node,
            started=now,
            deadline=now + config.timeout,
            victims=victims,
            since=now,
            surge=self.s.plan_surges(state, victims, self.s.scalable(state, victims)),
            why=found.why(),
        )
        self.s.save(record)
        self._moves.append((now, len(found.shifts)))
        self.s.report.consolidating.append(node)
        self.s.event(ObjectKind.NODE, node, Reason.CONSOLIDATING, found.why())
        log.info("consolidation started", extra={"node": node, "saving_per_hour": found.saving_per_hour})
        self.advance(state, node, state.nodes[node], record, now, [])
        return node

    def advance(
        self,
        state: ClusterState,
        name: str,
        node: Node | None,
        record: Consolidation | None,
        now: float,
        waiting: list[Pod],
    ) -> None:
        if record is None:
            self.give_up(state, name, node, None, "its record is unreadable", now)
            return
        if node is None:
            self.give_up(state, name, None, record, f"node {name} is gone", now)
            return
        problem = self._changed(state, node, record, now, waiting)
        if problem is not None:
            self.give_up(state, name, node, record, problem, now)
            return
        try:
            self.s.validator.record(record)
            self._carry_on(state, node, record, now)
        except RefusedError as refused:
            self.give_up(state, name, node, record, f"refused: {refused}", now)

    def _carry_on(self, state: ClusterState, node: Node, record: Consolidation, now: float) -> None:
        anchor = node_anchor(node.name)
        label = f"the removal of {node.name}"
        if all(t.key != CONSOLIDATING_TAINT for t in node.taints):
            self.s.gated(Action.TAINT, record, node.name, self.s.cluster.taint_node, node.name, TAINT)
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
        self.s.save(record)

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

    def give_up(
        self,
        state: ClusterState,
        name: str,
        node: Node | None,
        record: Consolidation | None,
        why: str,
        now: float,
    ) -> None:
        if record is not None:
            self.s.undo_moves(state, record)
        if node is not None and any(t.key == CONSOLIDATING_TAINT for t in node.taints):
            self.s.act(self.s.cluster.untaint_node, name, CONSOLIDATING_TAINT)
        self.s.act(self.s.cluster.delete_record, RecordKind.CONSOLIDATION, name)
        self.s.retry[RetryKey.skipped_node(name)] = Retry(now + self.s.config.cooldown, 1)
        self.s.report.consolidation_stopped.append(name)
        if node is not None:
            self.s.event(ObjectKind.NODE, name, Reason.CONSOLIDATION_STOPPED, f"stopped: {why}")
        log.info("consolidation stopped", extra={"node": name, "reason": why})

    def collect_orphans(self, state: ClusterState, consolidated: set[str]) -> None:
        """A consolidation taint of a node with no consolidation (a controller died in between):
        remove it."""
        for node in state.nodes.values():
            if (
                node.taints
                and node.name not in consolidated
                and any(t.key == CONSOLIDATING_TAINT for t in node.taints)
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
