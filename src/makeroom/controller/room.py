"""Whether pods about to be created (a surge's replacements, an evicted pod's) will find room, counting
the room that pods already waiting will take first.

The planner claimed room for its moves when it planned; by the time a relocation surges or evicts,
other pods may be waiting for that room: replacements of an earlier eviction or surge that the
scheduler has not placed yet, pods of other workloads. The scheduler serves them before the new pods
(higher priority first, then the oldest), so the room they will take is counted as taken here: the
waiting pods are placed first, first fit, on the nodes that admit them (or on a new node of a group
that admits them and may grow, as the autoscaler would add), and only what is left counts as somewhere
to go. Nominated pods hold their room already (the scheduler keeps it for them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from makeroom.model import Node, Pod, PodSpec, Taint
from makeroom.model.fit import label_fit
from makeroom.model.resources import Vector
from makeroom.model.state import ClusterState
from makeroom.model.view import NODE_CONDITION_TAINTS, ClusterView

"""Taints the control plane puts on a node that is not Ready yet; a node coming up sheds them."""


def _taints(node: Node) -> tuple[Taint, ...]:
    """The taints a pod will meet on the node once it is Ready."""
    if node.ready:
        return node.taints
    return tuple(t for t in node.taints if t.key not in NODE_CONDITION_TAINTS)


@dataclass(slots=True)
class _NewNode:
    group: str
    room: Vector


@dataclass(slots=True)
class Room:
    """The room left for pods of priority ``priority`` once the pods waiting before them are placed.
    ``claim`` places one more pod (and keeps its room taken for the next)."""

    state: ClusterState
    priority: int
    skip: frozenset[str] = frozenset()
    """Pending pods that claim no room first (those being asked about). A nominated pod's hold is
    always counted: the scheduler keeps that room for it."""
    view: ClusterView = field(init=False)
    free: Vector = field(init=False)
    new_nodes: list[_NewNode] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        state = self.state
        self.view = ClusterView(state)
        self.free = state.free().copy()
        for slot, other in self.view.holds.values():
            if other.priority >= self.priority:
                self.free[slot] -= state.requests_of(other.spec)
        for pod in sorted(self._waiting(), key=lambda p: (-p.priority, p.created_at, p.seq)):
            self.claim(pod.spec)

    def _waiting(self) -> Iterable[Pod]:
        for pod in self.state.pending():
            if pod.key in self.skip or pod.nominated_node is not None:
                continue
            if pod.priority >= self.priority:
                yield pod

    def claim(self, spec: PodSpec, not_node: str | None = None, not_group: str | None = None) -> bool:
        """Place a pod of ``spec``: on an existing node other than ``not_node`` with room left, else on
        a new node (one already counted, or one more) of a group other than ``not_group`` that admits
        it and may grow. False when it has nowhere to go."""
        state = self.state
        req = state.requests_of(spec)
        fits = np.all(self.free >= req, axis=1) & state.alive
        others = self.view.others(spec)  # inter-pod (anti-)affinity, spreading, host ports
        if others is not None:
            fits &= others
        for slot in np.flatnonzero(fits):
            node = state.node_at[int(slot)]
            if node is None or node.name == not_node or node.unschedulable:
                continue
            if label_fit(spec, node.labels, _taints(node)) is None:
                self.free[slot] -= req
                return True
        for new in self.new_nodes:
            if new.group != not_group and self.view.admits(spec, new.group) and bool(np.all(new.room >= req)):
                new.room = new.room - req
                return True
        for group in state.groups:
            if group == not_group or not self.view.admits(spec, group):
                continue
            added = sum(1 for n in self.new_nodes if n.group == group)
            if self.view.can_grow(group, added):
                self.new_nodes.append(_NewNode(group, self.view.template(group) - req))
                return True
        return False


def somewhere_to_go(
    state: ClusterState,
    pods: Iterable[Pod],
    *,
    not_node: str | None = None,
    not_group: str | None = None,
    skip: Iterable[str] = (),
) -> Pod | None:
    """The first of ``pods`` (each about to be replaced by a new pod of its spec) whose replacement
    would find no room once the waiting pods and the replacements before it are placed; None when
    all of them find some."""
    pods = list(pods)
    if not pods:
        return None
    room = Room(state, min(p.priority for p in pods), frozenset(skip))
    for pod in pods:
        if not room.claim(pod.spec, not_node, not_group):
            return pod
    return None
