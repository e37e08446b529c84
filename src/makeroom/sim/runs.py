"""A run of a scenario under a strategy: the simulated cluster, plus the relocation controller, on the
simulated cluster's port and clock, for the strategies that need it."""

from __future__ import annotations

from collections.abc import Callable

from makeroom.controller import Controller, ControllerConfig, Strategy
from makeroom.scenario import Scenario
from makeroom.sim.clock import Phase
from makeroom.sim.port import SimCluster
from makeroom.sim.results import Result
from makeroom.sim.simulation import Options, Simulation


def attach_controller(sim: Simulation, config: ControllerConfig) -> Controller:
    """The relocation controller, unchanged, on the simulated cluster's port and clock."""
    port = SimCluster(sim.world)
    controller = Controller(port, port, config)
    sim.every(config.interval, Phase.CONTROLLER, controller.tick)
    return controller


def build(
    scenario: Scenario,
    strategy: Strategy | None = None,
    seed: int = 0,
    consolidate: bool | None = None,
    **options: bool,
) -> Simulation:
    """``strategy`` (default: the file's) and ``consolidate`` (default: the file's) as the CLI gives them."""
    chosen = Strategy(strategy or scenario.strategy)
    sim = Simulation(scenario, Options(strategy=chosen, seed=seed, **options))
    if chosen.relocates:
        attach_controller(sim, scenario.spec.controller.config(chosen, consolidate))
    return sim


def simulate(
    scenario: Scenario,
    strategy: Strategy | None = None,
    seed: int = 0,
    progress: Callable[[float], None] | None = None,
    consolidate: bool | None = None,
) -> Result:
    return build(scenario, strategy, seed, consolidate).run(progress=progress)
