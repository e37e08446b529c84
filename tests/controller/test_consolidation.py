"""Issue 7: consolidation toward preferred, cheaper node groups (cortex issue 1965)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from makeroom.controller import Strategy
from makeroom.scenario import load_scenario
from tests.conftest import cli_json, seed
from tests.controller.support import leftovers, run_with_crash


def simulate(path: Any, strategy: str, *flags: str) -> Any:
    return cli_json("simulate", path, "--strategy", strategy, *flags)


@pytest.mark.parametrize("strategy", ["evict", "migrate"])
def test_seed4_consolidates_the_gpu_node_away(strategy: str) -> None:
    none = simulate(seed(4), "none")
    data = simulate(seed(4), strategy)
    groups = data["node_groups"]
    assert groups["cpu"]["nodes_added"] == 1  # the second CPU node
    assert groups["gpu"]["nodes_removed"] == 1 and groups["gpu"]["nodes_at_end"] == 0
    iris = data["workloads"]["iris-classifier"]
    assert iris["min_ready"] == 15  # make-before-break throughout
    assert iris["evicted"] == 5  # the five GPU-hosted replicas, and only them
    assert data["cost"] < none["cost"]
    assert not any(p["node"] == "gpu-0" for p in data["pods"])


def test_consolidation_is_off_with_the_flag() -> None:
    off = simulate(seed(4), "migrate", "--no-consolidate")
    assert off["evictions"] == 0
    assert off["node_groups"]["gpu"]["nodes_at_end"] == 1


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("strategy", ["evict", "migrate"])
def test_consolidation_changes_nothing_relocation_decided(n: int, strategy: str) -> None:
    on = simulate(seed(n), strategy)
    off = simulate(seed(n), strategy, "--no-consolidate")
    assert on == off
    moved = [e["pod"] for e in on["events"] if e["kind"] in ("relocated", "evicted", "preempted")]
    assert len(moved) == len(set(moved)) == 3  # no pod moves twice
    first_move = min(e["t"] for e in on["events"] if e["kind"] in ("relocated", "evicted"))
    replacements = {e["pod"] for e in on["events"] if e["kind"] == "pod_created" and e["t"] >= first_move}
    assert not replacements & set(moved)


def test_no_consolidation_when_it_would_not_pay(tmp_path: Any) -> None:
    raw = yaml.safe_load(seed(4).read_text())
    raw["node_groups"][0]["price_per_hour"] = 0.6  # the cheap node would cost more than it frees
    path = tmp_path / "no-saving.yaml"
    path.write_text(yaml.safe_dump(raw))
    none = simulate(path, "none")
    data = simulate(path, "migrate")
    assert data["evictions"] == 0
    assert data["node_groups"] == none["node_groups"]
    assert data["cost"] == none["cost"]
    assert not [e for e in data["events"] if e["kind"] == "makeroom_scale"]


def test_no_consolidation_below_the_groups_min(tmp_path: Any) -> None:
    raw = yaml.safe_load(seed(4).read_text())
    raw["node_groups"][1]["min"] = 1  # the autoscaler could not remove gpu-0 anyway
    path = tmp_path / "gpu-min.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert simulate(path, "migrate")["evictions"] == 0


def test_scenario_section_turns_it_off(tmp_path: Any) -> None:
    raw = yaml.safe_load(seed(4).read_text())
    raw["controller"] = {"strategy": "migrate", "consolidation": {"enabled": False}}
    path = tmp_path / "off.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert cli_json("simulate", path)["evictions"] == 0


def test_a_consolidation_stops_when_a_pod_needs_relocation(tmp_path: Any) -> None:
    raw = yaml.safe_load(seed(4).read_text())
    raw["workloads"].append(
        {
            "name": "text-generator",
            "replicas": 0,
            "priority": 1000,
            "requests": {"cpu": "3", "memory": "12Gi", "nvidia.com/gpu": 1},
            "startup_time": "60s",
        }
    )
    raw["events"] = [{"at": "30s", "scale": {"workload": "text-generator", "replicas": 1}}]
    path = tmp_path / "gpu-wanted.yaml"
    path.write_text(yaml.safe_dump(raw))
    data = simulate(path, "migrate")
    reasons = [e["reason"] for e in data["events"] if "reason" in e]
    assert "ConsolidationStopped" in reasons
    assert data["workloads"]["text-generator"]["ready_at_end"] == 1
    assert data["node_groups"]["gpu"]["nodes_at_end"] == 1
    assert data["workloads"]["iris-classifier"]["ready_at_end"] == 15


def test_a_fresh_controller_finishes_a_consolidation_after_a_crash_at_every_action() -> None:
    scenario = load_scenario(seed(4))
    _, _, actions = run_with_crash(scenario, Strategy.MIGRATE, None)
    assert actions >= 5
    for crash_at in range(1, actions + 1):
        sim, result, _ = run_with_crash(scenario, Strategy.MIGRATE, crash_at)
        where = f"killed before action {crash_at} of {actions}"
        assert result.data["node_groups"]["gpu"]["nodes_at_end"] == 0, where
        assert result.data["workloads"]["iris-classifier"]["min_ready"] == 15, where
        assert leftovers(sim, scenario) == [], where


def test_plan_shows_the_consolidation_the_controller_would_start() -> None:
    data = cli_json("plan", seed(4))
    found = data["consolidation"]
    assert found["node"] == "gpu-0" and found["scale_ups"] == {"cpu": 1}
    assert len(found["moves"]) == 5 and found["saving_per_hour"] > 0
    assert cli_json("plan", seed(1), "--at", "70s")["consolidation"] is None  # a pod waits
    assert "consolidation" not in cli_json("plan", seed(4), "--no-consolidate")


@pytest.mark.parametrize(("cpu_max", "gpu_kept"), [(2, True), (3, False)])
def test_an_emptied_node_goes_back_only_to_a_pod_that_needs_it(
    tmp_path: Any, cpu_max: int, gpu_kept: bool
) -> None:
    # gpu-0 is empty by 5 min; then a CPU-only pod that fits no CPU node arrives. With the CPU group at
    # its max nothing cheaper can take it, and the emptied node is given back; with room to grow, the
    # autoscaler adds a CPU node for it and gpu-0 still goes.
    raw = yaml.safe_load(seed(4).read_text())
    raw["node_groups"][0]["max"] = cpu_max
    raw["events"] = [
        {"at": "5m", "deploy": {"name": "batch", "replicas": 1, "priority": 50, "requests": {"cpu": "3"}}}
    ]
    path = tmp_path / "late-pod.yaml"
    path.write_text(yaml.safe_dump(raw))
    data = simulate(path, "migrate")
    assert data["workloads"]["batch"]["ready_at_end"] == 1
    assert (data["node_groups"]["gpu"]["nodes_at_end"] == 1) is gpu_kept
    assert data["workloads"]["iris-classifier"]["ready_at_end"] == 15
    first = next(e["node"] for e in data["events"] if e["kind"] == "pod_scheduled" and e["pod"] == "batch-0")
    stopped = [e for e in data["events"] if e.get("reason") == "ConsolidationStopped"]
    if gpu_kept:
        assert first == "gpu-0" and stopped  # nothing cheaper could take it
    else:
        assert first.startswith("cpu-") and not stopped  # it never drifts onto the emptied GPU node
        assert data["evictions"] == 5  # only the five GPU-hosted iris replicas ever moved
