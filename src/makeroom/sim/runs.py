"""A run of a scenario under a strategy: the simulated cluster, plus the relocation controller, on the
simulated cluster's port and clock, for the strategies that need it."""

from __future__ import annotations

from collections.abc import Callable

from makeroom.controller import Controller, ControllerConfig, Strategy
from makeroom.model import AutoscalerKind
from makeroom.scenario import Scenario
from makeroom.sim.clock import Phase
from makeroom.sim.port import SimCluster
from makeroom.sim.results import Result
from makeroom.sim.simulation import Options, Simulation

REACTION = 0.5
"""Seconds from a pod turning unschedulable to the controller's reaction, in runs with Karpenter.

``makeroom run`` reconciles at once when its watch shows a pod turning unschedulable, besides its
tick every interval. With the cluster-autoscaler the tick is all the simulator models (the autoscaler
waits 2 s, 30 s for a GPU pod, before it acts); Karpenter closes its batch 1 s after the last pending
pod, so the controller's reaction decides which of the two acts first."""


QUIET_TICK = 300.0
"""Seconds between the controller's ticks in a quiet cluster, for runs that ask for it (``quiet``)."""


def attach_controller(sim: Simulation, config: ControllerConfig, quiet: bool = False) -> Controller:
    """The relocation controller, unchanged, on the simulated cluster's port and clock.

    ``quiet`` (the fleet benchmark's month-long replays): while no pod waits, no makeroom record
    exists and the cluster has not changed since the last tick, the controller ticks every
    ``QUIET_TICK`` seconds instead of every interval. An approximation, stated in docs/benchmarks.md:
    what only time changes in a quiet cluster (a cooldown running out) is seen up to 5 minutes late."""
    port = SimCluster(sim.world)
    controller = Controller(port, port, config)
    if not quiet:
        sim.every(config.interval, Phase.CONTROLLER, controller.tick)
    else:
        sim.every(config.interval, Phase.CONTROLLER, _quiet_ticks(sim, controller))
    if sim.kind == AutoscalerKind.KARPENTER:
        _react_to_unschedulable(sim, controller)
    return controller


def _quiet_ticks(sim: Simulation, controller: Controller) -> Callable[[], None]:
    world = sim.world
    last = {"at": -QUIET_TICK, "generation": -1}

    def tick() -> None:
        generation = world.state.generation
        busy = world.pending or world.custom or generation != last["generation"]
        if busy or world.now - last["at"] >= QUIET_TICK:
            controller.tick()
            last["at"], last["generation"] = world.now, world.state.generation
            return

    return tick


def _react_to_unschedulable(sim: Simulation, controller: Controller) -> None:
    world = sim.world
    queued: set[float] = set()

    def tick() -> None:
        controller.tick()

    def look() -> None:
        queued.discard(world.now)
        if any(p.unschedulable_since == world.now for p in world.pending.values()):
            world.loop.after(REACTION, Phase.CONTROLLER, tick)

    def changed() -> None:
        if world.now not in queued:  # once per instant, after the scheduler's pass
            queued.add(world.now)
            world.loop.at(world.now, Phase.AUTOSCALER, look)

    world.on_change.append(changed)


def build(
    scenario: Scenario,
    strategy: Strategy | None = None,
    seed: int = 0,
    consolidate: bool | None = None,
    autoscaler: AutoscalerKind | None = None,
    preemption_delay: float = 0.0,
    quiet: bool = False,
    **options: bool,
) -> Simulation:
    """``strategy``, ``consolidate`` and ``autoscaler`` (default: the file's) as the CLI gives them."""
    chosen = Strategy(strategy or scenario.strategy)
    sim = Simulation(
        scenario, Options(chosen, seed, autoscaler=autoscaler, preemption_delay=preemption_delay, **options)
    )
    if chosen.relocates:
        attach_controller(sim, scenario.spec.controller_config(chosen, consolidate), quiet)
    return sim


def simulate(
    scenario: Scenario,
    strategy: Strategy | None = None,
    seed: int = 0,
    progress: Callable[[float], None] | None = None,
    consolidate: bool | None = None,
    autoscaler: AutoscalerKind | None = None,
) -> Result:
    return build(scenario, strategy, seed, consolidate, autoscaler).run(progress=progress)
