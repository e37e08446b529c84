"""Issue 4's acceptance: `makeroom plan` on the seeds, a case where per-node preemption strands its
victims, a case with no possible plan, and refused input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from makeroom.controller import Strategy
from makeroom.model.state import ClusterState
from makeroom.planner import Policy, plan
from makeroom.scenario import load_scenario
from makeroom.sim import Options, Simulation
from makeroom.sim.preemption import find_preemption
from tests.builders.scenario import example
from tests.conftest import cli as run
from tests.conftest import cli_json as run_json
from tests.planner.helpers import SCENARIOS

SPEC_KEYS = {"placements", "moves", "scale_ups", "unplaceable", "stats"}


def _check_contract(out: dict[str, Any]) -> None:
    assert set(out) >= SPEC_KEYS
    for p in out["placements"]:
        assert {"pod", "node", "new_node_group"} <= set(p)
    for m in out["moves"]:
        assert {"pod", "workload", "from_node", "to_node", "to_new_node_group"} <= set(m)
    for u in out["unplaceable"]:
        assert {"pod", "reason"} <= set(u)
    assert {"moves", "new_nodes", "plan_ms"} <= set(out["stats"])
    assert out["stats"]["moves"] == len(out["moves"])
    assert out["stats"]["new_nodes"] == sum(out["scale_ups"].values())


def test_seed_1_relocates_three_iris_replicas_to_the_cpu_node() -> None:
    out = run_json("plan", example("seed-1"), "--at", "70s")
    _check_contract(out)
    assert out["placements"] == [
        {"pod": "text-generator-0", "node": "gpu-0", "new_node_group": None, **_extras(out, 0)}
    ]
    assert len(out["moves"]) == 3
    for m in out["moves"]:
        assert (m["workload"], m["from_node"], m["to_node"], m["to_new_node_group"]) == (
            "iris-classifier",
            "gpu-0",
            "cpu-0",
            None,
        )
    assert out["scale_ups"] == {}
    assert out["unplaceable"] == []


def _extras(out: dict[str, Any], i: int) -> dict[str, Any]:
    return {k: v for k, v in out["placements"][i].items() if k not in ("pod", "node", "new_node_group")}


def test_seed_2_moves_three_replicas_to_a_new_cpu_node() -> None:
    out = run_json("plan", example("seed-2"), "--at", "70s")
    _check_contract(out)
    assert [(p["pod"], p["node"]) for p in out["placements"]] == [("text-generator-0", "gpu-0")]
    assert len(out["moves"]) == 3
    assert {(m["from_node"], m["to_node"], m["to_new_node_group"]) for m in out["moves"]} == {
        ("gpu-0", None, "cpu")
    }
    assert out["scale_ups"] == {"cpu": 1}


def test_seed_3_relocates_instead_of_buying_a_gpu_node() -> None:
    out = run_json("plan", example("seed-3"), "--at", "70s")
    _check_contract(out)
    assert [(p["pod"], p["node"]) for p in out["placements"]] == [("text-generator-0", "gpu-0")]
    assert len(out["moves"]) == 3
    assert {(m["from_node"], m["to_node"]) for m in out["moves"]} == {("gpu-0", "cpu-0")}
    assert out["scale_ups"] == {}


def test_exact_mode_agrees_on_the_seeds() -> None:
    for stem in ("seed-1", "seed-2", "seed-3"):
        fast = run_json("plan", example(stem), "--at", "70s")
        exact = run_json("plan", example(stem), "--at", "70s", "--exact")
        assert exact["stats"]["exact"] is True
        assert len(fast["moves"]) == len(exact["moves"])
        assert fast["scale_ups"] == exact["scale_ups"]


def test_human_output_has_a_line_per_placement_and_move() -> None:
    result = run("plan", example("seed-1"), "--at", "70s")
    assert result.exit_code == 3, result.output  # a pod is pending: the plan says how to place it
    lines = result.output.splitlines()
    assert sum("place text-generator-0 on gpu-0" in line for line in lines) == 1
    assert sum(line.strip().startswith("move iris-classifier-") for line in lines) == 3


def test_nothing_pending_at_t0_of_seed_1() -> None:
    out = run_json("plan", example("seed-1"), "--at", "0")
    assert out["placements"] == [] and out["moves"] == [] and out["unplaceable"] == []


def _state(path: Path, at: float = 0.0) -> tuple[ClusterState, Simulation]:
    sim = Simulation(load_scenario(path), Options(Strategy.NONE, keep_events=False, keep_samples=False))
    sim.run(until=at)
    return sim.world.state, sim


def test_planner_lands_every_moved_pod_where_preemption_would_strand_its_victims() -> None:
    path = SCENARIOS / "preemption-strands-victims.yaml"
    state, sim = _state(path)
    (pending,) = state.pending()
    # the baseline: per-node preemption picks gpu-0, and its victims fit nowhere once evicted
    choice = find_preemption(state, pending, sim.world.disruptions_allowed)
    assert choice is not None and choice.node == "gpu-0"
    free = state.free()
    free[state.slot_of["gpu-0"]] = -1  # gpu-0 is taken by the preemptor
    for victim in choice.victims:
        room = state.static_mask(victim.spec) & np.all(free >= state.requests_of(victim.spec), axis=1)
        assert not room.any(), f"{victim.name} would have somewhere to go"
    # makeroom: relocates from gpu-1 instead, and every moved pod has a node to land on
    out = run_json("plan", path)
    assert [(p["pod"], p["node"]) for p in out["placements"]] == [("text-generator-0", "gpu-1")]
    assert out["moves"] and all(m["to_node"] == "cpu-0" for m in out["moves"])
    assert out["unplaceable"] == []
    result = plan(state, Policy())
    assert all(m.pod.priority < pending.priority for m in result.moves)


def test_no_possible_plan_moves_nothing_and_says_why() -> None:
    out = run_json("plan", SCENARIOS / "no-possible-plan.yaml")
    assert out["moves"] == [] and out["placements"] == [] and out["scale_ups"] == {}
    assert out["unplaceable"] == [
        {"pod": "text-generator-0", "reason": "no-destination", "why": out["unplaceable"][0]["why"]}
    ]
    assert "nowhere to go" in out["unplaceable"][0]["why"]
    human = run("plan", SCENARIOS / "no-possible-plan.yaml")
    assert "cannot place text-generator-0: no-destination" in human.output


def test_bad_scenario_exits_2_with_file_and_key_path(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    text = example("seed-1").read_text().replace("cpu: 400m", "cpu: lots")
    bad.write_text(text)
    result = run("plan", bad)
    assert result.exit_code == 2
    assert f"{bad}: workloads[0].requests.cpu:" in result.stderr
    assert "Traceback" not in result.output


def test_bad_at_and_missing_file_exit_2(tmp_path: Path) -> None:
    assert run("plan", example("seed-1"), "--at", "soon").exit_code == 2
    missing = run("plan", tmp_path / "nope.yaml")
    assert missing.exit_code == 2 and "no such file" in missing.stderr
    groups = run("plan", example("seed-1"), "--groups", example("seed-2"))
    assert groups.exit_code == 2 and "--groups" in groups.stderr
