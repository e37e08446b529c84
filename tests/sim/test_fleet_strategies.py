"""The small strategies of the fleet benchmark: KAI's preemption delay, and the descheduler-style mover
that moves pods to existing nodes only."""

from __future__ import annotations

from typing import Any

from makeroom.controller import Strategy
from makeroom.scenario.load import parse_scenario
from makeroom.sim.descheduler import Descheduler
from makeroom.sim.runs import build


def scenario(groups: list[dict[str, Any]], workloads: list[dict[str, Any]], events: list[Any]) -> Any:
    data = {
        "version": 1,
        "name": "t",
        "duration": "5m",
        "node_groups": [{"price_per_hour": 0.1, **g} for g in groups],
        "autoscaler": {"enabled": False},
        "workloads": workloads,
        "events": events,
    }
    return parse_scenario(data, "t")


def preempted_at(delay: float) -> float:
    one = [{"name": "n", "capacity": {"cpu": "4", "memory": "4Gi"}, "min": 1, "max": 1, "initial": 1}]
    low = {"name": "low", "replicas": 1, "priority": 1, "requests": {"cpu": "4"}, "placement": {"n": 1}}
    high = {"name": "high", "replicas": 1, "priority": 100, "requests": {"cpu": "4"}}
    sim = build(scenario(one, [low], [{"at": "10s", "deploy": high}]), Strategy.PREEMPTION, 1,
                preemption_delay=delay)  # fmt: skip
    result = sim.run()
    return next(e.t for e in result.events if e.kind == "preempted_by")


def test_a_pod_preempts_only_after_the_delay() -> None:
    assert preempted_at(0.0) == 10.0
    assert preempted_at(30.0) == 40.0


def mover_scenario(cpu_room: str) -> Any:
    groups = [
        {"name": "cpu", "capacity": {"cpu": cpu_room, "memory": "8Gi"}, "min": 1, "max": 1, "initial": 1},
        {
            "name": "gpu",
            "capacity": {"cpu": "8", "memory": "8Gi", "nvidia.com/gpu": "1"},
            "min": 1,
            "max": 1,
            "initial": 1,
        },
    ]
    web = {"name": "web", "replicas": 1, "requests": {"cpu": "2"}, "placement": {"gpu": 1}}
    return scenario(groups, [web], [])


def test_the_mover_takes_cpu_pods_off_gpu_nodes_only_where_an_existing_node_has_room() -> None:
    roomy = build(mover_scenario("8"), Strategy.NONE, 1)
    assert Descheduler(roomy.world).pass_once() == 1
    full = build(mover_scenario("1"), Strategy.NONE, 1)
    assert Descheduler(full.world).pass_once() == 0
