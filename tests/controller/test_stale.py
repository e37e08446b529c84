"""Stale decisions (issue 12, item 3): every action is checked against the cluster as it is when it is
sent: the destination's room counting what pods already waiting will take, the replicas and their
owner as the surge left them. (The reservation and the leader's fence are the Kubernetes adapter's:
tests/kube/test_fences.py.)"""

from __future__ import annotations

from typing import Any

import yaml

from makeroom.controller import ControllerConfig, Strategy
from makeroom.controller.validate import Refusal
from makeroom.scenario import parse_scenario
from makeroom.sim import Options, Simulation
from makeroom.sim.clock import Phase
from makeroom.sim.runs import attach_controller
from makeroom.sim.world import World
from tests.conftest import seed
from tests.controller.support import leftovers

FILLER = {
    "name": "filler",
    "replicas": 1,
    "priority": 500,
    "requests": {"cpu": "1500m", "memory": "4Gi"},
}


def run(n: int, strategy: Strategy, at: float | None = None, change: Any = None) -> Any:
    raw = yaml.safe_load(seed(n).read_text())
    scenario = parse_scenario(raw, f"seed-{n}.yaml")
    sim = Simulation(scenario, Options(strategy=strategy))
    attach_controller(sim, ControllerConfig(strategy=strategy))
    if change is not None:
        assert at is not None
        sim.loop.at(at, Phase.WORLD, lambda: change(sim.world))
    return sim, sim.run().data


def evicted(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in data["events"] if e.get("reason") == "Evicted"]


def test_after_a_refused_eviction_a_destination_filled_meanwhile_stops_the_next_one() -> None:
    """seed-1 under evict: the budget lets the victims go one at a time (429 for the others). Just as
    the second is retried, a higher-priority pod arrives that will take the room the victim was to
    go to (it waits for the scheduler, which serves it first): the victim stays, the relocation rolls
    back. Before: room was counted on bound pods only, the victim was evicted, and its replacement
    waited for ever on a full CPU group at its max."""
    _, plain = run(1, Strategy.EVICT)
    second = evicted(plain)[1]["t"]  # when the budget let the second victim go
    assert any(e["kind"] == "eviction_refused" and e["t"] < second for e in plain["events"])

    def arrives(world: World) -> None:
        from makeroom.scenario.load import to_workload
        from makeroom.scenario.schema import WorkloadSpec

        w = to_workload(WorkloadSpec.model_validate(FILLER))
        world.deploy(w)
        world.reconcile(w.name)

    sim, data = run(1, Strategy.EVICT, second, arrives)
    assert len(evicted(data)) == 1, evicted(data)
    (rolled,) = [e for e in data["events"] if e.get("reason") == "RelocationRolledBack"]
    assert f"({Refusal.NO_DESTINATION.value})" in rolled["message"] and rolled["t"] == second
    iris = data["workloads"]["iris-classifier"]
    assert iris["ready_at_end"] == iris["desired"] == 10  # the one that left found its room
    assert data["workloads"]["filler"]["ready_at_end"] == 1
    assert leftovers(sim, sim.scenario) == []


def test_an_operator_s_scale_during_a_surge_stands() -> None:
    def operator(world: World) -> None:
        world.scale("iris-classifier", 20)

    sim, data = run(2, Strategy.MIGRATE, 100.0, operator)
    rolled = [e for e in data["events"] if e.get("reason") == "RelocationRolledBack"]
    assert rolled and f"({Refusal.REPLICAS_CHANGED.value})" in rolled[0]["message"]
    # the surge is given up and not undone against the operator: any later relocation surges from 20
    after = [e["replicas"] for e in data["events"] if e["kind"] == "makeroom_scale" and e["t"] >= 100.0]
    assert all(r > 20 for r in after[0::2]) and all(r == 20 for r in after[1::2]), after
    iris = data["workloads"]["iris-classifier"]
    assert iris["desired"] == 20 and sim.world.workloads["iris-classifier"].replicas == 20


def test_an_hpa_that_takes_the_replicas_over_during_a_surge_is_not_fought() -> None:
    """Before: makeroom carried on and scaled the Deployment back to its count before the surge,
    against the HPA that now owns it."""

    def hpa(world: World) -> None:
        world.workloads["iris-classifier"].replicas_owner = "HorizontalPodAutoscaler/iris-classifier"

    sim, data = run(2, Strategy.MIGRATE, 100.0, hpa)
    after = [e for e in data["events"] if e["kind"] == "makeroom_scale" and e["t"] >= 100.0]
    assert after == []
    (rolled,) = [e for e in data["events"] if e.get("reason") == "RelocationRolledBack"]
    assert f"({Refusal.REPLICAS_OWNED.value})" in rolled["message"]
    assert sim.world.workloads["iris-classifier"].replicas == 18  # the HPA's to change now
