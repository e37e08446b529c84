"""The Karpenter variants of the seeds (src/makeroom/examples/karpenter-seed-*.yaml), through the CLI's
JSON: what Karpenter alone does, and what makeroom does next to it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from makeroom.scenario import parse_scenario
from makeroom.sim import Options, Simulation
from tests.builders.scenario import EXAMPLES, kinds
from tests.conftest import cli_json

RELOCATING = ("evict", "migrate")


def variant(n: int) -> Path:
    (path,) = EXAMPLES.glob(f"karpenter-seed-{n}-*.yaml")
    return path


def simulate(n: int, strategy: str) -> Any:
    return cli_json("simulate", variant(n), "--strategy", strategy)


def nodes_added(data: Any) -> dict[str, int]:
    return {g: v["nodes_added"] for g, v in data["node_groups"].items()}


def launched(data: Any) -> list[tuple[str, str]]:
    return [(e["group"], e["instance_type"]) for e in data["events"] if e["kind"] == "scale_up"]


def test_each_variant_says_it_runs_karpenter() -> None:
    for n in (1, 2, 3, 4):
        data = simulate(n, "none")
        assert data["autoscaler"] == "karpenter"
        assert data["scenario"] == f"karpenter-{variant(n).stem.removeprefix('karpenter-')}"


def test_seed1_karpenter_alone_cannot_help() -> None:
    data = simulate(1, "none")
    assert data["workloads"]["text-generator"]["ready_at_end"] == 0
    assert nodes_added(data) == {"cpu": 0, "gpu": 0}
    assert any(e["kind"] == "no_scale_up" for e in data["events"])


@pytest.mark.parametrize("strategy", RELOCATING)
def test_seed1_makeroom_makes_room_without_a_node(strategy: str) -> None:
    data = simulate(1, strategy)
    assert data["workloads"]["text-generator"]["ready_at_end"] == 1
    assert nodes_added(data) == {"cpu": 0, "gpu": 0}
    assert data["workloads"]["iris-classifier"]["ready_at_end"] == 10


def test_seed2_karpenter_alone_cannot_help() -> None:
    data = simulate(2, "none")
    assert data["workloads"]["text-generator"]["ready_at_end"] == 0
    assert launched(data) == []


@pytest.mark.parametrize("strategy", RELOCATING)
def test_seed2_makeroom_has_karpenter_launch_the_cheapest_cpu_node(strategy: str) -> None:
    data = simulate(2, strategy)
    assert data["workloads"]["text-generator"]["ready_at_end"] == 1
    assert launched(data) == [("cpu", "cpu-4x")]  # the cheaper of the pool's two types holds them
    assert data["workloads"]["iris-classifier"]["ready_at_end"] == 15
    if strategy == "migrate":
        assert data["workloads"]["iris-classifier"]["min_ready"] == 15


def test_seed2_without_the_reservation_taint_karpenter_counts_the_held_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Karpenter does not see a nomination's hold: it places the moved replicas in the room held for
    the text-generator, launches nothing, and the relocation waits until it gives up."""
    from makeroom.sim.port import SimCluster

    monkeypatch.setattr(SimCluster, "_reserve", lambda self, pod, node: None)
    data = simulate(2, "migrate")
    assert launched(data) == []
    assert data["workloads"]["text-generator"]["ready_at_end"] == 0


def test_seed3_karpenter_alone_buys_the_needless_gpu_node() -> None:
    data = simulate(3, "none")
    assert launched(data) == [("gpu", "gpu-1x")]
    assert data["workloads"]["text-generator"]["ready_at_end"] == 1


@pytest.mark.parametrize("strategy", RELOCATING)
def test_seed3_makeroom_buys_no_gpu_nodeclaim(strategy: str) -> None:
    data = simulate(3, strategy)
    assert launched(data) == []
    assert nodes_added(data) == {"cpu": 0, "gpu": 0}
    assert data["workloads"]["text-generator"]["ready_at_end"] == 1
    assert data["cost"] < simulate(3, "none")["cost"]


def test_seed3_makeroom_loses_the_race_if_it_reacts_after_the_batch_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from makeroom.sim import runs

    monkeypatch.setattr(runs, "REACTION", 1.5)  # after Karpenter's 1 s idle batch window
    data = simulate(3, "migrate")
    assert ("gpu", "gpu-1x") in launched(data)


def test_seed4_karpenter_alone_keeps_the_gpu_node() -> None:
    data = simulate(4, "none")
    assert data["node_groups"]["gpu"]["nodes_at_end"] == 1
    assert data["node_groups"]["gpu"]["nodes_removed"] == 0


