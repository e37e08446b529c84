"""kube-scheduler with NVIDIA KAI scheduler's preemption delay (``kai.scheduler/preemption-delay``):
a pod may preempt only once it has been pending for the delay, so that the autoscaler can act first."""

from __future__ import annotations

from makeroom.model import Pod
from makeroom.sim.clock import Phase
from makeroom.sim.scheduler import Scheduler
from makeroom.sim.world import World


class DelayedPreemption(Scheduler):
    def __init__(self, world: World, scoring: str, delay: float) -> None:
        super().__init__(world, True, scoring)
        self.delay = delay
        self._called: set[str] = set()  # pods whose ripe instant already has a pass booked

    def preempt(self, pod: Pod) -> bool:
        ripe = pod.created_at + self.delay
        if self.world.now < ripe:
            if pod.key not in self._called:
                # nothing else may change when the delay ends: a pass is booked for that instant
                self._called.add(pod.key)
                self.world.loop.at(ripe, Phase.WORLD, self.wake)
            return False
        self._called.discard(pod.key)
        return super().preempt(pod)
