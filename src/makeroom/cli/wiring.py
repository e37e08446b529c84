"""Builds runs: a scenario, a strategy, and the simulated cluster (plus the controller, for the
strategies that need it). Tests, benchmarks and commands all go through here."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from makeroom.controller import STRATEGIES as CONTROLLER_STRATEGIES
from makeroom.controller import Controller, ControllerConfig
from makeroom.errors import InputError, Problem
from makeroom.scenario import Scenario, load_scenario
from makeroom.scenario.schema import STRATEGIES
from makeroom.sim import BUILTIN_STRATEGIES, Options, Result, Simulation
from makeroom.sim.clock import Phase
from makeroom.sim.port import SimCluster

Progress = Callable[[float], None]


def available_strategies() -> tuple[str, ...]:
    return (*BUILTIN_STRATEGIES, *CONTROLLER_STRATEGIES)


def check_strategy(name: str, source: str = "--strategy") -> None:
    if name not in STRATEGIES:
        raise InputError(source, [Problem("", f"expected one of {', '.join(STRATEGIES)}, got {name!r}")])
    if name not in available_strategies():
        raise InputError(
            source,
            [
                Problem(
                    "",
                    f"strategy {name!r} needs the relocation controller, which this build does not "
                    f"have yet; available: {', '.join(available_strategies())}",
                )
            ],
        )


def build(
    scenario: Scenario,
    strategy: str | None = None,
    seed: int = 0,
    consolidate: bool | None = None,
    **options: bool,
) -> Simulation:
    chosen = strategy or scenario.strategy
    check_strategy(chosen, "--strategy" if strategy else f"{scenario.source}: controller.strategy")
    sim = Simulation(scenario, Options(strategy=chosen, seed=seed, **options))
    if chosen in CONTROLLER_STRATEGIES:
        attach_controller(sim, controller_config(scenario, chosen, consolidate))
    return sim


def controller_config(scenario: Scenario, strategy: str, consolidate: bool | None = None) -> ControllerConfig:
    """The scenario's controller section; ``consolidate`` (the CLI's choice) overrides its own."""
    c = scenario.spec.controller
    return ControllerConfig(
        strategy=strategy,
        interval=c.interval,
        timeout=c.timeout,
        cooldown=c.cooldown,
        max_moves_in_flight=c.max_moves_in_flight,
        consolidation=c.consolidation.enabled if consolidate is None else consolidate,
        consolidation_min_saving=c.consolidation.min_saving,
        consolidation_max_moves=c.consolidation.max_moves,
        consolidation_window=c.consolidation.window,
        consolidation_wait=c.consolidation.wait,
        autoscaler_expander=scenario.spec.autoscaler.expander,
    )


def attach_controller(sim: Simulation, config: ControllerConfig) -> Controller:
    """The relocation controller, unchanged, on the simulated cluster's port and clock."""
    port = SimCluster(sim.world)
    controller = Controller(port, port, config)
    sim.every(config.interval, Phase.CONTROLLER, controller.tick)
    return controller


def simulate(
    scenario: Scenario,
    strategy: str | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    consolidate: bool | None = None,
) -> Result:
    return build(scenario, strategy, seed, consolidate).run(progress=progress)


def parse_strategies(text: str | None) -> list[str]:
    names = list(available_strategies()) if not text else [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise InputError("--strategies", [Problem("", "expected a comma-separated list of strategies")])
    for name in names:
        check_strategy(name, "--strategies")
    return names


def bundled_scenarios() -> list[Path]:
    import makeroom.examples

    return sorted(Path(makeroom.examples.__file__).parent.glob("seed-*.yaml"))


def load_all(paths: Sequence[Path]) -> list[Scenario]:
    return [load_scenario(p) for p in paths]


class WallTimer:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start