@pytest.mark.parametrize("strategy", RELOCATING)
def test_seed4_makeroom_ends_with_the_preferred_pool(strategy: str) -> None:
    data = simulate(4, strategy)
    assert data["node_groups"]["gpu"]["nodes_at_end"] == 0
    assert data["node_groups"]["cpu"]["nodes_at_end"] == 2
    assert launched(data) == [("cpu", "cpu-4x")]
    assert {p["group"] for p in data["pods"]} == {"cpu"}
    assert data["cost"] < simulate(4, "none")["cost"]
    if strategy == "migrate":
        assert data["workloads"]["iris-classifier"]["min_ready"] == 15


def _with_policy(n: int, pools: tuple[str, ...], policy: str) -> Any:
    data = yaml.safe_load(variant(n).read_text())
    for g in data["node_groups"]:
        if g["name"] in pools:
            g["disruption"] = {"consolidation_policy": policy}
    return parse_scenario(data, "variant.yaml")


def test_seed1_with_underutilized_consolidation_packs_cpu_pods_onto_the_gpu_node() -> None:
    """What the variants' WhenEmpty avoids: Karpenter consolidates by price alone, and deletes the
    CPU node because its replicas fit in the GPU node's free room."""
    s = _with_policy(1, ("cpu", "gpu"), "WhenEmptyOrUnderutilized")
    result = Simulation(s, Options()).run()
    (down,) = kinds(result, "scale_down")
    assert down["node"] == "cpu-0" and down["reason"] == "Underutilized"
    assert {p.group for p in result.pods if p.workload == "iris-classifier"} == {"gpu"}


def test_seed4_with_underutilized_consolidation_karpenter_replaces_the_gpu_node_itself() -> None:
    s = _with_policy(4, ("gpu",), "WhenEmptyOrUnderutilized")
    result = Simulation(s, Options()).run()
    up = kinds(result, "scale_up")
    assert [(e["group"], e["reason"]) for e in up] == [("cpu", "Underutilized")]
    assert result.node_groups["gpu"].nodes_at_end == 0


def test_headroom_burst_under_karpenter_is_ready_at_its_startup_with_no_node_launched() -> None:
    """The burst seed's Karpenter variant (tests/e2e/test_karpenter.py runs it on real Karpenter): the
    keeper frees the room before the burst, both replicas are Ready after their 90 s startup, no API
    replica is lost and Karpenter launches nothing; the cures start only once the burst waits."""
    (path,) = EXAMPLES.glob("karpenter-headroom-seed-5-*.yaml")
    results = cli_json("compare", path, "--json")["results"]
    headroom = results["headroom/karpenter"]
    assert headroom["autoscaler"] == "karpenter"
    assert headroom["workloads"]["text-model"]["ready_at_end"] == 2
    assert headroom["workloads"]["text-model"]["time_to_ready_s"] <= 1.1 * 90
    assert headroom["workloads"]["api"]["min_ready"] == 8
    assert launched(headroom) == []
    kept = [e["t"] for e in headroom["events"] if e["kind"] == "room_kept"]
    assert kept and max(kept) < 300, "the room is kept before the burst at 5m"
    for cure in ("migrate", "evict"):
        assert results[f"{cure}/karpenter"]["workloads"]["text-model"]["time_to_ready_s"] > 1.1 * 90, cure


@pytest.mark.parametrize("strategy", ["migrate", "headroom"])
def test_burst_with_a_heavier_gpu_pool_that_may_grow(strategy: str, tmp_path: Path) -> None:
    """The burst seed's Karpenter variant with the gpu pool first (the heavier) and room for a third
    GPU node: Karpenter would launch a moved API replica's node in the gpu pool, so neither the keeper
    nor a relocation counts on a new CPU node for it (the exact search raised a KeyError on the
    pool it could not use); the burst is placed and no API replica is lost."""
    (path,) = EXAMPLES.glob("karpenter-headroom-seed-5-*.yaml")
    data = yaml.safe_load(path.read_text())
    cpu, gpu = data["node_groups"]
    data["node_groups"] = [{**gpu, "max": 3}, cpu]
    api = data["workloads"][0]
    api["replicas"], api["placement"] = 10, {"cpu": 4, "gpu-0": 3, "gpu-1": 3}
    data["controller"]["headroom"]["max_price_per_hour"] = 0.17
    scenario = tmp_path / "heavier-gpu.yaml"
    scenario.write_text(yaml.safe_dump(data))
    result = cli_json("simulate", scenario, "--strategy", strategy)
    assert result["workloads"]["text-model"]["ready_at_end"] == 2
    assert result["workloads"]["api"]["min_ready"] == 10
    # a GPU node only once the burst waits, never for an API replica moved ahead of it
    assert [e["group"] for e in result["events"] if e["kind"] == "scale_up" and e["t"] < 300] == []
