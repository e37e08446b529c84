"""Issue 24: the ``headroom`` strategy on the burst seed and its variants, through the CLI's JSON and
the simulator's timeline (docs/headroom.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from makeroom.controller import Strategy
from makeroom.scenario import parse_scenario
from makeroom.sim.results import Result
from makeroom.sim.runs import build
from tests.builders.scenario import example, kinds
from tests.conftest import cli, cli_json

BURST = example("headroom-seed-5")
STARTUP = 90.0  # text-model's startup_time in the seed


def burst(**headroom: Any) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(BURST.read_text())
    data["controller"]["headroom"].update(headroom)
    return data


def run(data: dict[str, Any]) -> tuple[Any, Result]:
    sim = build(parse_scenario(yaml.safe_load(yaml.safe_dump(data)), "burst.yaml"), Strategy.HEADROOM)
    return sim, sim.run()


def kept_room(sim: Any, target: str = "gpu.workload-text-model") -> dict[str, Any]:
    """The target's KeptRoom record in the simulated store (``kubectl get headroom``)."""
    record: dict[str, Any] = sim.world.custom[("kept-room", target)]
    return record


def test_compare_on_the_burst_seed_readies_the_burst_at_its_startup_time() -> None:
    data = cli_json("compare", BURST, "--json")["results"]
    headroom = data["headroom"]["workloads"]
    assert headroom["text-model"]["ready_at_end"] == 2
    assert headroom["text-model"]["time_to_ready_s"] <= 1.1 * STARTUP
    assert data["headroom"]["pending_at_end"] == []
    # nothing lost: no fewer Ready API replicas at any time than with no controller at all
    assert headroom["api"]["min_ready"] >= data["none"]["workloads"]["api"]["min_ready"] == 8
    assert headroom["api"]["ready_at_end"] == 8
    for cure in ("migrate", "evict"):
        assert data[cure]["workloads"]["text-model"]["time_to_ready_s"] > 1.1 * STARTUP, cure
    assert data["none"]["workloads"]["text-model"]["ready_at_end"] == 0


def test_the_seed_runs_headroom_by_default_and_records_what_it_holds() -> None:
    sim, result = run(burst())
    assert [e["object"] for e in kinds(result, "keeping_room_started")] == ["Node/gpu-0", "Node/gpu-1"]
    assert all(e["t"] < 300 for e in kinds(result, "room_kept"))  # before the burst at 5m
    record = kept_room(sim)
    assert record["wanted"] == 2 and record["whom"] == "text-model"
    assert [m["workload"] for m in record["moved"]] == ["api", "api"]  # one entry per pod moved
    # the burst took the room it was kept for: nothing can be freed on those nodes any more
    assert record["free"] == 0
    assert {t.key for n in sim.world.state.nodes.values() if n.group == "gpu" for t in n.taints} == {
        "makeroom.io/headroom"
    }


def test_a_target_larger_than_the_group_can_hold_is_reported_and_moves_once() -> None:
    data = burst(targets=[{"group": "gpu", "count": 5, "for": {"workload": "text-model"}}])
    sim, result = run(data)
    assert len(kinds(result, "keeping_room_started")) == 2  # both nodes, once: no loop
    assert result.data["workloads"]["api"]["min_ready"] == 8
    record = kept_room(sim)
    assert record["state"] == "short"
    assert "at most 0" in record["why"]  # after the burst, nothing more can be freed


def test_no_cpu_room_and_no_price_moves_nothing_and_says_why() -> None:
    data = burst()
    data["workloads"][0]["replicas"] = 10
    data["workloads"][0]["placement"] = {"cpu": 4, "gpu-0": 3, "gpu-1": 3}  # the CPU node is full
    data["events"] = []  # no burst: the room stays short
    sim, result = run(data)
    assert kinds(result, "keeping_room_started") == []
    record = kept_room(sim)
    assert record["state"] == "short"
    assert "max_price_per_hour 0" in record["why"]
    assert result.data["node_groups"]["cpu"]["nodes_added"] == 0


