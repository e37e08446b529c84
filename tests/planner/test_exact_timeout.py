"""The exact joint search past its time limit (issue 22, item 3): the best plan the solver found, or,
when it found none in time, the plan it was seeded with; never an empty plan. Forced with a tiny
deterministic time limit on a cluster of 60 nodes with 20 GPU pods waiting, where the solver finds
nothing in that time (before: every pod left unplaced); the controller's search, which runs the
solver only on problems within ``AUTO_EXACT_SIZE``, on 50 nodes with 40 waiting."""

from __future__ import annotations

from functools import cache

import pytest

from makeroom.bench.plan import Size, generate
from makeroom.model.state import ClusterState
from makeroom.planner import Policy, Proof, plan
from makeroom.snapshot import state_from_objects
from tests.planner.feasibility import check_feasible, objective

pytest.importorskip("ortools")


@cache
def cluster(nodes: int = 60, pending: int = 20) -> ClusterState:
    size = Size(f"{nodes} nodes", nodes, 30, pending=pending)
    return state_from_objects(generate(size), source="generated")


@pytest.mark.parametrize("joint_seed", [False, True], ids=["seeded-by-heuristic", "seeded-by-default"])
def test_a_timed_out_exact_search_returns_its_seed_never_an_empty_plan(joint_seed: bool) -> None:
    state = cluster(50, 40) if joint_seed else cluster()
    rushed = (
        Policy(exact=True, exact_budget=0.0)
        if not joint_seed
        else Policy(exact_if_available=True, exact_budget=0.0)
    )
    seed_policy = Policy(joint=False) if not joint_seed else Policy()
    timed_out, seed = plan(state, rushed), plan(state, seed_policy)
    assert timed_out.optimality is not None and seed.optimality is not None
    assert timed_out.optimality.search == "exact-joint"
    assert timed_out.optimality.proof is Proof.BEST_FOUND  # no proof in that time
    assert seed.placements, "the seed places pods: an empty plan would be a loss"
    assert objective(state, timed_out) <= objective(state, seed)
    assert len(timed_out.placements) >= len(seed.placements)
    check_feasible(state, timed_out, rushed)


def test_with_its_time_the_exact_search_proves_what_the_rushed_one_only_found() -> None:
    state = cluster()
    proven = plan(state, Policy(exact=True))
    assert proven.optimality is not None and proven.optimality.proof is Proof.OPTIMAL
    rushed = plan(state, Policy(exact=True, exact_budget=0.0))
    assert objective(state, proven) <= objective(state, rushed)
