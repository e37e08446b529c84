"""The pure parts of the Karpenter harness (e2e/makeroom_e2e/karpenter.py): what it writes from a
scenario for the real Karpenter to read. No control plane needed."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from makeroom_e2e import karpenter as kp
from tests.builders.scenario import EXAMPLES

from makeroom.model import InstanceType, NodeGroup, Resources
from makeroom.scenario import parse_scenario


def variant(n: int) -> Any:
    (path,) = EXAMPLES.glob(f"karpenter-seed-{n}-*.yaml")
    return parse_scenario(yaml.safe_load(path.read_text()), str(path))


def test_instance_types_carry_the_providers_overhead_so_allocatable_is_the_scenarios() -> None:
    types = {t["name"]: t for t in kp.instance_types(variant(2).groups)}
    assert set(types) == {"cpu-4x", "cpu-8x", "gpu-1x"}
    gpu = types["gpu-1x"]
    assert gpu["resources"] == {
        "cpu": "4100m",
        "memory": str(16 * 2**30 + 10 * 2**20),
        "pods": "110",
        "nvidia.com/gpu": "1",
    }
    (offering,) = gpu["offerings"]
    assert offering["Price"] == 0.53 and offering["Available"] is True
    assert {r["key"] for r in offering["Requirements"]} == {
        "karpenter.sh/capacity-type",
        "topology.kubernetes.io/zone",
    }


def test_one_type_described_twice_differently_is_refused() -> None:
    a = NodeGroup("a", Resources(), instance_types=(InstanceType("x", Resources({"cpu": 1000}), 0.1),))
    b = NodeGroup("b", Resources(), instance_types=(InstanceType("x", Resources({"cpu": 2000}), 0.1),))
    with pytest.raises(ValueError, match="described twice"):
        kp.instance_types([a, b])


def test_nodepools_hold_disruption_while_the_initial_pods_are_placed() -> None:
    (cpu, _gpu) = variant(1).groups
    held = kp.nodepool(cpu, hold=True)
    assert held["spec"]["disruption"]["budgets"] == [{"nodes": "0"}]
    run = kp.nodepool(cpu, hold=False)
    assert run["spec"]["disruption"]["budgets"] == [{"nodes": "10%"}]
    assert run["spec"]["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert run["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.kwok.sh",
        "kind": "KWOKNodeClass",
        "name": "cpu",
    }
    assert run["spec"]["template"]["metadata"]["labels"]["makeroom.io/group"] == "cpu"
    assert run["spec"]["weight"] == 100 and run["spec"]["limits"] == {"nodes": "1"}


def test_an_initial_nodeclaim_is_of_its_pools_first_type_without_delay() -> None:
    (cpu, _gpu) = variant(2).groups
    claim = kp.initial_nodeclaim(cpu, "cpu-0")
    assert claim["metadata"]["name"] == "cpu-0"
    assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == "cpu"
    reqs = {r["key"]: r["values"] for r in claim["spec"]["requirements"]}
    assert reqs["node.kubernetes.io/instance-type"] == ["cpu-4x"]
    assert reqs["karpenter.sh/nodepool"] == ["cpu"]
    assert claim["spec"]["nodeClassRef"]["name"] == "cpu-initial"
    assert claim["spec"]["resources"]["requests"]["memory"] == str(16 * 2**30)


def test_node_classes_register_after_the_scaled_provision_time() -> None:
    assert kp.node_class("gpu", 48.0)["spec"] == {"nodeRegistrationDelay": "48s"}
    assert kp.node_class("gpu-initial", 0)["spec"] == {}
