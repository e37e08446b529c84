"""``makeroom cleanup`` on the simulated cluster: stopped in the middle of a relocation or a
consolidation, makeroom undoes everything it has under way and leaves nothing behind; a second pass
finds nothing to do."""

from __future__ import annotations

import pytest

from makeroom.controller import Controller, ControllerConfig, Strategy
from makeroom.scenario import Scenario, load_scenario
from makeroom.sim import Options, Simulation
from makeroom.sim.clock import Phase
from makeroom.sim.port import SimCluster
from tests.builders.scenario import example
from tests.conftest import seed
from tests.controller.support import leftovers


def run_until(
    scenario: Scenario, strategy: Strategy, at: float
) -> tuple[Simulation, SimCluster, ControllerConfig, list[bool]]:
    """The scenario run to ``at`` with the controller of its own config; clear the list's flag to
    stop the controller (as the chart's hook scales it to 0)."""
    sim = Simulation(scenario, Options(strategy=strategy))
    config = scenario.spec.controller_config(strategy)
    port = SimCluster(sim.world)
    controller = Controller(port, port, config)
    running = [True]

    def tick() -> None:
        if running[0]:
            controller.tick()

    sim.every(config.interval, Phase.CONTROLLER, tick)
    sim.run(until=at)
    return sim, port, config, running


@pytest.mark.parametrize(
    ("n", "strategy", "at"),
    [
        (1, Strategy.MIGRATE, 63.0),  # surged, replacements coming
        (1, Strategy.MIGRATE, 90.0),
        (1, Strategy.EVICT, 70.0),  # victims leaving within their budget
        (2, Strategy.MIGRATE, 150.0),  # waiting for the CPU node the autoscaler adds
        (4, Strategy.MIGRATE, 20.0),  # a consolidation: node tainted, workloads surged
    ],
)
def test_cleanup_in_the_middle_leaves_nothing_and_a_second_pass_does_nothing(
    n: int, strategy: Strategy, at: float
) -> None:
    scenario = load_scenario(seed(n))
    sim, port, config, running = run_until(scenario, strategy, at)
    records = port.records()
    assert records.relocations or records.consolidations, "nothing under way at that time"
    assert leftovers(sim, scenario), "makeroom's marks are on the cluster mid-way"
    running[0] = False  # the controller is stopped first (the chart's hook scales it to 0)

    report = Controller(port, port, config).clean_up("makeroom is being removed")
    assert report.actions > 0
    leaving = {p.name for p in sim.world.state.pods.values() if p.terminating}  # go with their marks
    assert [x for x in leftovers(sim, scenario) if x.split(":")[0].removeprefix("pod ") not in leaving] == []
    assert Controller(port, port, config).clean_up("again").actions == 0

    result = sim.run()  # the cluster goes on without makeroom: every workload back at its count
    for name, w in result.data["workloads"].items():
        assert w["ready_at_end"] <= w["desired"], name
    assert leftovers(sim, scenario) == []


def test_cleanup_of_a_clean_cluster_does_nothing() -> None:
    scenario = load_scenario(seed(1))
    sim = Simulation(scenario, Options(strategy=Strategy.MIGRATE))
    port = SimCluster(sim.world)
    report = Controller(port, port, ControllerConfig()).clean_up("nothing to do")
    assert report.actions == 0 and report.rolled_back == []


@pytest.mark.parametrize("at", [10.0, 200.0])  # a move under way (surged, nodes NoSchedule); room kept
def test_cleanup_removes_headroom_s_taints_and_records(at: float) -> None:
    scenario = load_scenario(example("headroom-seed-5"))
    sim, port, config, running = run_until(scenario, Strategy.HEADROOM, at)
    assert port.records().headroom, "the targets' records are there"
    assert any(t.key == "makeroom.io/headroom" for n in sim.world.state.nodes.values() for t in n.taints)
    running[0] = False

    assert Controller(port, port, config).clean_up("makeroom is being removed").actions > 0
    leaving = {p.name for p in sim.world.state.pods.values() if p.terminating}
    left = [x for x in leftovers(sim, scenario) if x.split(":")[0].removeprefix("pod ") not in leaving]
    assert [x for x in left if not x.startswith("workload text-model")] == []  # its burst is at 5m
    assert Controller(port, port, config).clean_up("again").actions == 0
    result = sim.run()
    assert result.data["workloads"]["api"]["ready_at_end"] == 8
    assert leftovers(sim, scenario) == []
