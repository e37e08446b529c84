"""Issue 5's acceptance: `makeroom compare` on the seeds with `evict` and `migrate`, through the JSON."""

from __future__ import annotations

from typing import Any

import pytest

from makeroom.scenario import load_scenario
from tests.conftest import cli_json, seed


@pytest.fixture(scope="module")
def runs() -> dict[int, dict[str, Any]]:
    out = {}
    for n in (1, 2, 3):
        data = cli_json("compare", seed(n), "--strategies", "evict,migrate")
        out[n] = data["results"]
    return out


def tg_node(data: Any) -> list[str | None]:
    return [p["node"] for p in data["pods"] if p["workload"] == "text-generator" and p["phase"] == "Running"]


def added(data: Any) -> dict[str, int]:
    return {g: v["nodes_added"] for g, v in data["node_groups"].items()}


def spec_of(n: int) -> Any:
    return load_scenario(seed(n)).spec


def workload(n: int, name: str) -> Any:
    return next(w for w in spec_of(n).workloads if w.name == name)


def test_seed1_migrate(runs: dict[int, dict[str, Any]]) -> None:
    data = runs[1]["migrate"]
    assert tg_node(data) == ["gpu-0"]
    iris = data["workloads"]["iris-classifier"]
    assert iris["min_ready"] == 10
    assert iris["evicted"] == 3
    assert added(data) == {"cpu": 0, "gpu": 0}
    i, t = workload(1, "iris-classifier"), workload(1, "text-generator")
    bound = i.startup_time + i.termination_grace + t.startup_time + 30
    assert data["workloads"]["text-generator"]["time_to_ready_s"] <= bound


def test_seed1_evict(runs: dict[int, dict[str, Any]]) -> None:
    data = runs[1]["evict"]
    assert data["workloads"]["text-generator"]["ready_at_end"] == 1
    assert added(data) == {"cpu": 0, "gpu": 0}
    assert data["workloads"]["iris-classifier"]["min_ready"] >= 9


def test_seed2_migrate(runs: dict[int, dict[str, Any]]) -> None:
    data = runs[2]["migrate"]
    assert data["workloads"]["text-generator"]["ready_at_end"] == 1
    assert added(data) == {"cpu": 1, "gpu": 0}
    iris = data["workloads"]["iris-classifier"]
    assert iris["min_ready"] == 15
    assert iris["ready_at_end"] == 15
    spec = spec_of(2)
    cpu = next(g for g in spec.node_groups if g.name == "cpu")
    i, t = workload(2, "iris-classifier"), workload(2, "text-generator")
    bound = (
        cpu.provision_time
        + 2 * spec.autoscaler.scan_interval
        + i.startup_time
        + i.termination_grace
        + t.startup_time
        + 30
    )
    assert data["workloads"]["text-generator"]["time_to_ready_s"] <= bound


def test_seed2_evict(runs: dict[int, dict[str, Any]]) -> None:
    data = runs[2]["evict"]
    assert data["workloads"]["text-generator"]["ready_at_end"] == 1
    assert data["workloads"]["iris-classifier"]["min_ready"] >= 14
    assert added(data) == {"cpu": 1, "gpu": 0}


@pytest.mark.parametrize("strategy", ["evict", "migrate"])
def test_seed3_no_needless_gpu_node(runs: dict[int, dict[str, Any]], strategy: str) -> None:
    data = runs[3][strategy]
    assert data["node_groups"]["gpu"]["nodes_added"] == 0
    assert tg_node(data) == ["gpu-0"]


def test_demo_shows_all_four_strategies(tmp_path: Any) -> None:
    data = cli_json("demo", "--report", tmp_path / "demo.html")
    assert len(data) == 4
    for comparison in data:
        assert comparison["strategies"] == ["none", "preemption", "evict", "migrate"]
    assert (tmp_path / "demo.html").stat().st_size > 10_000
