"""The joint oracle (issue 13): on 300 mid-size clusters where several GPU pods wait at once, each drawn
from its seed (``makeroom.bench.midsize``: three groups, 5-9 nodes, 30-70 running pods, CPU-only
replicas on GPU nodes, budgets, protected pods, 2-4 GPU pods waiting, none of which fits without a
move), every plan is checked on paper, and the default plan is compared with the exact joint optimum
(CP-SAT) on the whole objective:

- the exact joint plan is feasible and proven optimal, and no other search beats it (the per-pod
  heuristic of before issue 13, the default);
- the default plan is feasible, never places fewer pods of any priority than the optimum (objective
  part 1), and equals the optimum on the whole objective on at least 99% of the instances.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import pytest

from makeroom.bench.midsize import midsize
from makeroom.model.state import ClusterState
from makeroom.planner import Plan, Policy, Proof, cpsat, plan
from tests.planner.feasibility import check_feasible, objective

pytest.importorskip("ortools")

SEEDS = range(300)
DEFAULT = Policy()
PER_POD = Policy(joint=False)
EXACT = Policy(exact=True)


@dataclass(frozen=True)
class Outcome:
    state: ClusterState
    default: Plan
    per_pod: Plan
    exact: Plan


@cache
def outcomes() -> tuple[Outcome, ...]:
    out = []
    for seed in SEEDS:
        state = midsize(seed).state
        out.append(Outcome(state, plan(state, DEFAULT), plan(state, PER_POD), plan(state, EXACT)))
    return tuple(out)


def test_every_plan_is_feasible() -> None:
    for o in outcomes():
        check_feasible(o.state, o.default, DEFAULT)
        check_feasible(o.state, o.per_pod, PER_POD)
        check_feasible(o.state, o.exact, EXACT)


def test_exact_is_proven_optimal_and_never_beaten() -> None:
    for seed, o in zip(SEEDS, outcomes(), strict=True):
        assert o.exact.optimality is not None and o.exact.optimality.proof is Proof.OPTIMAL, seed
        best = objective(o.state, o.exact)
        assert objective(o.state, o.default) >= best, seed
        assert objective(o.state, o.per_pod) >= best, seed


def test_default_is_never_worse_on_pods_placed() -> None:
    for seed, o in zip(SEEDS, outcomes(), strict=True):
        assert objective(o.state, o.default)[0] == objective(o.state, o.exact)[0], seed


def test_default_equals_the_optimum_on_at_least_99_percent() -> None:
    misses = [
        seed
        for seed, o in zip(SEEDS, outcomes(), strict=True)
        if objective(o.state, o.default) != objective(o.state, o.exact)
    ]
    assert len(misses) <= len(SEEDS) // 100, misses


def test_the_joint_improvement_matters() -> None:
    """The per-pod planner alone misses the optimum often on these clusters (the issue saw 14 in 30):
    the instances are hard enough for the comparison above to mean something."""
    misses = sum(objective(o.state, o.per_pod) != objective(o.state, o.exact) for o in outcomes())
    assert misses >= len(SEEDS) // 10


def test_the_same_cluster_gives_the_same_plans() -> None:
    for seed in range(5):
        state = midsize(seed).state
        for policy in (DEFAULT, EXACT):
            first, again = plan(state, policy).to_json(), plan(state, policy).to_json()
            assert first == again, seed


def test_a_problem_too_large_for_the_exact_search_gets_the_default_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cpsat, "MAX_VARIABLES", 10)
    state = midsize(3).state
    fallback, default = plan(state, EXACT), plan(state, DEFAULT)
    assert fallback.optimality is not None and "too large for exact-joint" in fallback.optimality.search
    assert fallback.moves == default.moves and fallback.placements == default.placements


def test_level_by_level_solving_reaches_the_same_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the weights of one objective would not fit in 62 bits (huge priorities or prices), the
    levels are solved one after the other; both ways reach the same optimum."""
    for seed in range(5):
        state = midsize(seed).state
        weighted = plan(state, EXACT)
        with monkeypatch.context() as m:
            m.setattr(cpsat, "MAX_WEIGHT", 10)
            levels = plan(state, EXACT)
        assert levels.optimality is not None and levels.optimality.proof is Proof.OPTIMAL
        assert objective(state, levels) == objective(state, weighted), seed
        check_feasible(state, levels, EXACT)
