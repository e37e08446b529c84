"""The consolidation search's answer key (what a controller keeps a fruitless search by): equal keys on
the same state give the same answer, and whatever can change the answer without changing the state's
generation (an opt-out, a pod's moved-at cooldown running out, a pod terminating) changes the key."""

from __future__ import annotations

from dataclasses import replace

from makeroom.controller import Strategy
from makeroom.model import DO_NOT_MOVE
from makeroom.model.objects import MOVED_AT
from makeroom.model.state import ClusterState
from makeroom.planner.consolidate import ConsolidationPolicy, answer_key, consolidate
from makeroom.scenario import load_scenario
from makeroom.sim.runs import build
from tests.conftest import seed


def seed4_state() -> ClusterState:
    """Seed 4 without makeroom, once its CPU replicas spilled onto the GPU node: gpu-0 may be emptied."""
    sim = build(load_scenario(seed(4)), Strategy.NONE, 1)
    sim.run(until=600.0)
    return sim.world.state


def test_the_same_key_gives_the_same_answer_and_the_clock_alone_changes_neither() -> None:
    state = seed4_state()
    policy = ConsolidationPolicy(now=600.0)
    found = consolidate(state, policy)
    assert found is not None and found.node == "gpu-0"
    later = replace(policy, now=10_000.0)
    assert answer_key(state, later) == answer_key(state, policy)
    assert consolidate(state, later) == found


def test_an_opt_out_changes_the_key_and_its_removal_gives_the_answer_back() -> None:
    state = seed4_state()
    policy = ConsolidationPolicy(now=600.0)
    before, found = answer_key(state, policy), consolidate(state, policy)
    pod = next(iter(state.pods_on["gpu-0"].values()))
    generation = state.generation
    pod.annotations[DO_NOT_MOVE] = "true"
    assert state.generation == generation  # what the generation does not see, the key does
    assert answer_key(state, policy) != before
    assert consolidate(state, policy) is None
    del pod.annotations[DO_NOT_MOVE]
    assert answer_key(state, policy) == before
    assert consolidate(state, policy) == found


def test_a_moved_at_cooldown_running_out_changes_the_key() -> None:
    state = seed4_state()
    pod = next(iter(state.pods_on["gpu-0"].values()))
    pod.annotations[MOVED_AT] = "500"
    cooling = ConsolidationPolicy(now=600.0, cooldown=600.0)
    over = replace(cooling, now=1200.0)
    assert consolidate(state, cooling) is None
    assert answer_key(state, over) != answer_key(state, cooling)
    assert consolidate(state, over) is not None


def test_a_pod_terminating_changes_the_key() -> None:
    state = seed4_state()
    policy = ConsolidationPolicy(now=600.0)
    before = answer_key(state, policy)
    next(iter(state.pods_on["gpu-0"].values())).terminating = True
    assert answer_key(state, policy) != before
    assert consolidate(state, policy) is None


def test_the_policy_but_its_clock_is_in_the_key() -> None:
    state = seed4_state()
    policy = ConsolidationPolicy(now=600.0)
    for changed in (
        replace(policy, max_moves=1),
        replace(policy, skip_nodes=frozenset({"gpu-0"})),
        replace(policy, recently_moved=frozenset({"x/y"})),
        replace(policy, pinned=frozenset({"x/y"})),
    ):
        assert answer_key(state, changed) != answer_key(state, policy)
