"""Karpenter's NodePools and NodeClaims in a dump: node groups with what a NodePool says, instance types
from the groups file or the pool's own nodes, NodeClaims still coming up as upcoming nodes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from makeroom.errors import InputError
from makeroom.model import AutoscalerKind, ConsolidationPolicy, Resources
from makeroom.scenario import parse_scenario
from makeroom.snapshot import parse_group_config, state_from_objects
from makeroom.snapshot.nodepools import PRICE_LABEL, UNLIMITED, nodepool_object, parse_pool
from tests.builders.kube import node, pod
from tests.builders.scenario import example
from tests.conftest import cli

GIB = 2**30 * 1000


def nodepool(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"template": {"metadata": {"labels": {}}, "spec": {"requirements": []}}}
    body.update(spec)
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": body}


def pool_node(name: str, pool: str, itype: str, cpu: str = "4", price: str | None = None) -> dict[str, Any]:
    n = node(name, cpu=cpu)
    labels = {"karpenter.sh/nodepool": pool, "node.kubernetes.io/instance-type": itype}
    if price is not None:
        labels[PRICE_LABEL] = price
    n["metadata"]["labels"] = labels
    return n


def nodeclaim(
    name: str, pool: str, itype: str, node_name: str | None = None, cpu: str = "8"
) -> dict[str, Any]:
    status: dict[str, Any] = {"allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"}}
    if node_name:
        status["nodeName"] = node_name
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {"karpenter.sh/nodepool": pool, "node.kubernetes.io/instance-type": itype},
        },
        "spec": {"requirements": [], "nodeClassRef": {"name": "default"}},
        "status": status,
    }


def test_a_nodepool_becomes_a_group_with_what_it_says() -> None:
    gpu = nodepool(
        "gpu",
        weight=20,
        limits={"cpu": "64", "nvidia.com/gpu": "4", "nodes": "3"},
        disruption={
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": "5m",
            "budgets": [{"nodes": "1"}],
        },
    )
    gpu["spec"]["template"] = {
        "metadata": {"labels": {"accelerator": "a10"}},
        "spec": {
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
            ],
        },
    }
    state = state_from_objects([gpu, pool_node("g-1", "gpu", "g5.xlarge", price="1.0")])
    g = state.groups["gpu"]
    assert state.autoscaler is AutoscalerKind.KARPENTER
    assert (g.weight, g.min, g.max) == (20, 0, 3)
    assert g.limits == Resources({"cpu": 64000, "nvidia.com/gpu": 4000})
    assert g.labels == {"accelerator": "a10"}
    assert [t.key for t in g.taints] == ["nvidia.com/gpu"]
    assert g.requirements[0].values == ("on-demand",)
    assert g.disruption.policy is ConsolidationPolicy.WHEN_EMPTY
    assert g.disruption.consolidate_after == 300.0
    assert [b.nodes for b in g.disruption.budgets] == [1]
    assert [(it.name, it.price_per_hour) for it in g.types()] == [("g5.xlarge", 1.0)]


def test_a_cluster_without_nodepools_runs_the_cluster_autoscaler() -> None:
    groups = parse_group_config({"groups": [{"name": "cpu", "min": 0, "max": 2}]}, "groups.yaml")
    state = state_from_objects([node("n1")], groups)
    assert state.autoscaler is AutoscalerKind.CLUSTER_AUTOSCALER


def test_a_pool_without_a_node_limit_is_unbounded_by_count() -> None:
    state = state_from_objects([nodepool("cpu"), pool_node("c-1", "cpu", "m5.xlarge")])
    assert state.groups["cpu"].max == UNLIMITED


def test_types_come_from_the_groups_file_and_the_requirements_filter_them() -> None:
    pool = nodepool("cpu")
    pool["spec"]["template"]["spec"]["requirements"] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.xlarge", "m5.2xlarge"]}
    ]
    groups = parse_group_config(
        {
            "groups": [
                {
                    "name": "cpu",
                    "instance_types": [
                        {
                            "name": "m5.2xlarge",
                            "capacity": {"cpu": "8", "memory": "32Gi"},
                            "price_per_hour": 0.38,
                        },
                        {
                            "name": "m5.xlarge",
                            "capacity": {"cpu": "4", "memory": "16Gi"},
                            "price_per_hour": 0.19,
                        },
                        {
                            "name": "c5.large",
                            "capacity": {"cpu": "2", "memory": "4Gi"},
                            "price_per_hour": 0.08,
                        },
                    ],
                }
            ]
        },
        "groups.yaml",
    )
    state = state_from_objects([pool], groups)
    assert [it.name for it in state.groups["cpu"].types()] == ["m5.2xlarge", "m5.xlarge"]


def test_types_are_learnt_from_the_pools_nodes_and_nodeclaims() -> None:
    objects = [
        nodepool("cpu"),
        pool_node("c-1", "cpu", "small", cpu="2", price="0.1"),
        nodeclaim("cpu-abc", "cpu", "big", cpu="8"),
    ]
    groups = parse_group_config({"groups": [{"name": "cpu", "price_per_hour": 0.3}]}, "groups.yaml")
    learnt = state_from_objects(objects).groups["cpu"].types()
    assert [(it.name, it.price_per_hour) for it in learnt] == [("big", 0.0), ("small", 0.1)]
    priced = state_from_objects(objects, groups).groups["cpu"].types()
    assert {it.price_per_hour for it in priced} == {0.3}


def test_a_nodeclaim_still_coming_up_is_an_upcoming_node_of_its_pool() -> None:
    objects = [
        nodepool("cpu", limits={"nodes": "2"}),
        pool_node("c-1", "cpu", "m5.xlarge"),
        nodeclaim("cpu-registered", "cpu", "m5.xlarge", node_name="c-1"),
        nodeclaim("cpu-new", "cpu", "m5.2xlarge"),
        pod("waiting", None, cpu="6"),
    ]
    state = state_from_objects(objects)
    assert set(state.nodes) == {"c-1", "cpu-new"}
    coming = state.nodes["cpu-new"]
    assert (coming.group, coming.ready, coming.allocatable["cpu"]) == ("cpu", False, 8000)
    assert len(state.nodes_of("cpu")) == 2  # the claim counts against the pool's node limit


def test_a_nodepool_nothing_is_known_of_is_refused_with_the_way_out() -> None:
    with pytest.raises(InputError) as err:
        state_from_objects([nodepool("gpu")], source="dump.yaml")
    (line,) = err.value.lines()
    assert "NodePool 'gpu'" in line and "--groups" in line and "instance_types" in line


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"weight": 0}, "items[0].spec.weight"),
        ({"limits": {"cpu": "lots"}}, "items[0].spec.limits.cpu"),
        ({"disruption": {"consolidateAfter": "soon"}}, "items[0].spec.disruption.consolidateAfter"),
        ({"disruption": {"budgets": [{"nodes": "ten"}]}}, "items[0].spec.disruption.budgets[0].nodes"),
    ],
)
def test_a_broken_nodepool_is_refused_with_its_key_path(spec: dict[str, Any], path: str) -> None:
    with pytest.raises(InputError) as err:
        state_from_objects([nodepool("cpu", **spec), pool_node("c-1", "cpu", "m5.xlarge")], source="d.yaml")
    assert any(line.startswith(f"d.yaml: {path}: ") for line in err.value.lines()), err.value.lines()


def test_a_broken_requirement_is_refused_with_its_key_path() -> None:
    pool = nodepool("cpu")
    pool["spec"]["template"]["spec"]["requirements"] = [{"key": "x", "operator": "Equals", "values": ["a"]}]
    with pytest.raises(InputError) as err:
        state_from_objects([pool, pool_node("c-1", "cpu", "m5.xlarge")], source="d.yaml")
    assert any("items[0].spec.template.spec.requirements[0].operator" in line for line in err.value.lines())


def test_the_nodepool_a_group_describes_reads_back_as_the_group() -> None:
    scenario = parse_scenario(yaml.safe_load(example("karpenter-seed-2").read_text()), "k.yaml")
    problems: list[Any] = []
    for group in scenario.groups:
        obj = nodepool_object(
            group, {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
        )
        pool = parse_pool(obj, "x", problems)
        assert pool is not None and not problems
        assert (pool.name, pool.weight, pool.nodes, pool.limits) == (
            group.name,
            group.weight,
            group.max,
            group.limits,
        )
        assert pool.disruption == group.disruption
        assert pool.labels == {**group.labels, "makeroom.io/group": group.name}
        (types,) = [r for r in pool.requirements if r.key == "node.kubernetes.io/instance-type"]
        assert types.values == tuple(it.name for it in group.types())


def test_plan_on_a_dump_follows_what_karpenter_would_launch(tmp_path: Path) -> None:
    """A user's `makeroom plan` on a snapshot of a Karpenter cluster: the pending pod would get a node
    of the heaviest pool that admits it, not of the cheapest."""
    objects = [
        nodepool("reserved", weight=50),
        nodepool("spot", weight=10),
        pool_node("r-1", "reserved", "r.xlarge"),
        pool_node("s-1", "spot", "s.xlarge"),
        pod("filler-1", "r-1", cpu="4"),
        pod("filler-2", "s-1", cpu="4"),
        pod("waiting", None, cpu="2"),
    ]
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}))
    groups = tmp_path / "groups.yaml"
    groups.write_text(
        yaml.safe_dump(
            {
                "groups": [
                    {
                        "name": "reserved",
                        "instance_types": [
                            {
                                "name": "r.xlarge",
                                "capacity": {"cpu": "4", "memory": "16Gi"},
                                "price_per_hour": 0.9,
                            }
                        ],
                    },
                    {
                        "name": "spot",
                        "instance_types": [
                            {
                                "name": "s.xlarge",
                                "capacity": {"cpu": "4", "memory": "16Gi"},
                                "price_per_hour": 0.2,
                            }
                        ],
                    },
                ]
            }
        )
    )
    result = cli("plan", dump, "--groups", groups, "--json")
    assert result.exit_code in (0, 3), result.output
    data = json.loads(result.stdout)
    assert data["scale_ups"] == {"reserved": 1}
    (placement,) = data["placements"]
    assert placement["new_node_group"] == "reserved"


def test_the_groups_file_gives_a_pool_makeroom_s_own_floor() -> None:
    groups = parse_group_config({"groups": [{"name": "gpu", "min": 1}]}, "groups.yaml")
    state = state_from_objects([nodepool("gpu"), pool_node("g-1", "gpu", "g5.xlarge")], groups)
    assert state.groups["gpu"].min == 1
    assert state_from_objects([nodepool("gpu"), pool_node("g-1", "gpu", "g5.xlarge")]).groups["gpu"].min == 0