def test_a_price_that_fits_buys_a_cpu_node_for_the_moved_pods() -> None:
    data = burst(max_price_per_hour=0.17)
    data["workloads"][0]["replicas"] = 10
    data["workloads"][0]["placement"] = {"cpu": 4, "gpu-0": 3, "gpu-1": 3}
    _, result = run(data)
    assert result.data["node_groups"]["cpu"]["nodes_added"] == 1
    assert result.data["workloads"]["text-model"]["time_to_ready_s"] <= 1.1 * STARTUP
    assert result.data["workloads"]["api"]["min_ready"] == 10


def test_the_hourly_move_limit_holds() -> None:
    data = burst(max_moves_per_hour=1)  # two moves needed
    data["events"] = []
    sim, result = run(data)
    assert kinds(result, "keeping_room_started") == []
    assert "1 left this hour" in kept_room(sim)["why"]


def test_the_hourly_limit_counts_pods_not_workloads() -> None:
    data = burst(cooldown="0s", max_price_per_hour=0.17, max_moves_per_hour=3)
    data["events"] = [
        {"at": "1m", "scale": {"workload": "text-model", "replicas": 2}},
        {"at": "3m", "scale": {"workload": "text-model", "replicas": 0}},
        {"at": "4m", "scale": {"workload": "api", "replicas": 10}},  # two more API pods on GPU nodes
    ]
    sim, result = run(data)
    assert len(kinds(result, "keeping_room_started")) == 2  # both nodes at 0s, then never again
    assert "needs 2 moves; 1 left this hour" in kept_room(sim)["why"]


def test_a_budget_of_zero_disruptions_is_never_broken() -> None:
    data = burst()
    data["workloads"][0]["pdb"] = {"max_unavailable": 0}
    _, result = run(data)
    api = result.data["workloads"]["api"]
    assert api["min_ready"] == 8  # replaced before they left (make-before-break)
    assert result.data["workloads"]["text-model"]["time_to_ready_s"] <= 1.1 * STARTUP


def test_room_taken_by_gpu_pods_is_restored_after_the_cooldown() -> None:
    data = burst(cooldown="10m", max_price_per_hour=0.17)
    data["events"] = [
        {"at": "1m", "scale": {"workload": "text-model", "replicas": 2}},  # the burst takes the room
        {"at": "3m", "scale": {"workload": "text-model", "replicas": 0}},  # and gives it back
        {"at": "4m", "scale": {"workload": "api", "replicas": 10}},  # the CPU node is full: to GPU nodes
        {"at": "15m", "scale": {"workload": "text-model", "replicas": 2}},
    ]
    sim, result = run(data)
    starts = [e["t"] for e in kinds(result, "keeping_room_started")]
    assert starts[0] == 0.0
    later = [t for t in starts if t > 0]
    assert later, "the room taken back by CPU pods is restored"
    assert min(later) >= 600.0  # api was moved at 0s: not again within its 10m cooldown
    assert result.data["workloads"]["api"]["min_ready"] >= 8
    assert kept_room(sim)["wanted"] == 2


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (0, "from 1 to 150000"),
        (".nan", "expected"),
        (10**9, "from 1 to 150000"),
        ('"2"', "valid integer"),
        (1.5, "expected"),
    ],
)
def test_a_bad_count_is_refused_with_its_key_path(tmp_path: Path, count: object, expected: str) -> None:
    text = BURST.read_text().replace("count: 2,", f"count: {count},")
    target = tmp_path / "bad.yaml"
    target.write_text(text)
    result = cli("simulate", target)
    assert result.exit_code == 2
    assert f"{target}: controller.headroom.targets[0].count: " in result.stderr, result.stderr
    assert expected in result.stderr


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ("group: gpu,", "targets[0].group: expected a node group name"),
        ("for: {workload: text-model}", "targets[0].for"),
    ],
)
def test_a_bad_target_is_refused(tmp_path: Path, change: str, where: str) -> None:
    text = BURST.read_text()
    bad = {
        "group: gpu,": "group: tpu,",
        "for: {workload: text-model}": "for: {workload: a, priority_class: b}",
    }
    target = tmp_path / "bad.yaml"
    target.write_text(text.replace(change, bad[change]))
    result = cli("simulate", target)
    assert result.exit_code == 2
    assert f"controller.headroom.{where}" in result.stderr, result.stderr


