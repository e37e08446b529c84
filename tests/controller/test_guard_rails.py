"""The controller's guard rails, each on the simulated cluster."""

from __future__ import annotations

from typing import Any

import yaml

from makeroom.controller import ControllerConfig, Strategy
from makeroom.planner import NotMovable, Policy, not_movable
from makeroom.scenario import load_scenario, parse_scenario
from makeroom.sim import Options, Simulation
from makeroom.sim.runs import attach_controller
from tests.conftest import seed
from tests.controller.support import leftovers


def makeroom_events(data: Any) -> list[dict[str, Any]]:
    return [e for e in data["events"] if "reason" in e]


def run(n: int, strategy: Strategy, config: ControllerConfig | None = None, edit: Any = None) -> Any:
    scenario = load_scenario(seed(n))
    if edit is not None:
        raw = yaml.safe_load(seed(n).read_text())
        edit(raw)
        scenario = parse_scenario(raw, "edited.yaml")
    sim = Simulation(scenario, Options(strategy=strategy))
    controller = attach_controller(sim, config or ControllerConfig(strategy=strategy))
    return sim, controller, sim.run(), scenario


def test_decision_within_one_autoscaler_scan_of_the_pod_becoming_unschedulable() -> None:
    for strategy in (Strategy.EVICT, Strategy.MIGRATE):
        _, _, result, scenario = run(2, strategy)
        data = result.data
        unschedulable = next(
            e["t"]
            for e in data["events"]
            if e["kind"] == "pod_unschedulable" and e["pod"] == "text-generator-0"
        )
        first = makeroom_events(data)[0]
        assert first["reason"] == "Relocating"
        assert first["t"] - unschedulable <= scenario.spec.autoscaler.scan_interval


def test_every_action_is_an_event_naming_the_pod_it_makes_room_for() -> None:
    for strategy in (Strategy.EVICT, Strategy.MIGRATE):
        _, _, result, _ = run(1, strategy)
        events = makeroom_events(result.data)
        assert {e["reason"] for e in events} >= {"Relocating", "Moving", "RoomMade"}
        for e in events:
            assert "text-generator-0" in e["object"] or "text-generator-0" in e["message"], e


def test_the_bound_on_moves_in_flight_holds() -> None:
    config = ControllerConfig(strategy=Strategy.MIGRATE, max_moves_in_flight=2)
    _, _, result, _ = run(1, Strategy.MIGRATE, config)
    assert result.data["evictions"] == 0  # three moves are needed, two are allowed: nothing moves
    assert result.data["workloads"]["text-generator"]["ready_at_end"] == 0


def test_a_changed_world_rolls_back_cleanly() -> None:
    def cordon_gpu_during_relocation(raw: dict[str, Any]) -> None:
        raw["events"].append({"at": "70s", "cordon": {"node": "gpu-0"}})

    for strategy in (Strategy.EVICT, Strategy.MIGRATE):
        sim, _, result, scenario = run(2, strategy, edit=cordon_gpu_during_relocation)
        reasons = [e["reason"] for e in makeroom_events(result.data)]
        assert "RelocationRolledBack" in reasons
        assert "RoomMade" not in reasons
        assert leftovers(sim, scenario) == []
        assert result.data["workloads"]["iris-classifier"]["ready_at_end"] == 15


def test_replacements_are_in_cooldown() -> None:
    scenario = load_scenario(seed(1))
    sim = Simulation(scenario, Options(strategy=Strategy.MIGRATE))
    controller = attach_controller(sim, ControllerConfig(strategy=Strategy.MIGRATE))
    sim.run(until=200.0)
    state = sim.world.state
    cooling = controller.steps.cooling(state, 200.0)
    replacements = {
        p.key for p in state.pods.values() if p.workload == "iris-classifier" and p.created_at > 0
    }
    assert replacements and cooling == replacements
    policy = Policy(now=200.0, recently_moved=cooling)
    assert all(not_movable(state.pods[k], policy) is NotMovable.COOLDOWN for k in replacements)
    assert controller.steps.cooling(state, 62.0 + 601.0) == frozenset()


def test_migrate_never_scales_a_workload_whose_replicas_another_controller_owns() -> None:
    scenario = load_scenario(seed(1))
    sim = Simulation(scenario, Options(strategy=Strategy.MIGRATE))
    sim.world.workloads["iris-classifier"].replicas_owner = "HorizontalPodAutoscaler/iris-classifier"
    attach_controller(sim, ControllerConfig(strategy=Strategy.MIGRATE))
    result = sim.run()
    assert not [e for e in result.data["events"] if e["kind"] == "makeroom_scale"]
    assert result.data["workloads"]["text-generator"]["ready_at_end"] == 1
    iris = result.data["workloads"]["iris-classifier"]
    assert iris["evicted"] == 3
    assert iris["min_ready"] >= 9  # evicted within the budget instead
    assert leftovers(sim, scenario) == []
