"""A plan checked on paper against every rule of the spec and design.md, independently of the planner's
own bookkeeping; and the objective of issue 13, computed from the plan alone.

Where a pod may go is judged by the independent checker (tests/kubecheck: kube-scheduler's Filter
plugins written again over the objects the state stands for), never by makeroom's own fit rules. The
plan is carried out on those objects step by step in the controller's order: pending pod by pending
pod, each of its victims' replacements to its destination (the victim still on its node under
make-before-break, gone under evict), then the pending pod to its node; each step must pass every
filter but NodeResourcesFit (the pods of a joint plan make room for each other: a pod whose room is
still to come waits, it is not refused for good). At the end, every pod that moved or was placed must
pass every filter where it is, resources included, as if it were the last to be scheduled
(replacements are scheduled in whatever order the scheduler takes them).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from makeroom.model import Pod
from makeroom.model.state import ClusterState
from makeroom.planner import Plan, Policy, not_movable
from makeroom.planner.budgets import Budgets
from makeroom.planner.objective import of_plan
from tests.kubecheck import Cluster, feasible_nodes
from tests.kubecheck.check import node_filters
from tests.kubecheck.from_state import new_node_name, objects_of, of_new_node, pod_object
from tests.kubecheck.node_filters import bound_volumes

Obj = dict[str, Any]


def check_feasible(state: ClusterState, result: Plan, policy: Policy) -> None:
    """Apply the plan on paper and check every rule."""
    budgets = Budgets.of(state)
    paper = Cluster.of(objects_of(state))
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
        if m.to_node is not None:
            assert m.to_node != m.from_node
            assert m.to_node not in sources, f"{v.name} goes to {m.to_node}, which pods leave"
            assert m.to_node in state.nodes
        else:
            g = state.groups[m.to_new_node_group or ""]
            assert m.new_node_index is not None
            # design.md: a destination in the group the pending pod needs is never taken.
            pod = pod_object(m.for_pod, None)
            volumes, _ = bound_volumes(pod, paper)
            why_not = node_filters(pod, of_new_node(g, m.new_node_index), [], volumes)
            assert why_not is not None, (
                f"{v.name} takes a new node of {g.name}, which {m.for_pod.name} could use"
            )
    for p in result.placements:
        if p.node is None:
            assert p.new_node_group is not None and p.new_node_index is not None
    for group, n in result.scale_ups.items():
        assert len(state.nodes_of(group)) + n <= state.groups[group].max, f"{group} over its max"
    new_nodes = {(m.to_new_node_group, m.new_node_index) for m in result.moves if m.to_new_node_group} | {
        (p.new_node_group, p.new_node_index) for p in result.placements if p.new_node_group
    }
    assert sum(result.scale_ups.values()) == len(new_nodes)
    placed = {p.pod.key for p in result.placements} | {u.pod.key for u in result.unplaceable}
    assert placed == pending_keys
    check_steps(state, result, policy)
    opt = result.optimality
    if opt is not None:
        assert opt.objective.key() == of_plan(state, result).key(), "the plan's objective is misreported"
        assert opt.bound.key() <= opt.objective.key(), "the bound is above the plan"


def _destination(group: str | None, index: int | None, node: str | None) -> str:
    if node is not None:
        return node
    assert group is not None and index is not None
    return new_node_name(group, index)


class _Paper:
    """The cluster's objects as the plan changes them."""

    def __init__(self, state: ClusterState, result: Plan) -> None:
        self.objects: dict[str, Obj] = {}
        for obj in objects_of(state):
            meta = obj["metadata"]
            self.objects[f"{obj['kind']}/{meta.get('namespace', '')}/{meta['name']}"] = obj
        for m in result.moves:
            if m.to_new_node_group is not None and m.new_node_index is not None:
                self._add(of_new_node(state.groups[m.to_new_node_group], m.new_node_index))
        for p in result.placements:
            if p.new_node_group is not None and p.new_node_index is not None:
                self._add(of_new_node(state.groups[p.new_node_group], p.new_node_index))

    def _add(self, obj: Obj) -> None:
        self.objects[f"Node//{obj['metadata']['name']}"] = obj

    def put(self, pod: Pod, node: str | None, key: str | None = None) -> None:
        """The pod (or, under another key, its replacement) bound to `node`; None takes it away."""
        key = key or f"Pod/{pod.namespace}/{pod.name}"
        if node is None:
            self.objects.pop(key, None)
        else:
            obj = pod_object(pod, node)
            obj["metadata"]["name"] = key.rsplit("/", 1)[1]
            self.objects[key] = obj

    def refusal(self, pod: Pod, node: str, key: str | None = None, resources: bool = True) -> str | None:
        """Why the pod (or its replacement) may not go to `node` now; None when it may."""
        probe = pod_object(pod, None)
        probe["status"] = {}  # a pod being placed holds no nomination of its own
        if key is not None:
            probe["metadata"]["name"] = key.rsplit("/", 1)[1]
        verdicts = feasible_nodes(Cluster.of(self.objects.values()), probe, resources=resources)
        assert node in verdicts, f"{node} is no node of the cluster"
        return verdicts[node]


def check_steps(state: ClusterState, result: Plan, policy: Policy) -> None:
    paper = _Paper(state, result)
    for p in result.placements:  # the pods being placed hold their room by the plan, not a nomination
        if p.node is not None or p.new_node_group is not None:
            paper.put(p.pod, None)
    done: list[tuple[Pod, str, str]] = []  # (pod, node, key) of every pod placed by the plan
    for p in result.placements:
        moves = result.moves_for(p.pod)
        for m in moves:
            replacement = f"Pod/{m.pod.namespace}/{m.pod.name}-replacement"
            if not policy.make_before_break:
                paper.put(m.pod, None)
            to = _destination(m.to_new_node_group, m.new_node_index, m.to_node)
            why = paper.refusal(m.pod, to, replacement, resources=False)
            assert why is None, f"{m.pod.name}'s replacement may not go to {to} (for {p.pod.name}): {why}"
            paper.put(m.pod, to, replacement)
            done.append((m.pod, to, replacement))
        for m in moves:
            paper.put(m.pod, None)
        if p.node is None and p.new_node_group is None:
            continue
        to = _destination(p.new_node_group, p.new_node_index, p.node)
        why = paper.refusal(p.pod, to, resources=False)
        assert why is None, f"{p.pod.name} may not go to {to}: {why}"
        paper.put(p.pod, to)
        done.append((p.pod, to, f"Pod/{p.pod.namespace}/{p.pod.name}"))
    for pod, node, key in done:
        paper.put(pod, None, key)
        why = paper.refusal(pod, node, key)
        assert why is None, f"with the plan done, {key.rsplit('/', 1)[1]} may not be on {node} again: {why}"
        paper.put(pod, node, key)


def objective(state: ClusterState, result: Plan) -> tuple[object, ...]:
    """Issue 13's objective: pods placed by priority, new-node cost and count, moves, moved priority."""
    return of_plan(state, result).key()