def test_the_scheduler_scores_prefer_no_schedule_taints_as_taint_toleration_does() -> None:
    from tests.builders.scenario import group, scenario, workload
    from tests.builders.scenario import run as run_scenario

    soft = [{"key": "makeroom.io/headroom", "effect": "PreferNoSchedule"}]
    groups = [group("a", taints=soft), group("b")]  # a-0 is the older node: ties go to it

    def node_of(w: dict[str, Any]) -> str | None:
        sim, _ = run_scenario(scenario(groups, [w]), until=1.0)
        (pod,) = sim.world.state.pods.values()
        return pod.node

    assert node_of(workload("cpu-pod", 1)) == "b-0"  # steered off the tainted node
    tolerating = workload("tolerant", 1, tolerations=[{"key": "makeroom.io/headroom", "operator": "Exists"}])
    assert node_of(tolerating) == "a-0"  # no preference: the tie goes to the oldest node
    only = [group("a", taints=soft)]
    sim, _ = run_scenario(scenario(only, [workload("cpu-pod", 1)]), until=1.0)
    assert [p.node for p in sim.world.state.pods.values()] == ["a-0"]  # a preference, not a filter


def test_cpu_buffer_asks_the_autoscaler_once_for_room_in_the_cpu_group() -> None:
    sim, result = run(burst(cpu_buffer=2))
    requests, replicas = sim.world.buffers["cpu"]
    assert replicas == 2 and requests["cpu"] == 1000  # room for two API replicas
    assert len(kinds(result, "capacity_buffer")) == 1  # asked once, not every round
    off, result = run(burst())
    assert off.world.buffers == {} and kinds(result, "capacity_buffer") == []


def test_the_smallest_cpu_pod_that_frees_the_room_moves_not_the_largest() -> None:
    """Either CPU-only pod's leaving keeps room for one model replica. Moving the larger would take
    room on the CPU node that the kept room never gives back (the taint keeps CPU pods off it): the
    next CPU pod would need a new CPU node."""
    data = burst(targets=[{"group": "gpu", "count": 1, "for": {"workload": "model"}}])
    data["node_groups"][1].update(min=1, max=1, initial=1)
    on_gpu = {"priority": 100, "startup_time": "20s", "termination_grace": "30s"}
    data["workloads"] = [
        {"name": "big", "replicas": 1, "requests": {"cpu": "4", "memory": "8Gi"}, "placement": {"gpu-0": 1}}
        | on_gpu,
        {"name": "small", "replicas": 1, "requests": {"cpu": "2", "memory": "4Gi"}, "placement": {"gpu-0": 1}}
        | on_gpu,
        {
            "name": "model",
            "replicas": 0,
            "priority": 1000,
            "requests": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": 1},
        },
        {
            "name": "batch",
            "replicas": 0,
            "requests": {"cpu": "2", "memory": "4Gi"},
            "node_selector": {"makeroom.io/group": "cpu"},
        },
    ]
    data["events"] = [{"at": "10m", "scale": {"workload": "batch", "replicas": 1}}]
    sim, result = run(data)
    assert [m["workload"] for m in kept_room(sim, "gpu.workload-model")["moved"]] == ["small"]
    assert kept_room(sim, "gpu.workload-model")["state"] == "kept"
    assert result.data["workloads"]["big"]["evicted"] == 0
    assert result.data["workloads"]["batch"]["ready_at_end"] == 1
    assert result.data["node_groups"]["cpu"]["nodes_added"] == 0
