"""The openb finding (docs/benchmarks.md): consolidation planned a new node of the cheapest GPU group
for a moved pod, the cluster-autoscaler's least-waste expander grew a dearer group for it, and the
next search emptied that node in turn. Simulated end to end: the task must not move round and round."""

from __future__ import annotations

from makeroom.controller import Strategy
from makeroom.scenario.load import parse_scenario
from makeroom.sim.runs import build

GPU = "nvidia.com/gpu"


def group(name: str, cpu: int, gpus: int, price: float, initial: int = 0) -> dict[str, object]:
    capacity = {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", GPU: str(gpus)}
    return {
        "name": name,
        "capacity": capacity,
        "min": 0,
        "max": 2,
        "initial": initial,
        "price_per_hour": price,
    }


def test_a_task_least_waste_would_put_on_a_dearer_group_is_not_moved_round_and_round() -> None:
    data = {
        "version": 1,
        "name": "round and round",
        "duration": "3h",
        # Least-waste weighs CPU and memory: for an 8-core task it prefers mid over the cheap but
        # roomy a10, and big over a10 too; consolidation's plan would count on a10 every time.
        "node_groups": [
            group("big", 64, 8, 18.56, initial=1),
            group("mid", 32, 4, 9.28),
            group("a10", 128, 1, 7.12),
        ],
        "autoscaler": {"enabled": True},
        "workloads": [
            {
                "name": "task",
                "replicas": 1,
                "requests": {"cpu": "8", "memory": "32Gi", GPU: "1"},
                "placement": {"big": 1},
            }
        ],
    }
    result = build(parse_scenario(data, "t"), Strategy.EVICT, 1).run()
    assert result.workloads["task"].evicted <= 1
    assert sum(g.nodes_added for g in result.node_groups.values()) <= 1
