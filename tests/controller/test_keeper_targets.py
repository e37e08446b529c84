"""The default headroom target, kept between rounds for speed, follows what it is computed from."""

from __future__ import annotations

import dataclasses

from makeroom.controller import Controller, Strategy
from makeroom.scenario import load_scenario
from makeroom.sim import Options, Simulation
from makeroom.sim.port import SimCluster
from tests.builders.scenario import example


def test_the_default_target_follows_a_new_gpu_workload_with_no_pod_yet() -> None:
    scenario = load_scenario(example("headroom-seed-5"))
    sim = Simulation(scenario, Options(strategy=Strategy.HEADROOM))
    port = SimCluster(sim.world)
    config = scenario.spec.controller_config(Strategy.HEADROOM)
    config = dataclasses.replace(config, headroom=dataclasses.replace(config.headroom, targets=()))
    controller = Controller(port, port, config)
    state = sim.world.state
    first = controller.keepers.targets(state)
    assert [w.workload for w in first] == ["text-model"] * len(first) and first
    generation = state.generation
    model = sim.world.workloads["text-model"]
    urgent = dataclasses.replace(
        model, name="urgent-model", spec=dataclasses.replace(model.spec, priority=model.spec.priority + 1)
    )
    sim.world.deploy(urgent)  # no pod: the state's generation does not move
    assert state.generation == generation
    assert [w.workload for w in controller.keepers.targets(state)] == ["urgent-model"] * len(first)
    del sim.world.workloads["urgent-model"]
    assert controller.keepers.targets(state) == first
