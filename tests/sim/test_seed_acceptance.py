"""Issue 2's acceptance: the seed scenarios under `none` and `preemption`, through the CLI's JSON."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import cli, cli_json, seed


def simulate(n: int, strategy: str) -> Any:
    return cli_json("simulate", seed(n), "--strategy", strategy)


def nodes_added(data: Any) -> dict[str, int]:
    return {g: v["nodes_added"] for g, v in data["node_groups"].items()}


def node_of(data: Any, workload: str) -> list[str | None]:
    return [p["node"] for p in data["pods"] if p["workload"] == workload and p["phase"] == "Running"]


def test_seed1_none_text_generator_never_ready() -> None:
    data = simulate(1, "none")
    assert data["workloads"]["text-generator"]["ready_at_end"] == 0
    assert data["workloads"]["text-generator"]["time_to_ready_s"] is None
    assert any(p.startswith("text-generator") for p in data["pending_at_end"])
    assert data["evictions"] == 0
    assert nodes_added(data) == {"cpu": 0, "gpu": 0}


def test_seed1_preemption_evicts_the_minimal_set() -> None:
    data = simulate(1, "preemption")
    assert node_of(data, "text-generator") == ["gpu-0"]
    iris = data["workloads"]["iris-classifier"]
    assert iris["evicted"] == 3
    assert data["evictions"] == 3
    assert iris["ready_at_end"] == 10
    assert iris["min_ready"] == 7  # the victims go before their replacements are up
    assert nodes_added(data) == {"cpu": 0, "gpu": 0}


def test_seed2_none_waits_forever() -> None:
    data = simulate(2, "none")
    assert data["workloads"]["text-generator"]["ready_at_end"] == 0
    assert nodes_added(data) == {"cpu": 0, "gpu": 0}


def test_seed2_preemption_needs_a_cpu_node() -> None:
    data = simulate(2, "preemption")
    assert data["workloads"]["text-generator"]["ready_at_end"] == 1
    assert nodes_added(data) == {"cpu": 1, "gpu": 0}
    iris = data["workloads"]["iris-classifier"]
    assert iris["ready_at_end"] == 15
    assert iris["min_ready"] == 12


def test_seed3_none_buys_the_needless_gpu_node() -> None:
    data = simulate(3, "none")
    assert data["node_groups"]["gpu"]["nodes_added"] == 1
    assert node_of(data, "text-generator") == ["gpu-1"]


def test_seed3_preemption_stops_the_autoscaler_for_the_nominated_pod() -> None:
    data = simulate(3, "preemption")
    assert data["node_groups"]["gpu"]["nodes_added"] == 0
    assert data["evictions"] == 3
    assert node_of(data, "text-generator") == ["gpu-0"]


def test_seed4_none_keeps_the_gpu_node() -> None:
    data = simulate(4, "none")
    assert data["evictions"] == 0
    assert any(p["node"] == "gpu-0" for p in data["pods"])
    assert data["node_groups"]["gpu"]["nodes_at_end"] == 1
    assert data["node_groups"]["gpu"]["nodes_removed"] == 0


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("strategy", ["none", "preemption"])
def test_same_file_and_seed_give_identical_json(n: int, strategy: str) -> None:
    first = cli("simulate", seed(n), "--strategy", strategy, "--seed", "7", "--json")
    second = cli("simulate", seed(n), "--strategy", strategy, "--seed", "7", "--json")
    assert first.exit_code in (0, 3)  # 3: pods still pending at the end (seeds 1 and 2 under none)
    assert (first.exit_code, first.stdout) == (second.exit_code, second.stdout)


def test_result_has_every_key_of_the_contract() -> None:
    data = simulate(1, "preemption")
    assert {
        "scenario",
        "strategy",
        "duration_s",
        "workloads",
        "node_groups",
        "evictions",
        "cost",
        "pending_at_end",
        "pods",
        "events",
    } <= set(data)
    for w in data["workloads"].values():
        assert {
            "priority",
            "desired",
            "ready_at_end",
            "time_to_ready_s",
            "min_ready",
            "unavailable_replica_seconds",
            "evicted",
        } <= set(w)
    for g in data["node_groups"].values():
        assert {"nodes_at_end", "peak_nodes", "nodes_added", "nodes_removed", "node_hours", "cost"} <= set(g)
    for p in data["pods"]:
        assert {"name", "workload", "node", "group", "phase"} <= set(p)
    times = [e["t"] for e in data["events"]]
    assert times == sorted(times)
