"""``plan(state, policy) -> Plan``: the pending pods to plan for, the search that decides, and the plan
with its explanations.

Every search answers the same question behind one interface (``Search``): given the read-only context
and the pending pods, highest priority first, a draft of decisions. ``commit.render`` turns any draft
into the Plan users see.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from makeroom.model import Pod
from makeroom.model.state import ClusterState
from makeroom.model.view import ClusterView
from makeroom.planner.budgets import Budgets
from makeroom.planner.commit import render
from makeroom.planner.context import Context
from makeroom.planner.exact import ExactPerPod
from makeroom.planner.heuristic import Heuristic
from makeroom.planner.options import Draft
from makeroom.planner.sequential import Sequential
from makeroom.planner.types import Plan, Policy


class Search(Protocol):
    name: str

    def run(self, ctx: Context, pods: list[Pod]) -> Draft: ...


def choose(policy: Policy) -> Search:
    return Sequential(ExactPerPod() if policy.exact else Heuristic())


def pending_pods(state: ClusterState, policy: Policy, pending: Iterable[Pod] | None) -> list[Pod]:
    """The pods to plan for, highest priority first, then oldest."""
    source = state.pending() if pending is None else pending
    pods = [p for p in source if p.node is None and not p.terminating and p.key not in policy.skip]
    pods.sort(key=lambda p: (-p.priority, p.created_at, p.seq, p.key))
    return pods


def plan(state: ClusterState, policy: Policy | None = None, pending: Iterable[Pod] | None = None) -> Plan:
    """Plan room for the pending pods (all unbound, not terminating pods by default). Pure: reads
    ``state``, never changes it; the same input gives the same plan."""
    policy = policy or Policy()
    pods = pending_pods(state, policy, pending)
    for pod in pods:
        state.requests_of(pod.spec)  # widen the resource index now, before any vector is taken
    ctx = Context(ClusterView(state), policy, Budgets.of(state))
    draft = choose(policy).run(ctx, pods)
    return render(ctx, draft, len(pods))
