"""The keeper's CPU buffer where the cluster has none (no CapacityBuffer API, or the chart does not
allow it): the room is kept by moves alone, the buffer asked for once, never a failed step retried
every round."""

from __future__ import annotations

import dataclasses

from makeroom.controller import Controller, Strategy
from makeroom.controller.port import BuffersUnavailableError
from makeroom.model import Resources
from makeroom.scenario import load_scenario
from makeroom.sim import Options, Simulation
from makeroom.sim.clock import Phase
from makeroom.sim.port import SimCluster
from tests.builders.scenario import example


class NoBuffers(SimCluster):
    asked = 0

    def keep_buffer(self, group: str, requests: Resources, replicas: int) -> None:
        self.asked += 1
        raise BuffersUnavailableError(f"buffer for {group}: no capacitybuffers in the cluster")


def test_no_buffers_is_said_once_and_the_room_is_kept_by_moves() -> None:
    scenario = load_scenario(example("headroom-seed-5"))
    sim = Simulation(scenario, Options(strategy=Strategy.HEADROOM))
    config = scenario.spec.controller_config(Strategy.HEADROOM)
    config = dataclasses.replace(config, headroom=dataclasses.replace(config.headroom, cpu_buffer=2))
    port = NoBuffers(sim.world)
    controller = Controller(port, port, config)
    errors: list[int] = []
    sim.every(config.interval, Phase.CONTROLLER, lambda: errors.append(controller.tick().errors))
    result = sim.run()
    assert port.asked == 1, "asked once, not every round"
    assert len(errors) > 100 and sum(errors) == 0, "no failed step, no backoff"
    text_model = result.data["workloads"]["text-model"]
    assert text_model["time_to_ready_s"] == 90.0, "the room was kept by moves: Ready at its startup"
