"""``plan(state, policy) -> Plan``: the pending pods to plan for, the search that decides, and the plan
with its explanations.

Every search answers the same question behind one interface (``Search``): given the read-only context
and the pending pods, highest priority first, a draft of decisions. ``commit.render`` turns any draft
into the Plan users see.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Protocol

from makeroom.model import Pod
from makeroom.model.state import ClusterState
from makeroom.model.view import ClusterView
from makeroom.planner.bounds import bound
from makeroom.planner.budgets import Budgets
from makeroom.planner.commit import render
from makeroom.planner.constraints import check
from makeroom.planner.context import Context
from makeroom.planner.cpsat import CpSat, ExactTooLargeError
from makeroom.planner.exact import ExactPerPod
from makeroom.planner.heuristic import Heuristic
from makeroom.planner.joint import Improved
from makeroom.planner.objective import of_draft
from makeroom.planner.options import Draft
from makeroom.planner.sequential import Sequential
from makeroom.planner.types import Optimality, Plan, Policy, Proof


class Search(Protocol):
    name: str

    def run(self, ctx: Context, pods: list[Pod]) -> Draft: ...


def choose(policy: Policy) -> Search:
    if policy.exact:
        return ExactJoint() if policy.joint else Sequential(ExactPerPod())
    return Improved() if policy.joint else Sequential(Heuristic())


class ExactJoint:
    """CP-SAT over every pending pod at once, seeded with the heuristic's plan. On a problem too
    large for it, the default search's plan (best found, with its bound) under this search's name,
    marked as a fallback."""

    name = CpSat.name

    def run(self, ctx: Context, pods: list[Pod]) -> Draft:
        try:
            return CpSat(hint=Sequential(Heuristic()).run(ctx, pods)).run(ctx, pods)
        except ExactTooLargeError as exc:
            draft = Improved().run(ctx, pods)
            draft.search = f"{Improved.name} (too large for {self.name}: {exc})"
            return draft


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
    search = choose(policy)
    draft = check(ctx, search.run(ctx, pods))
    result = render(ctx, draft, len(pods))
    return replace(result, optimality=optimality(ctx, pods, draft, draft.search or search.name))


def optimality(ctx: Context, pods: list[Pod], draft: Draft, search: str) -> Optimality:
    """Whether the draft is proven optimal: by its search, or because it meets the bound."""
    objective = of_draft(ctx, draft)
    cheap = bound(ctx, pods)
    best = cheap if draft.bound is None or draft.bound.key() < cheap.key() else draft.bound
    if draft.proven or best.key() == objective.key():
        return Optimality(Proof.OPTIMAL, search, objective, objective, draft.steps)
    return Optimality(Proof.BEST_FOUND, search, objective, best, draft.steps)
