"""One simulated run: the world, its components, the scenario's events and the chosen strategy."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from makeroom.controller.config import Strategy
from makeroom.model import AutoscalerKind
from makeroom.scenario import Scenario
from makeroom.scenario.load import to_workload
from makeroom.scenario.schema import EventSpec
from makeroom.sim.autoscaler import Autoscaler
from makeroom.sim.clock import EventLoop, Phase
from makeroom.sim.karpenter import Karpenter
from makeroom.sim.preemption_delay import DelayedPreemption
from makeroom.sim.recorder import Recorder
from makeroom.sim.results import Result, summarize
from makeroom.sim.scheduler import Scheduler
from makeroom.sim.world import World

SAMPLES_PER_RUN = 4000  # enough for a picture; a 20-minute seed keeps every change


@dataclass(frozen=True, slots=True)
class Options:
    strategy: Strategy = Strategy.NONE  # evict and migrate need the controller, wired by the caller
    seed: int = 0
    keep_events: bool = True
    keep_samples: bool = True
    autoscaler: AutoscalerKind | None = None  # None: the scenario's (autoscaler.kind)
    preemption_delay: float = 0.0  # with preemption: a pod preempts only after pending this long (KAI)


class Simulation:
    """Build with a scenario and options, then ``run()``; ``world.state`` is the cluster at any time."""

    def __init__(self, scenario: Scenario, options: Options) -> None:
        self.scenario = scenario
        self.options = options
        self.loop = EventLoop()
        self.after_event: list[Callable[[], None]] = []  # called after every action of the loop
        self.recorder = Recorder(
            keep_events=options.keep_events,
            keep_samples=options.keep_samples,
            resolution=scenario.spec.duration / SAMPLES_PER_RUN,
        )
        extra = {r for w in scenario.deployed.values() for r in w.spec.requests}
        spec = scenario.spec
        self.kind = options.autoscaler or spec.autoscaler.kind
        self.world = World(scenario.groups, scenario.workloads, extra, self.loop, self.recorder, self.kind)
        preempts = options.strategy == Strategy.PREEMPTION
        self.scheduler: Scheduler
        if preempts and options.preemption_delay > 0:
            self.scheduler = DelayedPreemption(self.world, spec.scheduler.scoring, options.preemption_delay)
        else:
            self.scheduler = Scheduler(self.world, preempts, spec.scheduler.scoring)
        self.autoscaler: Autoscaler | Karpenter
        if self.kind == AutoscalerKind.KARPENTER:
            self.autoscaler = Karpenter(self.world, spec.autoscaler.karpenter, spec.autoscaler.enabled)
        else:
            self.autoscaler = Autoscaler(self.world, spec.autoscaler, random.Random(options.seed))
        self._set_up()

    def _set_up(self) -> None:
        world = self.world
        for node in self.scenario.initial_nodes:
            group = world.state.groups[node.group]
            # A pool's nodes are of an instance type: the first it lists
            kind = group.types()[0] if self.kind == AutoscalerKind.KARPENTER else None
            world.provision_node(node.group, ready=True, instance_type=kind)
        for w in self.scenario.workloads:
            world.deploy(w, announce=False)
        for workload, node_name in self.scenario.placement:
            world.create_pod(world.workloads[workload], node=node_name, ready=True)
        for w in self.scenario.workloads:
            world.reconcile(w.name)
            world.rec.workloads[w.name].observe(0.0)
        for event in self.scenario.spec.events:
            self.loop.at(event.at, Phase.WORLD, self._applier(event))
        self.autoscaler.start()
        self.world.changed()

    def _applier(self, e: EventSpec) -> Callable[[], None]:
        world = self.world

        def apply() -> None:
            if e.scale is not None:
                world.scale(e.scale.workload, e.scale.replicas)
            elif e.deploy is not None:
                w = to_workload(e.deploy)
                world.deploy(w)
                world.reconcile(w.name)
            elif e.delete is not None:
                world.delete_workload(e.delete.workload)
            elif e.remove_node is not None:
                world.remove_node(e.remove_node.node, "removed")
            elif e.cordon is not None:
                world.set_cordon(e.cordon.node, True)
            elif e.uncordon is not None:
                world.set_cordon(e.uncordon.node, False)

        return apply

    def every(self, interval: float, phase: Phase, action: Callable[[], object]) -> None:
        """Run ``action`` every ``interval`` simulated seconds from now on (a controller's loop)."""

        def again() -> None:
            action()
            self.loop.after(interval, phase, again)

        self.loop.at(self.loop.now, phase, again)

    def run(
        self,
        until: float | None = None,
        progress: Callable[[float], None] | None = None,
        before: Phase | None = None,
    ) -> Result:
        """Run to ``until`` (the scenario's end); ``before``: at ``until``, only the phases before it."""
        horizon = self.scenario.spec.duration if until is None else until

        def step(t: float) -> None:
            for hook in self.after_event:
                hook()
            if self.loop.next_time() != t:  # the last change at this instant
                self.recorder.sample(t, len(self.world.pending))
            if progress is not None:
                progress(t)

        self.recorder.sample(self.loop.now, len(self.world.pending))
        self.loop.run_until(horizon, step, before)
        self.recorder.advance(horizon)
        self.recorder.resolution = 0.0
        self.recorder.sample(horizon, len(self.world.pending))
        return summarize(self, horizon)
