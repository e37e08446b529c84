"""The headroom keeper counts on a new CPU node for the CPU-only pods it moves only where the
autoscaler's expander grows that group for them, consolidation's rule through the same search
(planner.consolidate.place, tests/planner/test_consolidation_expander.py). A moved pod that waits for
a node is the autoscaler's to place: should the expander grow the GPU group instead, a GPU node is
bought for a CPU pod and the pod sits on a GPU node again, the drift the room was kept against. Under
Karpenter, its own choice of pool decides, for the keeper and consolidation alike."""

from __future__ import annotations

import pytest

from makeroom.model import AutoscalerKind, Expander, Workload
from makeroom.planner.keep_room import KeepPolicy, Wanted, keep_room
from tests.builders.state import CPU_NODE, StateBuilder
from tests.planner.test_karpenter_buying import builder, pool

GPU = {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "1"}
MODEL = {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "1"}
API = {"cpu": "1", "memory": "2Gi"}
PRICE = 0.17  # the CPU group's: the price the keeper may pay


def cluster(gpu_max: int) -> StateBuilder:
    """A full CPU node; one GPU node with three API pods, room for the model wanted there."""
    c = StateBuilder(
        [
            StateBuilder.group("cpu", CPU_NODE, max=3, price=PRICE),
            StateBuilder.group("gpu", GPU, max=gpu_max, price=1.2),
        ]
    )
    return populated(c)


def populated(c: StateBuilder) -> StateBuilder:
    cpu, gpu = c.node("cpu"), c.node("gpu")
    api = c.fill("api", API, 100, cpu, 4) + c.fill("api", API, 100, gpu, 3)
    model = c.pod("model", MODEL, 1000)
    c.state.remove_pod(model)
    c.state.workloads["api"] = Workload("api", api[0].spec, len(api))
    c.state.workloads["model"] = Workload("model", model.spec, 0)
    return c


@pytest.mark.parametrize("expander", [Expander.LEAST_WASTE, Expander.RANDOM])
def test_no_new_cpu_node_when_the_expander_might_grow_the_gpu_group(expander: Expander) -> None:
    kept = keep_room(
        cluster(gpu_max=2).state,
        Wanted("gpu.model", "gpu", 1, workload="model"),
        KeepPolicy(max_price_per_hour=PRICE, expander=expander),
    )
    assert kept.move is None
    assert f"{expander.value} expander might grow another group" in kept.why_not


def test_a_gpu_group_at_its_max_cannot_be_grown_instead() -> None:
    kept = keep_room(
        cluster(gpu_max=1).state,
        Wanted("gpu.model", "gpu", 1, workload="model"),
        KeepPolicy(max_price_per_hour=PRICE),
    )
    assert kept.move is not None and kept.move.scale_ups == {"cpu": 1}


def test_the_price_expander_surely_grows_the_cpu_group() -> None:
    kept = keep_room(
        cluster(gpu_max=2).state,
        Wanted("gpu.model", "gpu", 1, workload="model"),
        KeepPolicy(max_price_per_hour=PRICE, expander=Expander.PRICE),
    )
    assert kept.move is not None and kept.move.scale_ups == {"cpu": 1}


@pytest.mark.parametrize(("cpu", "gpu", "moves"), [(20, 10, True), (10, 20, False), (10, 10, False)])
def test_the_priority_expander_as_configured(cpu: int, gpu: int, moves: bool) -> None:
    c = cluster(gpu_max=2)
    c.state.expander_priorities = {"cpu": cpu, "gpu": gpu}
    kept = keep_room(
        c.state,
        Wanted("gpu.model", "gpu", 1, workload="model"),
        KeepPolicy(max_price_per_hour=PRICE, expander=Expander.PRIORITY),
    )
    assert (kept.move is not None) is moves  # a tie may go either way: no node counted on


def karpenter(gpu_weight: int, gpu_max: int) -> StateBuilder:
    """The same cluster under Karpenter: pools by weight, the gpu pool's limit ``gpu_max``."""
    groups = [
        pool("cpu", 50, ("cpu-4x", CPU_NODE, PRICE)),
        pool("gpu", gpu_weight, ("gpu-8x", GPU, 1.2), max=gpu_max),
    ]
    return populated(builder(groups, AutoscalerKind.KARPENTER))


@pytest.mark.parametrize(("gpu_weight", "gpu_max", "moves"), [(90, 2, False), (90, 1, True), (10, 2, True)])
def test_under_karpenter_only_the_pool_karpenter_picks(gpu_weight: int, gpu_max: int, moves: bool) -> None:
    """Karpenter launches a moved pod's node in the heaviest pool that admits it within its limits
    (planner/buying.py): a heavier gpu pool that may grow gets it, whatever the expander flag says."""
    kept = keep_room(
        karpenter(gpu_weight, gpu_max).state,
        Wanted("gpu.model", "gpu", 1, workload="model"),
        KeepPolicy(max_price_per_hour=PRICE, expander=Expander.PRICE),
    )
    assert (kept.move is not None) is moves
    if kept.move is not None:
        assert kept.move.scale_ups == {"cpu": 1}
