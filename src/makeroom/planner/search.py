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
from makeroom.planner.cpsat import CpSat, ExactTooLargeError, estimate, exact_available
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


AUTO_EXACT_SIZE = 400
"""``Policy.exact_if_available``: the exact joint search only on problems up to this size
(``cpsat.estimate``: the nodes the pending pods could take times the cluster's nodes; the mid-size
clusters of the tests are at most 100). Past it, building the model in Python costs more than a
controller's round may wait (``makeroom bench plan``: 16 s on 200 nodes with one pod waiting, under
load); the default search decides there."""


def choose(ctx: Context, pods: list[Pod]) -> Search:
    policy = ctx.policy
    if policy.exact:
        return ExactJoint() if policy.joint else Sequential(ExactPerPod())
    if (
        policy.exact_if_available
        and policy.joint
        and estimate(ctx, pods) <= AUTO_EXACT_SIZE
        and exact_available()
    ):
        return ExactJoint(seed=Improved(), unless_proven=True)
    return Improved() if policy.joint else Sequential(Heuristic())


class ExactJoint:
    """CP-SAT over every pending pod at once, seeded with ``seed``'s plan (the per-pod heuristic's by
    default) and never worse than it. On a problem too large for it, the default search's plan (best
    found, with its bound) under this search's name, marked as a fallback. ``unless_proven``: the
    seed's plan as it is when it meets the bound (no plan is better; the solver is not asked)."""

    name = CpSat.name

    def __init__(self, seed: Search | None = None, *, unless_proven: bool = False) -> None:
        self.seed = seed
        self.unless_proven = unless_proven

    def run(self, ctx: Context, pods: list[Pod]) -> Draft:
        seed = self.seed or Sequential(Heuristic())
        hint = seed.run(ctx, pods)
        if self.unless_proven:
            kept = check(ctx, hint)
            if of_draft(ctx, kept).key() == bound(ctx, pods).key():
                kept.proven = True
                kept.search = f"{seed.name} (meets the bound: {self.name} not needed)"
                return kept
        try:
            exact = CpSat(hint=hint).run(ctx, pods)
        except ExactTooLargeError as exc:
            draft = hint if isinstance(seed, Improved) else Improved().run(ctx, pods)
            draft.search = f"{Improved.name} (too large for {self.name}: {exc})"
            return draft
        checked = check(ctx, exact)
        if checked is exact:
            return exact
        # CP-SAT sees the filters that look at other pods only against the cluster as it is; where
        # its plan breaks one once moves interact, the seed's plan (built step by step) may not.
        seeded = check(ctx, hint)
        if of_draft(ctx, seeded).key() < of_draft(ctx, checked).key():
            seeded.search = f"{seed.name} ({self.name}'s plan broke a constraint)"
            return seeded
        return checked


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
    search = choose(ctx, pods)
    draft = check(ctx, search.run(ctx, pods))
    result = render(ctx, draft, len(pods))
    return replace(result, optimality=optimality(ctx, pods, draft, draft.search or search.name))


def optimality(ctx: Context, pods: list[Pod], draft: Draft, search: str) -> Optimality:
    """Whether the draft is proven optimal: by its search, or because it meets the bound."""
    objective = of_draft(ctx, draft)
    if draft.proven:
        return Optimality(Proof.OPTIMAL, search, objective, objective, draft.steps)
    cheap = bound(ctx, pods)
    best = cheap if draft.bound is None or draft.bound.key() < cheap.key() else draft.bound
    if best.key() == objective.key():
        return Optimality(Proof.OPTIMAL, search, objective, objective, draft.steps)
    return Optimality(Proof.BEST_FOUND, search, objective, best, draft.steps)
