"""What the autoscaler would buy, when the cluster runs Karpenter: the planner follows Karpenter's choice
(the highest-weight pool that admits the pod within its limits, the cheapest of its types that fit),
for the pending pod's own node and for the moved pods' new nodes."""

from __future__ import annotations

from makeroom.model import AutoscalerKind, InstanceType, NodeGroup, Resources
from makeroom.model.state import ClusterState
from makeroom.planner import PlacementReason, plan
from tests.builders.state import CPU_NODE, GPU_NODE, StateBuilder


def pool(name: str, weight: int, *types: tuple[str, dict[str, str], float], max: int = 3) -> NodeGroup:
    kinds = tuple(InstanceType(n, Resources.parse(cap), price) for n, cap, price in types)
    return NodeGroup(
        name, kinds[0].capacity, {}, (), 0, max, kinds[0].price_per_hour, weight=weight, instance_types=kinds
    )


def builder(groups: list[NodeGroup], kind: AutoscalerKind) -> StateBuilder:
    b = StateBuilder(groups)
    b.state = ClusterState(groups, (), {"nvidia.com/gpu"}, autoscaler=kind)
    return b


def test_the_pending_pods_own_node_is_of_the_heaviest_pool_not_the_cheapest() -> None:
    groups = [
        pool("reserved", 90, ("r-4x", CPU_NODE, 1.0)),
        pool("spot", 10, ("s-4x", CPU_NODE, 0.2)),
    ]
    for kind, want in ((AutoscalerKind.KARPENTER, "reserved"), (AutoscalerKind.CLUSTER_AUTOSCALER, "spot")):
        b = builder(groups, kind)
        b.pod("api", {"cpu": "2"}, 10)
        result = plan(b.state)
        assert result.scale_ups == {want: 1}, kind


def test_the_new_node_is_the_cheapest_type_that_fits_the_pod() -> None:
    big = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    groups = [pool("cpu", 50, ("small", CPU_NODE, 0.2), ("big", big, 0.4))]
    b = builder(groups, AutoscalerKind.KARPENTER)
    b.pod("api", {"cpu": "6"}, 10)
    result = plan(b.state)
    (placement,) = result.placements
    assert placement.reason is PlacementReason.NEW_NODE and placement.new_node_group == "cpu"
    # the new node is the big type: a second pod of 2 CPU fits on it too, no second node
    b.pod("api", {"cpu": "1"}, 10)
    assert plan(b.state).scale_ups == {"cpu": 1}


def test_a_pool_at_its_node_limit_is_passed_over() -> None:
    groups = [pool("first", 90, ("f", CPU_NODE, 0.5), max=1), pool("second", 10, ("s", CPU_NODE, 0.9))]
    b = builder(groups, AutoscalerKind.KARPENTER)
    b.fill("fill", {"cpu": "4"}, 0, b.node("first"), 1)
    b.pod("api", {"cpu": "2"}, 10)
    assert plan(b.state).scale_ups == {"second": 1}


def _iris_on_the_gpu_node(gpu_weight: int, gpu_max: int = 2) -> StateBuilder:
    """Seed 1's shape: the GPU node holds iris replicas; the CPU node is full; the text-generator waits.
    The moved replicas need a new node; Karpenter would take it from the heavier pool that admits them."""
    groups = [
        pool("cpu", 50, ("cpu-4x", CPU_NODE, 0.17)),
        pool("gpu", gpu_weight, ("gpu-1x", GPU_NODE, 0.53), max=gpu_max),
    ]
    b = builder(groups, AutoscalerKind.KARPENTER)
    b.fill("filler", {"cpu": "4", "memory": "4Gi"}, 50, b.node("cpu"), 1)
    b.fill("iris", {"cpu": "400m", "memory": "1Gi"}, 100, b.node("gpu"), 5)
    b.pod("text-generator", {"cpu": "3", "memory": "12Gi", "nvidia.com/gpu": "1"}, 1000)
    return b


def test_moved_pods_get_the_new_node_karpenter_would_launch_for_them() -> None:
    result = plan(_iris_on_the_gpu_node(gpu_weight=10).state)
    (placement,) = result.placements
    assert placement.reason is PlacementReason.RELOCATION and placement.node == "gpu-0"
    assert result.scale_ups == {"cpu": 1}


def test_no_plan_counts_on_a_node_karpenter_would_take_from_the_pending_pods_pool() -> None:
    """With the gpu pool heavier, Karpenter would launch a GPU node for the moved replicas: a new node
    of the group the pending pod needs, which makeroom never counts on; the pod gets its own GPU node,
    as Karpenter would buy it."""
    result = plan(_iris_on_the_gpu_node(gpu_weight=90).state)
    (placement,) = result.placements
    assert placement.reason is PlacementReason.NEW_NODE and placement.new_node_group == "gpu"
    assert result.moves == ()


def test_at_the_gpu_pools_limit_karpenter_takes_the_next_pool_for_the_moved_pods() -> None:
    result = plan(_iris_on_the_gpu_node(gpu_weight=90, gpu_max=1).state)
    (placement,) = result.placements
    assert placement.reason is PlacementReason.RELOCATION and result.scale_ups == {"cpu": 1}
