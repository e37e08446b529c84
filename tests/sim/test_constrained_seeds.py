"""Issue 19: seed-1 and seed-2 where iris-classifier spreads over two zones (maxSkew 1, DoNotSchedule)
and keeps one replica per node (required anti-affinity on hostname), under evict and migrate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import makeroom.examples
from tests.conftest import cli_json

EXAMPLES = Path(makeroom.examples.__file__).parent
CONSTRAINED = ["constrained-seed-1-relocate.yaml", "constrained-seed-2-wait-for-cpu-node.yaml"]


def simulate(name: str, strategy: str) -> Any:
    return cli_json("simulate", EXAMPLES / name, "--strategy", strategy)


@pytest.mark.parametrize("name", CONSTRAINED)
@pytest.mark.parametrize("strategy", ["evict", "migrate"])
def test_no_victim_pending_and_never_fewer_ready_than_none(name: str, strategy: str) -> None:
    none = simulate(name, "none")
    data = simulate(name, strategy)
    assert data["pending_at_end"] == []  # no moved replica left Pending for want of a place
    iris, iris_none = data["workloads"]["iris-classifier"], none["workloads"]["iris-classifier"]
    assert iris["ready_at_end"] >= iris_none["ready_at_end"]
    assert data["workloads"]["text-generator"]["ready_at_end"] == 1


@pytest.mark.parametrize("name", CONSTRAINED)
@pytest.mark.parametrize("strategy", ["evict", "migrate"])
def test_replicas_end_one_per_node(name: str, strategy: str) -> None:
    data = simulate(name, strategy)
    nodes = [
        p["node"] for p in data["pods"] if p["workload"] == "iris-classifier" and p["phase"] == "Running"
    ]
    assert len(nodes) == len(set(nodes))


def test_plan_sends_the_replica_to_the_free_node_of_its_own_zone() -> None:
    plan = cli_json("plan", EXAMPLES / CONSTRAINED[0])
    # gpu-0 is in zone b: its replica may go to cpu-3 (b), not cpu-0 (a), the first free node
    assert [(m["from_node"], m["to_node"]) for m in plan["moves"]] == [("gpu-0", "cpu-3")]


def test_plan_adds_a_node_in_the_zone_the_spread_allows() -> None:
    plan = cli_json("plan", EXAMPLES / CONSTRAINED[1])
    assert [(m["from_node"], m["to_new_node_group"]) for m in plan["moves"]] == [("gpu-0", "cpu")]


def test_plan_names_the_constraint_that_blocks(tmp_path: Path) -> None:
    raw = yaml.safe_load((EXAMPLES / CONSTRAINED[0]).read_text())
    cpu, gpu = raw["node_groups"]
    cpu.update(zones=["a"])  # every free node is in zone a
    gpu.update(zones=["b"], min=1, max=1, initial=1)
    iris = raw["workloads"][0]
    iris.update(replicas=2, placement={"cpu": 1, "gpu": 1})
    path = tmp_path / "blocked.yaml"
    path.write_text(yaml.safe_dump(raw))
    plan = cli_json("plan", path)
    assert plan["moves"] == []
    (blocked,) = plan["unplaceable"]
    assert blocked["reason"] == "constraint"
    assert "topology spread on topology.kubernetes.io/zone, maxSkew 1" in blocked["blocked_by"]
