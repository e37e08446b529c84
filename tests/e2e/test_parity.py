"""Parity: every seed under every strategy ends on the real components (kube-scheduler, the
cluster-autoscaler with its kwok provider, and `makeroom run` as the Helm chart's ServiceAccount for
evict and migrate) with the same outcome as in the simulator (e2e/README.md, "Fidelity").

Each case runs `makeroom simulate` and the real control plane, and asserts the outcome columns of the
parity table equal: running pods per workload and group, pods removed, nodes added and removed per
group, the group the high-priority pod runs on, and the fewest Ready replicas of each workload. The
promises of issue 1966/1965 are then asserted on the real run by name.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from makeroom_e2e import ControlPlane, read_scenario
from makeroom_e2e.binaries import cache_root
from makeroom_e2e.makeroom_run import seed_file
from makeroom_e2e.parity import CONSTRAINED_SEEDS, HEADROOM_CASES, SEEDS, Case, run_case, table, to_json
from makeroom_e2e.scenario import STRATEGIES

pytestmark = pytest.mark.e2e

CASES = [(seed, strategy) for seed in SEEDS for strategy in STRATEGIES if strategy != "headroom"]


def _report(case: Case) -> str:
    return table([case]) + "\n" + json.dumps(case.real.extra, default=str)


@pytest.mark.parametrize(("seed", "strategy"), CASES, ids=[f"seed-{s}-{st}" for s, st in CASES])
def test_seed_ends_on_the_real_components_as_in_the_simulator(
    cp: ControlPlane, tmp_path: Path, seed: int, strategy: str
) -> None:
    case = run_case(cp, seed, strategy, tmp_path)
    print(_report(case))
    # Each case's row and data also go to the cache's logs (the table of e2e/README.md is made of them).
    out = cache_root() / "logs" / "parity"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"seed-{seed}-{strategy}.json").write_text(json.dumps(to_json([case]), indent=1, default=str))
    real, sim = case.real, case.simulator
    assert real.extra["settled"], "the real world was still changing: " + _report(case)
    assert case.differences() == {}, _report(case)

    # The claims by name, on the real run.
    added, removed = real.nodes_added, real.nodes_removed
    maxima = {g.name: g.max for g in read_scenario(seed_file(seed)).node_groups}
    for group, peak in real.extra["peak_nodes"].items():
        assert peak <= maxima[group], f"{group}: {peak} nodes at once, its max is {maxima[group]}"
    if seed == 3 and strategy == "none":
        # The status quo buys the second GPU node, and text-generator runs there (not on gpu-0).
        assert added["gpu"] == 1 and real.high_priority_node_group == "gpu"
        assert real.extra["high_priority_node"] != "gpu-0"
    if seed in (1, 3) and strategy != "none":
        assert added == {"cpu": 0, "gpu": 0}, "room is made on gpu-0: no node bought"
        assert real.extra["high_priority_node"] == "gpu-0"
    if seed == 2 and strategy != "none":
        # One CPU node for the replicas that leave gpu-0, no GPU node, text-generator on gpu-0.
        assert added == {"cpu": 1, "gpu": 0}
        assert real.extra["high_priority_node"] == "gpu-0"
    if seed in (1, 2) and strategy == "none":
        assert real.high_priority_node_group is None, "without preemption or makeroom it waits"
    if strategy == "migrate":
        # Make-before-break: iris never runs fewer Ready replicas than it wants.
        assert (
            real.min_ready["iris-classifier"]
            == sim.min_ready["iris-classifier"]
            == (15 if seed in (2, 4) else 10)
        )
    if seed == 4:
        if strategy in ("evict", "migrate"):
            # Consolidation: gpu-0 emptied onto a CPU node the autoscaler adds; the autoscaler removes gpu-0.
            assert added == {"cpu": 1, "gpu": 0} and removed == {"cpu": 0, "gpu": 1}
            assert real.placements == {"iris-classifier": {"cpu": 15}}
        else:
            assert added == removed == {"cpu": 0, "gpu": 0}
    mr = real.extra.get("makeroom")
    if strategy in ("evict", "migrate"):
        assert mr is not None and mr["alive"], "makeroom run exited"
        assert not mr["forbidden"], f"a permission the chart lacks: {mr['forbidden']}"
        assert not mr["leftovers"], f"makeroom left: {mr['leftovers']}"
        if seed != 4:
            assert mr["relocations_done"] >= 1, "makeroom relocated"


CONSTRAINED_CASES = [
    (seed, strategy) for seed in CONSTRAINED_SEEDS for strategy in ("none", "evict", "migrate")
]


@pytest.mark.parametrize(
    ("seed", "strategy"), CONSTRAINED_CASES, ids=[f"{s}-{st}" for s, st in CONSTRAINED_CASES]
)
def test_constrained_seed_ends_on_the_real_components_as_in_the_simulator(
    cp: ControlPlane, tmp_path: Path, seed: str, strategy: str
) -> None:
    """Issue 19: iris-classifier spreads over two zones (maxSkew 1, DoNotSchedule) and keeps one
    replica per node (required anti-affinity on hostname); the real scheduler and autoscaler agree."""
    case = run_case(cp, seed, strategy, tmp_path)
    print(_report(case))
    out = cache_root() / "logs" / "parity"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{seed}-{strategy}.json").write_text(json.dumps(to_json([case]), indent=1, default=str))
    real = case.real
    assert real.extra["settled"], "the real world was still changing: " + _report(case)
    assert case.differences() == {}, _report(case)
    sc = read_scenario(seed_file(seed))
    replicas = next(w.replicas for w in sc.workloads if w.name == "iris-classifier")
    iris_nodes = real.extra["running_nodes"]["iris-classifier"]
    assert len(iris_nodes) == len(set(iris_nodes)), "two iris replicas on one node"
    if strategy == "none":
        # The baseline: nothing moves, text-generator waits, iris keeps every replica Ready.
        assert real.high_priority_node_group is None
        assert real.min_ready["iris-classifier"] == replicas
        return
    # No victim Pending for want of a place; never fewer Ready replicas than under none.
    assert real.extra["pending_at_end"] == [], _report(case)
    assert real.extra["ready_at_end"]["iris-classifier"] == replicas
    assert real.high_priority_node_group == "gpu"
    added = {"constrained-seed-1": {"cpu": 0, "gpu": 0}, "constrained-seed-2": {"cpu": 1, "gpu": 0}}
    assert real.nodes_added == added[seed]
    if strategy == "migrate":  # make-before-break: iris never below what it wants
        assert real.min_ready["iris-classifier"] == replicas
    else:  # evict: one replica at a time, as its PDB allows
        assert real.min_ready["iris-classifier"] == replicas - 1
    mr = real.extra["makeroom"]
    assert mr["alive"] and not mr["forbidden"] and not mr["leftovers"], mr
    assert mr["relocations_done"] >= 1


@pytest.mark.parametrize(
    ("seed", "strategy"), HEADROOM_CASES, ids=[f"{seed_file(s).stem}-{st}" for s, st in HEADROOM_CASES]
)
def test_headroom_ends_on_the_real_components_as_in_the_simulator(
    cp: ControlPlane, tmp_path: Path, seed: int | str, strategy: str
) -> None:
    """Issue 24 item 5: `makeroom run --strategy headroom` (as the chart's ServiceAccount, the
    scenario's targets as --headroom-target flags) with the real scheduler and cluster-autoscaler ends
    as in the simulator: the outcome columns, and the GPU replica Ready at the simulator's time (its
    own startup: the room was kept before it came) within 10%, issue 24's goal. The keeper, not the
    cure, made that room: no relocation started."""
    case = run_case(cp, seed, strategy, tmp_path)
    print(_report(case))
    out = cache_root() / "logs" / "parity"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{seed_file(seed).stem}-{strategy}.json").write_text(
        json.dumps(to_json([case]), indent=1, default=str)
    )
    real = case.real
    assert real.extra["settled"], "the real world was still changing: " + _report(case)
    assert case.differences() == {}, _report(case)
    maxima = {g.name: g.max for g in read_scenario(seed_file(seed)).node_groups}
    for group, peak in real.extra["peak_nodes"].items():
        assert peak <= maxima[group], f"{group}: {peak} nodes at once, its max is {maxima[group]}"
    assert real.high_priority is not None
    assert set(real.placements[real.high_priority]) == {"gpu"}, "the GPU workload runs on GPU nodes"
    mr = real.extra["makeroom"]
    assert mr["alive"] and not mr["forbidden"], mr
    sim_ready, real_ready = case.simulator.time_to_ready_s, real.time_to_ready_s
    assert sim_ready is not None and real_ready is not None, _report(case)
    assert abs(real_ready - sim_ready) <= 0.1 * sim_ready, _report(case)
    assert mr["relocations_started"] == 0, "the cure made the room, not the keeper: " + _report(case)
    # The room's PreferNoSchedule taint stays on the nodes holding it, by design; nothing else.
    assert [x for x in mr["leftovers"] if "makeroom.io/headroom" not in x] == [], mr
