"""Where the controller's search (``Policy.exact_if_available``) runs the exact joint search and
where it does not (issue 22, item 3): not past ``AUTO_EXACT_SIZE`` (building the model would cost
the round seconds), and not when the default search's plan meets the bound (no plan is better)."""

from __future__ import annotations

import pytest

from makeroom.bench.midsize import midsize
from makeroom.bench.plan import Size, generate
from makeroom.model.state import ClusterState
from makeroom.model.view import ClusterView
from makeroom.planner import Policy, Proof, plan
from makeroom.planner.budgets import Budgets
from makeroom.planner.context import Context
from makeroom.planner.cpsat import estimate
from makeroom.planner.search import AUTO_EXACT_SIZE, pending_pods
from makeroom.snapshot import state_from_objects
from tests.planner.feasibility import check_feasible, objective

pytest.importorskip("ortools")

CONTROLLER = Policy(exact_if_available=True)


def test_past_its_size_the_controller_plans_with_the_default_search_alone() -> None:
    state = state_from_objects(generate(Size("60 nodes", 60, 30, pending=20)), source="generated")
    assert size_of(state) > AUTO_EXACT_SIZE
    mine, default = plan(state, CONTROLLER), plan(state, Policy())
    assert mine.optimality is not None and mine.optimality.search == "heuristic+joint"
    assert mine.to_json()["placements"] == default.to_json()["placements"]
    assert mine.to_json()["moves"] == default.to_json()["moves"]


def test_a_default_plan_that_meets_the_bound_is_kept_and_nothing_beats_it() -> None:
    kept = 0
    for seed in range(40):
        state = midsize(seed).state
        assert size_of(state) <= AUTO_EXACT_SIZE, seed  # every mid-size cluster is within it
        mine = plan(state, CONTROLLER)
        assert mine.optimality is not None
        if "meets the bound" not in mine.optimality.search:
            continue
        kept += 1
        check_feasible(state, mine, CONTROLLER)
        assert mine.optimality.proof is Proof.OPTIMAL
        assert objective(state, mine) == objective(state, plan(state, Policy(exact=True))), seed
    assert kept > 0  # the bound proves some default plans on these clusters


def size_of(state: ClusterState) -> int:
    pods = pending_pods(state, CONTROLLER, None)
    return estimate(Context(ClusterView(state), CONTROLLER, Budgets.of(state)), pods)
