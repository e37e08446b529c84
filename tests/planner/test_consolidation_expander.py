"""Consolidation onto a new node counts on the group the autoscaler's expander will grow for the moved
pod: never on a cheaper group when the expander might grow one no cheaper than the freed node's
instead (on openb, least-waste grew the dearer group, and the next search emptied that node in turn:
the same pod moved round and round, docs/benchmarks.md)."""

from __future__ import annotations

from makeroom.model import AutoscalerKind, Expander, Workload
from makeroom.planner.consolidate import ConsolidationPolicy, consolidate
from tests.builders.state import StateBuilder
from tests.planner.test_karpenter_buying import builder, pool

GPU = "nvidia.com/gpu"
BIG = {"cpu": "64", "memory": "256Gi", "pods": "110", GPU: "8"}
MID = {"cpu": "32", "memory": "128Gi", "pods": "110", GPU: "4"}
SMALL = {"cpu": "16", "memory": "64Gi", "pods": "110", GPU: "1"}
TASK = {"cpu": "8", "memory": "32Gi", GPU: "1"}


def cluster(big_max: int, mid_max: int = 0) -> StateBuilder:
    """One 1-GPU task alone on a big node; a small group (the cheapest) and a mid one may grow."""
    c = StateBuilder(
        [
            StateBuilder.group("big", BIG, max=big_max, price=18.56),
            StateBuilder.group("mid", MID, max=mid_max, price=9.28),
            StateBuilder.group("small", SMALL, max=2, price=2.64),
        ]
    )
    task = c.pod("task", TASK, 0, c.node("big"))
    c.state.workloads["task"] = Workload("task", task.spec, 1)
    return c


def test_no_new_node_when_least_waste_might_grow_the_freed_nodes_own_group() -> None:
    c = cluster(big_max=2)  # big may grow too: least-waste may pick it for the moved task
    assert consolidate(c.state, ConsolidationPolicy()) is None  # least-waste, the default
    assert consolidate(c.state, ConsolidationPolicy(expander=Expander.RANDOM)) is None


def test_a_cheaper_group_the_expander_might_grow_instead_still_saves() -> None:
    c = cluster(big_max=1, mid_max=2)  # big at its max; mid is dearer than small but cheaper than big
    found = consolidate(c.state, ConsolidationPolicy())
    assert found is not None
    assert found.scale_ups == {"small": 1}


def test_the_price_expander_surely_picks_the_cheap_group() -> None:
    c = cluster(big_max=2)
    found = consolidate(c.state, ConsolidationPolicy(expander=Expander.PRICE))
    assert found is not None
    assert found.scale_ups == {"small": 1}


def test_under_karpenter_only_the_pool_karpenter_picks() -> None:
    """Karpenter launches the moved task's node in the heaviest pool that admits it within its limits:
    the freed node's own pool while it may grow, so nothing would be saved."""

    def karpenter(big_max: int) -> StateBuilder:
        groups = [pool("big", 90, ("b", BIG, 18.56), max=big_max), pool("small", 10, ("s", SMALL, 2.64))]
        c = builder(groups, AutoscalerKind.KARPENTER)
        task = c.pod("task", TASK, 0, c.node("big"))
        c.state.workloads["task"] = Workload("task", task.spec, 1)
        return c

    assert consolidate(karpenter(big_max=2).state, ConsolidationPolicy(expander=Expander.PRICE)) is None
    found = consolidate(karpenter(big_max=1).state, ConsolidationPolicy())
    assert found is not None and found.scale_ups == {"small": 1}
