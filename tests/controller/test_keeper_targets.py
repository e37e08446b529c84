"""The default headroom target, kept between rounds for speed, follows what it is computed from."""

from __future__ import annotations

import dataclasses

from makeroom.controller import Controller, Strategy
from makeroom.controller.records import KeptRoom
from makeroom.controller.validate import Live
from makeroom.scenario import load_scenario
from makeroom.sim import Options, Simulation
from makeroom.sim.port import SimCluster
from tests.builders.scenario import example


def default_targets_seed() -> tuple[Simulation, SimCluster, Controller]:
    """The burst seed at its start, with a controller keeping room for its default targets."""
    scenario = load_scenario(example("headroom-seed-5"))
    sim = Simulation(scenario, Options(strategy=Strategy.HEADROOM))
    port = SimCluster(sim.world)
    config = scenario.spec.controller_config(Strategy.HEADROOM)
    config = dataclasses.replace(config, headroom=dataclasses.replace(config.headroom, targets=()))
    return sim, port, Controller(port, port, config)


def test_the_default_target_follows_a_new_gpu_workload_with_no_pod_yet() -> None:
    sim, _, controller = default_targets_seed()
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


def test_a_target_no_longer_kept_leaves_the_store_once_its_moves_no_longer_count() -> None:
    """A default target follows the top GPU workload: the record of one no longer kept goes (the store
    would grow with every target there ever was), but not while its moves count against the hourly
    limit, which a new leader reads from it; and all of them once the keeper no longer runs."""
    sim, port, controller = default_targets_seed()
    state, now = sim.world.state, sim.world.now
    for name, moved in (("gpu.deleted-model", []), ("gpu.replaced-model", [(now - 60.0, "api")])):
        port.save_record(
            KeptRoom(target=name, group="gpu", whom=name, wanted=1, free=1, state="kept", moved=moved)
        )

    def keep(at: float) -> None:
        records = port.records()
        live = Live(state, port.namespaces(), at, records)
        controller.steps.validator.see(live)
        controller.keepers.keep(live, records)
        controller.keepers.collect_orphans(state, records, keeping=True, now=at)  # the round's last step

    keep(now)
    assert set(port.records().headroom) == {"gpu.text-model", "gpu.replaced-model"}
    keep(now + 3600.0)
    assert set(port.records().headroom) == {"gpu.text-model"}
    controller.keepers.collect_orphans(state, port.records(), keeping=False, now=now + 7200.0)
    assert port.records().headroom == {}
