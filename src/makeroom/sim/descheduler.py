"""A descheduler-style mover: it moves pods to existing nodes only, and never looks at pending pods.

Every interval (the descheduler's ``deschedulingInterval``), each pod that asks for no GPU and runs on
a node with GPUs is evicted when an existing Ready node without GPUs has room for it now, as the
descheduler's RemovePodsViolatingNodeAffinity does for a pod whose preferred affinity another node
satisfies better. Room is counted once per pass, so two pods are not sent to the same last spot.
Evictions respect disruption budgets; where the replacement lands is the scheduler's choice.
"""

from __future__ import annotations

import numpy as np

from makeroom.model import OwnerKind
from makeroom.sim.autoscaler import fill
from makeroom.sim.clock import Phase
from makeroom.sim.world import EvictionRefusedError, World

INTERVAL = 300.0  # a common deschedulingInterval (the Helm chart's CronJob runs every 2-5 minutes)


class Descheduler:
    def __init__(self, world: World, interval: float = INTERVAL) -> None:
        self.world = world
        self.interval = interval

    def start(self) -> None:
        self.world.loop.after(self.interval, Phase.CONTROLLER, self.run)

    def run(self) -> None:
        self.pass_once()
        self.world.loop.after(self.interval, Phase.CONTROLLER, self.run)

    def pass_once(self) -> int:
        world = self.world
        state = world.state
        gpus = state.index.gpu_positions()
        if not gpus:
            return 0
        has_gpu = (state.alloc[:, gpus] > 0).any(axis=1) & state.alive
        free = state.free_after_nominations()
        moved = 0
        for name, node in list(state.nodes.items()):
            if not has_gpu[state.slot_of[name]] or not node.ready:
                continue
            for pod in list(state.pods_on[name].values()):
                if pod.terminating or not pod.ready or pod.spec.requests.requests_gpu():
                    continue
                if pod.owner_kind in (OwnerKind.NONE, OwnerKind.NODE, OwnerKind.DAEMON_SET):
                    continue
                mask = state.static_mask(pod.spec) & ~has_gpu
                if not mask.any() or fill(free, state.requests_of(pod.spec), mask, 1) < 1:
                    continue
                try:
                    world.evict(pod, "descheduled")
                except EvictionRefusedError:
                    continue
                moved += 1
        return moved


def has_gpu_nodes(world: World) -> bool:
    gpus = world.state.index.gpu_positions()
    return bool(gpus) and bool(np.any(world.state.alloc[:, gpus] > 0))
