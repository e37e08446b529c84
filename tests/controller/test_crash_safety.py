"""Kill the controller before each of its actions in turn; a fresh one must finish or roll back,
and leave nothing of makeroom behind."""

from __future__ import annotations

import pytest

from makeroom.controller import Strategy
from makeroom.scenario import load_scenario
from tests.builders.scenario import example
from tests.conftest import seed
from tests.controller.support import leftovers, ready, run_with_crash


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("strategy", [Strategy.EVICT, Strategy.MIGRATE])  # headroom: below
def test_a_fresh_controller_finishes_after_a_crash_at_every_action(n: int, strategy: Strategy) -> None:
    scenario = load_scenario(seed(n))
    _, clean, actions = run_with_crash(scenario, strategy, None)
    assert actions >= 5, "the relocation should take several actions"
    assert ready(clean, "text-generator") == 1
    desired_iris = clean.data["workloads"]["iris-classifier"]["desired"]
    for crash_at in range(1, actions + 1):
        sim, result, _ = run_with_crash(scenario, strategy, crash_at)
        where = f"{strategy} on seed-{n}, killed before action {crash_at} of {actions}"
        assert ready(result, "text-generator") == 1, where
        assert ready(result, "iris-classifier") == desired_iris, where
        assert leftovers(sim, scenario) == [], where
        assert result.data["node_groups"]["gpu"]["nodes_added"] == 0, where


@pytest.mark.parametrize("strategy", [Strategy.EVICT, Strategy.MIGRATE])  # headroom: below
def test_a_clean_run_leaves_nothing_behind(strategy: Strategy) -> None:
    scenario = load_scenario(seed(2))
    sim, result, _ = run_with_crash(scenario, strategy, None)
    assert leftovers(sim, scenario) == []
    assert ready(result, "iris-classifier") == 15


def test_headroom_resumes_or_rolls_back_after_a_crash_at_every_action() -> None:
    """Leadership lost mid-move: the burst seed's headroom moves, killed before each action in turn.
    A fresh controller finishes or rolls back; what headroom leaves by design is only its KeptRoom
    records and the PreferNoSchedule taint of the nodes that hold room."""
    scenario = load_scenario(example("headroom-seed-5"))
    config = scenario.spec.controller_config(Strategy.HEADROOM)
    _, clean, actions = run_with_crash(scenario, Strategy.HEADROOM, None, config)
    assert actions >= 6, "keeping the room should take several actions"
    assert ready(clean, "text-model") == 2
    by_design = ("record kept-room", "taint makeroom.io/headroom")
    for crash_at in range(1, actions + 1):
        sim, result, _ = run_with_crash(scenario, Strategy.HEADROOM, crash_at, config)
        where = f"headroom on the burst seed, killed before action {crash_at} of {actions}"
        assert ready(result, "text-model") == 2, where
        assert ready(result, "api") == 8, where
        assert result.data["workloads"]["api"]["min_ready"] == 8, where
        left = [f for f in leftovers(sim, scenario) if not any(d in f for d in by_design)]
        assert left == [], where
