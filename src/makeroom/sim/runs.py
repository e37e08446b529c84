"""A run of a scenario under a strategy: the simulated cluster, plus the relocation controller, on the
simulated cluster's port and clock, for the strategies that need it."""

from __future__ import annotations

import math
from collections.abc import Callable

from makeroom.controller import Controller, ControllerConfig, Strategy
from makeroom.controller.records import RecordKind
from makeroom.model import AutoscalerKind
from makeroom.scenario import Scenario
from makeroom.sim.clock import Phase
from makeroom.sim.port import SimCluster
from makeroom.sim.results import Result
from makeroom.sim.simulation import Options, Simulation
from makeroom.sim.world import World

REACTION = 0.5
"""Seconds from a pod turning unschedulable to the controller's reaction, in runs with Karpenter.

``makeroom run`` reconciles at once when its watch shows a pod turning unschedulable, besides its
tick every interval. With the cluster-autoscaler the tick is all the simulator models (the autoscaler
waits 2 s, 30 s for a GPU pod, before it acts); Karpenter closes its batch 1 s after the last pending
pod, so the controller's reaction decides which of the two acts first."""


QUIET_TICK = 300.0
"""Seconds between the controller's ticks in a quiet cluster, for runs that ask for it (``quiet``)."""

STATUS_ONLY = frozenset({RecordKind.HEADROOM.value})
"""Records that report, and stand for no work under way: a headroom target's ``KeptRoom`` lives as
long as the target, so counting it would tick a ``headroom`` run every interval for a whole month."""


def work_under_way(world: World) -> bool:
    """A pod waits, or a makeroom record other than a report exists: the controller has work each
    interval."""
    return bool(world.pending) or any(kind not in STATUS_ONLY for kind, _ in world.custom)


def attach_controller(sim: Simulation, config: ControllerConfig, quiet: bool = False) -> Controller:
    """The relocation controller, unchanged, on the simulated cluster's port and clock.

    ``quiet`` (the fleet benchmark's month-long replays): while no pod waits, no makeroom record
    exists (reports aside: ``STATUS_ONLY``) and the cluster has not changed since the last tick, the
    controller ticks every ``QUIET_TICK`` seconds instead of every interval. An approximation, stated
    in docs/benchmarks.md: what only time changes in a quiet cluster (a cooldown running out) is seen
    up to 5 minutes late."""
    port = SimCluster(sim.world)
    controller = Controller(port, port, config)
    if not quiet:
        sim.every(config.interval, Phase.CONTROLLER, controller.tick)
    else:
        QuietTicks(sim, controller, config.interval)
    if sim.kind == AutoscalerKind.KARPENTER:
        _react_to_unschedulable(sim, controller)
    return controller


class QuietTicks:
    """The controller's loop in ``quiet`` runs. On each instant of its grid (every interval from the
    start) it ticks when a pod waits, a record exists, the cluster changed since its last tick, or
    ``QUIET_TICK`` passed. Between two such instants nothing is scheduled: asleep, it looks after each
    action of the loop whether one of the first three came true, and wakes on the first instant of
    the grid that comes after that action (the same instant, if the controller's phase there is
    still to come), or, failing that, on the first instant ``QUIET_TICK`` after its last tick. So it
    ticks on exactly the instants a check on every instant of the grid would, without the check:
    a month at 2 s is 1.3 million of them."""

    def __init__(self, sim: Simulation, controller: Controller, interval: float) -> None:
        self.world, self.loop, self.controller, self.interval = sim.world, sim.loop, controller, interval
        self.last_at = -QUIET_TICK
        self.last_generation = -1
        self.asleep_since: float | None = None
        self.alarm = 0  # the number of the wake-up that counts; earlier ones are void
        sim.after_event.append(self.look)
        self.loop.at(self.loop.now, Phase.CONTROLLER, self.tick)

    def busy(self) -> bool:
        world = self.world
        return work_under_way(world) or world.state.generation != self.last_generation

    def tick(self) -> None:
        now = self.world.now
        if self.busy() or now - self.last_at >= QUIET_TICK:
            self.controller.tick()
            self.last_at, self.last_generation = now, self.world.state.generation
            self.loop.after(self.interval, Phase.CONTROLLER, self.tick)
            return
        self.asleep_since = now
        steps = math.ceil((self.last_at + QUIET_TICK - now) / self.interval)
        self._wake_at(now + steps * self.interval)

    def look(self) -> None:
        since = self.asleep_since
        if since is None or not self.busy():
            return
        now = self.loop.now
        steps = max(1, math.ceil((now - since) / self.interval))
        if since + steps * self.interval == now and self.loop.phase >= Phase.CONTROLLER:
            steps += 1  # this instant's tick would have run already
        self.asleep_since = None  # awake from now on: the wake-up below is the next tick
        self._wake_at(since + steps * self.interval)

    def _wake_at(self, when: float) -> None:
        self.alarm += 1
        alarm = self.alarm

        def wake() -> None:
            if alarm == self.alarm:
                self.asleep_since = None
                self.tick()

        self.loop.at(when, Phase.CONTROLLER, wake)


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
