"""A plan checked on paper against every rule of the spec and design.md, independently of the planner's
own bookkeeping; and the objective of issue 13, computed from the plan alone."""

from __future__ import annotations

from collections import Counter

import numpy as np

from makeroom.model import PodSpec
from makeroom.model.fit import label_fit, static_fit
from makeroom.model.state import ClusterState
from makeroom.planner import Plan, Policy, not_movable
from makeroom.planner.budgets import Budgets
from makeroom.planner.objective import of_plan


def check_feasible(state: ClusterState, result: Plan, policy: Policy) -> None:
    """Apply the plan on paper and check every rule."""
    used = state.used.copy()
    groups = state.groups
    budgets = Budgets.of(state)
    new_used: dict[tuple[str, int], np.ndarray] = {}
    moved = Counter(m.pod.key for m in result.moves)
    assert all(n == 1 for n in moved.values()), "a pod moves twice"
    pending_keys = {p.key for p in state.pending() if p.key not in policy.skip}
    where = {p.pod.key: p.node for p in result.placements}
    sources = {m.from_node for m in result.moves}
    for m in result.moves:
        v = m.pod
        assert v.key not in pending_keys
        assert v.priority < m.for_pod.priority, f"{v.name} has priority >= {m.for_pod.name}'s"
        assert not_movable(v, policy, budgets) is None, f"{v.name} is protected"
        assert v.node == m.from_node
        assert where.get(m.for_pod.key) == m.from_node, f"{v.name} leaves a node its pod does not take"
        r = state.requests_of(v.spec)
        used[state.slot_of[m.from_node]] -= r
        if m.to_node is not None:
            assert m.to_node != m.from_node
            assert m.to_node not in sources, f"{v.name} goes to {m.to_node}, which pods leave"
            node = state.nodes[m.to_node]
            if node.ready:
                assert static_fit(v.spec, node) is None
            else:
                assert not node.unschedulable and label_fit(v.spec, node.labels, node.taints) is None
            used[state.slot_of[m.to_node]] += r
        else:
            g = groups[m.to_new_node_group or ""]
            assert label_fit(v.spec, g.node_labels(), g.taints) is None
            pspec = m.for_pod.spec
            p_could = label_fit(pspec, g.node_labels(), g.taints) is None and PodSpec.effective(
                pspec.requests
            ).fits_in(g.capacity)
            assert not p_could, f"{v.name} takes a new node of {g.name}, which {m.for_pod.name} could use"
            assert m.new_node_index is not None
            key = (g.name, m.new_node_index)
            new_used[key] = new_used.get(key, np.zeros_like(r)) + r
    touched = set()
    for p in result.placements:
        r = state.requests_of(p.pod.spec)
        if p.node is not None:
            node = state.nodes[p.node]
            if node.ready:
                assert static_fit(p.pod.spec, node) is None
            else:
                assert label_fit(p.pod.spec, node.labels, node.taints) is None
            used[state.slot_of[p.node]] += r
            touched.add(state.slot_of[p.node])
        else:
            assert p.new_node_group is not None and p.new_node_index is not None
            key = (p.new_node_group, p.new_node_index)
            new_used[key] = new_used.get(key, np.zeros_like(r)) + r
    for m in result.moves:
        if m.to_node is not None:
            touched.add(state.slot_of[m.to_node])
    # a node that takes a pod ends within its allocatable, after what other nominated pods hold
    held = np.zeros_like(used)
    for node_name, nominated in state.nominated.items():
        for other in nominated.values():
            if other.node is None and not other.terminating and other.key not in pending_keys:
                held[state.slot_of[node_name]] += state.requests_of(other.spec)
    for slot in touched:
        assert np.all(used[slot] + held[slot] <= state.alloc[slot]), "a node ends over its allocatable"
    for (group, _), vec in new_used.items():
        cap = state.index.vector(groups[group].capacity)
        assert np.all(vec <= cap), f"a new {group} node is over capacity"
    for group, n in result.scale_ups.items():
        assert len(state.nodes_of(group)) + n <= groups[group].max, f"{group} over its max"
    assert sum(result.scale_ups.values()) == len(set(new_used))
    placed = {p.pod.key for p in result.placements} | {u.pod.key for u in result.unplaceable}
    assert placed == pending_keys
    opt = result.optimality
    if opt is not None:
        assert opt.objective.key() == of_plan(state, result).key(), "the plan's objective is misreported"
        assert opt.bound.key() <= opt.objective.key(), "the bound is above the plan"


def objective(state: ClusterState, result: Plan) -> tuple[object, ...]:
    """Issue 13's objective: pods placed by priority, new-node cost and count, moves, moved priority."""
    return of_plan(state, result).key()
