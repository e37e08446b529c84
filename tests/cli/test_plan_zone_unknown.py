"""A group whose nodes are in several zones and whose template gives a new node none: a plan that
needs such a node under a constraint by zone is not made, and `makeroom plan` says which constraint
needs it and that the zone is unknown (issue 19)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from makeroom.model import ZONE_LABEL
from tests.builders.kube import node, pod
from tests.conftest import cli, cli_json

SPREAD = {
    "maxSkew": 1,
    "topologyKey": ZONE_LABEL,
    "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {"matchLabels": {"app": "web"}},
}


def dump(tmp_path: Path, spread: bool = True) -> Path:
    nodes = [node("cpu-0"), node("cpu-1")]
    for n, zone in zip(nodes, ("a", "b"), strict=True):
        n["metadata"]["labels"][ZONE_LABEL] = zone
    # Full nodes whose pods are not lower in priority than the waiting one: nothing may move for it.
    full = [pod(f"busy-{i}", f"cpu-{i}", cpu="3500m", priority=1000) for i in range(2)]
    waiting = pod("web-new", None, cpu="1", priority=1000)
    if spread:
        waiting["spec"]["topologySpreadConstraints"] = [SPREAD]
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [*nodes, *full, waiting]}))
    return path


def groups(tmp_path: Path, **extra: Any) -> Path:
    path = tmp_path / "groups.yaml"
    group = {"name": "cpu", "min": 2, "max": 5, "price_per_hour": 0.1, **extra}
    path.write_text(yaml.safe_dump({"groups": [group]}))
    return path


def test_plan_names_the_constraint_and_the_missing_zone(tmp_path: Path) -> None:
    plan = cli_json("plan", dump(tmp_path), "--groups", groups(tmp_path))
    (blocked,) = plan["unplaceable"]
    assert blocked["reason"] == "zone-unknown"
    assert blocked["blocked_by"] == (
        f"topology spread on {ZONE_LABEL}, maxSkew 1 needs a new cpu node, whose zone is unknown: "
        f"the group's nodes are in zones a, b and its template gives no {ZONE_LABEL}"
    )
    table = cli("plan", dump(tmp_path), "--groups", groups(tmp_path))
    assert "whose zone is unknown" in table.stdout


def test_a_template_with_a_zone_gives_the_pod_its_new_node(tmp_path: Path) -> None:
    zoned = groups(tmp_path, labels={ZONE_LABEL: "a"})
    plan = cli_json("plan", dump(tmp_path), "--groups", zoned)
    assert plan["unplaceable"] == []
    assert [p["new_node_group"] for p in plan["placements"]] == ["cpu"]


def test_a_pod_without_a_constraint_by_zone_gets_the_new_node_anyway(tmp_path: Path) -> None:
    plan = cli_json("plan", dump(tmp_path, spread=False), "--groups", groups(tmp_path))
    assert plan["unplaceable"] == []
    assert [p["new_node_group"] for p in plan["placements"]] == ["cpu"]


def test_a_pod_that_would_move_is_named_when_its_zone_spread_needs_the_new_node(tmp_path: Path) -> None:
    """The GPU pod needs gpu-0, where a lower-priority replica spread by zone runs; the CPU nodes are
    full, so the replica's only place is a new CPU node, whose zone is unknown."""
    nodes = [node("cpu-0"), node("cpu-1"), node("gpu-0", group="gpu")]
    for n, zone in zip(nodes, ("a", "b", "a"), strict=True):
        n["metadata"]["labels"][ZONE_LABEL] = zone
    nodes[2]["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    busy = [pod(f"busy-{i}", f"cpu-{i}", cpu="3500m", priority=1000) for i in range(2)]
    iris = pod("iris-1", "gpu-0", cpu="3", priority=100)
    iris["metadata"]["labels"] = {"app": "iris", "pod-template-hash": "h2"}
    iris["spec"]["topologySpreadConstraints"] = [
        {**SPREAD, "labelSelector": {"matchLabels": {"app": "iris"}}}
    ]
    llm = pod("llm-new", None, cpu="3", priority=1000)
    llm["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [*nodes, *busy, iris, llm]}))
    groups = tmp_path / "groups.yaml"
    groups.write_text(
        yaml.safe_dump(
            {
                "groups": [
                    {"name": "cpu", "min": 2, "max": 5, "price_per_hour": 0.1},
                    {"name": "gpu", "min": 1, "max": 1, "price_per_hour": 0.5},
                ]
            }
        )
    )
    plan = cli_json("plan", path, "--groups", groups, "--strategy", "evict")
    assert plan["moves"] == []
    (blocked,) = plan["unplaceable"]
    assert blocked["reason"] == "zone-unknown"
    assert blocked["blocked_by"].startswith(
        f"iris-1 (which would move for it): topology spread on {ZONE_LABEL}, maxSkew 1 needs a new cpu node"
    )
