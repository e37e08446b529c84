"""kube-scheduler: a priority queue, the filter and score stages, nomination and preemption."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from makeroom.model import Pod, TaintEffect
from makeroom.model.resources import CPU, MEMORY
from makeroom.model.scheduling import Placement, feasible
from makeroom.model.scheduling.score import affinity_score, spread_score
from makeroom.model.state import Mask
from makeroom.sim.clock import Phase
from makeroom.sim.preemption import eligible_to_preempt, find_preemption
from makeroom.sim.recorder import Removal
from makeroom.sim.world import World


class Scheduler:
    def __init__(self, world: World, preemption: bool, scoring: str) -> None:
        self.world = world
        self.preemption = preemption
        self.most_allocated = scoring == "MostAllocated"
        self._queued = False
        # Per workload, its running pods per node slot, for PodTopologySpread; valid within one pass.
        self._spread_counts: dict[str, npt.NDArray[np.int64]] = {}
        world.on_change.append(self.wake)

    def wake(self) -> None:
        if not self._queued:
            self._queued = True
            self.world.loop.at(self.world.now, Phase.SCHEDULER, self.run_pass)

    def run_pass(self) -> None:
        self._queued = False
        self._spread_counts.clear()
        world = self.world
        queue = sorted(world.pending.values(), key=lambda p: (-p.priority, p.created_at, p.seq))
        # Room only shrinks during a pass, so a spec that did not fit will not fit later in it.
        no_fit: set[object] = set()
        no_victims: set[object] = set()
        for pod in queue:
            if pod.key not in world.pending:
                continue
            sig = (pod.spec, pod.nominated_node)
            if sig not in no_fit:
                node = self.select_node(pod)
                if node is not None:
                    world.bind(pod, node)
                    counts = self._spread_counts.get(pod.workload or "")
                    if counts is not None:
                        counts[world.state.slot_of[node]] += 1
                    continue
                no_fit.add(sig)
            if pod.unschedulable_since is None:
                pod.unschedulable_since = world.now
                world.rec.event(world.now, "pod_unschedulable", pod=pod.name)
            if not self.preemption or pod.spec in no_victims:
                continue
            if eligible_to_preempt(world.state, pod) and not self.preempt(pod):
                no_victims.add(pod.spec)

    def select_node(self, pod: Pod) -> str | None:
        state = self.world.state
        mask = feasible(state, pod)
        nominated = pod.nominated_node
        if nominated is not None and nominated in state.slot_of and mask[state.slot_of[nominated]]:
            return nominated
        if not mask.any():
            return None
        return self.best(pod, mask)

    def best(self, pod: Pod, mask: Mask) -> str:
        """The default profile's scores that differ between nodes for these pods, in integers as
        kube-scheduler computes them: NodeResourcesFit (weight 1) and NodeResourcesBalancedAllocation
        (1) over cpu and memory, PodTopologySpread (2), by the pod's ScheduleAnyway constraints or
        the system defaults (a workload's replicas spread over nodes and zones), and InterPodAffinity
        (2), by preferred (anti-)affinity, and TaintToleration (3), by PreferNoSchedule taints. Ties go to
        the oldest node so that a run is reproducible (kube-scheduler picks one at random)."""
        state = self.world.state
        cols = [state.index.position(CPU), state.index.position(MEMORY)]
        alloc = state.alloc[:, cols]
        used = state.used[:, cols] + state.requests_of(pod.spec)[cols]
        safe = np.where(alloc > 0, alloc, 1)
        part = np.where(alloc > 0, (used if self.most_allocated else alloc - used) * 100 // safe, 0)
        fit = part.sum(axis=1) // len(cols)
        share = np.minimum(np.where(alloc > 0, used / safe, 0.0), 1.0)
        balanced = ((1.0 - np.abs(share[:, 0] - share[:, 1]) / 2) * 100).astype(np.int64)
        soft = 2 * self.spread(pod, mask) + 2 * affinity_score(Placement(state), pod, mask)
        soft += 3 * self.taint_toleration(pod, mask)
        score = np.where(mask, fit + balanced + soft, -1)
        top = np.flatnonzero(score == score.max())
        oldest = state.node_at[int(top[np.argmin(state.order[top])])]
        assert oldest is not None
        return oldest.name

    def taint_toleration(self, pod: Pod, mask: Mask) -> npt.NDArray[np.int64]:
        """TaintToleration's score (0-100): fewer PreferNoSchedule taints the pod does not tolerate is
        better, normalised as kube-scheduler does (``100 - 100 * count // most`` among the feasible
        nodes; 100 everywhere when no feasible node has one)."""
        state = self.world.state
        counts = np.zeros(len(mask), dtype=np.int64)
        for slot in np.flatnonzero(mask):
            node = state.node_at[int(slot)]
            assert node is not None
            counts[slot] = sum(
                1
                for t in node.taints
                if t.effect is TaintEffect.PREFER_NO_SCHEDULE
                and not any(tol.tolerates(t) for tol in pod.spec.tolerations)
            )
        most = int(counts.max()) if counts.size else 0
        if most == 0:
            return np.full(len(mask), 100, dtype=np.int64)
        return 100 - counts * 100 // most

    def spread(self, pod: Pod, mask: Mask) -> npt.NDArray[np.int64]:
        """PodTopologySpread's normalised score (0-100, model.scheduling.score): the pod's own
        ScheduleAnyway constraints, or the system defaults (hostname, zone) over its workload's
        running replicas; a pod without a controller and without constraints scores 0 everywhere."""
        state = self.world.state
        counts = None
        if pod.workload is not None:
            counts = self._spread_counts.get(pod.workload)
            if counts is None:
                counts = np.zeros(len(mask), dtype=np.int64)
                for other in self.world.pods_of.get(pod.workload, {}).values():
                    if other.node is not None and not other.terminating and other.node in state.slot_of:
                        counts[state.slot_of[other.node]] += 1
                self._spread_counts[pod.workload] = counts
        return spread_score(Placement(state), pod, mask, counts)

    def preempt(self, pod: Pod) -> bool:
        world = self.world
        choice = find_preemption(world.state, pod, world.disruptions_allowed)
        if choice is None:
            return False
        self._spread_counts.clear()
        for victim in choice.victims:
            world.rec.count_removal(victim.workload, Removal.PREEMPTED)
            world.rec.event(world.now, "preempted_by", pod=victim.name, preemptor=pod.name, node=choice.node)
            world.delete_pod(victim, "preempted")
        for other in list(world.state.nominated[choice.node].values()):
            if other.priority < pod.priority:
                world.state.clear_nomination(other)
        world.state.nominate(pod, choice.node)
        world.rec.event(world.now, "nominated", pod=pod.name, node=choice.node)
        return True
