"""Issue 10, item 4: moved replicas never grow the group the pending pod needs.

A moved replica that waits for a new node is helped by the cluster-autoscaler like any pending pod,
and its expander, not makeroom's plan, picks the group. In seed-2 with a GPU group that may grow, a CPU
group and a GPU group of one shape waste the same for an iris replica, and least-waste (the default)
breaks the tie at random: the autoscaler could buy a GPU node for a moved replica. The planner counts
on a new node for moved replicas only where the expander surely picks their group (priority with their
group's priority highest, price with their group scoring lowest: a GPU group never wins a CPU
replica there); otherwise it does not relocate for the pod at all (then the autoscaler buys the
pending pod's node, as without makeroom).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from makeroom.controller import Strategy
from makeroom.examples import __file__ as _examples
from makeroom.model import Expander
from makeroom.model.expander import group_priorities
from makeroom.planner import PlacementReason, Policy, plan
from makeroom.scenario import load_scenario
from makeroom.sim import Options, Simulation
from makeroom.sim.runs import build

SEEDS = range(6)
SEED_2 = Path(_examples).parent / "seed-2-wait-for-cpu-node.yaml"


def _seed2_gpu_may_grow(tmp_path: Path, expander: str) -> Path:
    data: dict[str, Any] = yaml.safe_load(SEED_2.read_text())
    data["node_groups"][1]["max"] = 2
    data["autoscaler"] = {"expander": expander}
    path = tmp_path / f"seed-2-gpu-may-grow-{expander}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _state_when_text_generator_waits(path: Path) -> Any:
    sim = Simulation(
        load_scenario(path), Options(strategy=Strategy.NONE, keep_events=False, keep_samples=False)
    )
    sim.run(until=61)
    return sim.world.state


SEARCHES = {  # (exact, joint): every search follows the rule (planner/buying.py)
    "heuristic+joint": (False, True),
    "heuristic": (False, False),
    "exact-joint": (True, True),
    "exact-per-pod": (True, False),
}


@pytest.mark.parametrize("search", list(SEARCHES))
@pytest.mark.parametrize(
    ("expander", "relocates"),
    [("least-waste", False), ("random", False), ("priority", True), ("price", True)],
)
def test_planner_counts_on_a_new_cpu_node_for_moved_replicas_only_where_the_expander_picks_it(
    tmp_path: Path, expander: str, relocates: bool, search: str
) -> None:
    exact, joint = SEARCHES[search]
    if exact and joint:
        pytest.importorskip("ortools")
    state = _state_when_text_generator_waits(_seed2_gpu_may_grow(tmp_path, expander))
    result = plan(state, Policy(expander=Expander(expander), exact=exact, joint=joint))
    (placement,) = result.placements
    if relocates:
        assert placement.reason is PlacementReason.RELOCATION and placement.node == "gpu-0"
        assert {m.to_new_node_group for m in result.moves} == {"cpu"}
    else:
        # What the autoscaler would buy for it anyway: nothing is moved.
        assert placement.reason is not PlacementReason.RELOCATION and not result.moves
        assert placement.new_node_group == "gpu"


@pytest.mark.parametrize("strategy", ["evict", "migrate"])
@pytest.mark.parametrize("expander", ["least-waste", "priority", "price"])
def test_moved_replicas_never_grow_the_gpu_group(tmp_path: Path, expander: str, strategy: str) -> None:
    path = _seed2_gpu_may_grow(tmp_path, expander)
    for seed in SEEDS:  # least-waste's ties are broken by the seeded random choice
        sim = build(load_scenario(path), Strategy(strategy), seed=seed)
        result = sim.run().data
        gpu_scale_ups = [e for e in result["events"] if e["kind"] == "scale_up" and e["group"] == "gpu"]
        for e in gpu_scale_ups:
            assert e["pods"] == ["text-generator-0"], f"seed {seed}: a GPU node for {e['pods']}"
        tg = [p["node"] for p in result["pods"] if p["workload"] == "text-generator"]
        if expander in ("priority", "price"):
            assert not gpu_scale_ups and tg == ["gpu-0"], f"seed {seed}: relocated onto gpu-0"
        else:
            assert len(gpu_scale_ups) == 1 and tg == ["gpu-1"], f"seed {seed}: as without makeroom"


def test_a_node_coming_up_tainted_not_ready_still_takes_the_pending_pod(tmp_path: Path) -> None:
    """On the real control plane makeroom waited (least-waste), the autoscaler bought text-generator's
    GPU node after its 30 s wait, and then makeroom relocated anyway: the new node registers tainted
    node.kubernetes.io/not-ready, as a kubelet does, and the planner took it for a node the pod may
    not use. Condition taints of a node coming up do not count."""
    from makeroom.model import Taint, TaintEffect

    sim = Simulation(
        load_scenario(_seed2_gpu_may_grow(tmp_path, "priority")),
        Options(strategy=Strategy.NONE, keep_events=False, keep_samples=False),
    )
    sim.run(until=95)  # the autoscaler bought gpu-1 for text-generator at 90 s; it is coming up
    assert "gpu-1" in sim.world.state.nodes and not sim.world.state.nodes["gpu-1"].ready
    sim.world.set_taints("gpu-1", (Taint("node.kubernetes.io/not-ready", "", TaintEffect.NO_SCHEDULE),))
    result = plan(sim.world.state, Policy(expander=Expander.PRIORITY))
    (placement,) = result.placements
    assert placement.node == "gpu-1" and not result.moves


@pytest.mark.parametrize(
    ("rules", "relocates"),
    [
        ({10: ["cpu"], 5: ["gpu"]}, True),  # the CPU group above: a CPU node for the moved replicas
        ({10: ["gpu"], 5: ["cpu"]}, False),  # the GPU group above: it would grow for them
        ({10: ["cpu", "gpu"]}, False),  # a tie goes either way
        ({10: ["^g"]}, False),  # the CPU group unmatched: passed over while the GPU group matches
        ({10: ["c.u"]}, True),  # the GPU group unmatched: the CPU group wins
    ],
)
def test_the_priority_expander_s_configured_priorities_decide(
    tmp_path: Path, rules: dict[int, list[str]], relocates: bool
) -> None:
    """On a live cluster the priorities are the cluster-autoscaler-priority-expander ConfigMap's,
    not the groups' order (regular expressions found in the name, highest priority wins)."""
    state = _state_when_text_generator_waits(_seed2_gpu_may_grow(tmp_path, "priority"))
    state.expander_priorities = group_priorities(rules, state.groups)
    result = plan(state, Policy(expander=Expander.PRIORITY))
    (placement,) = result.placements
    assert (placement.reason is PlacementReason.RELOCATION) is relocates
    assert placement.new_node_group == (None if relocates else "gpu")
