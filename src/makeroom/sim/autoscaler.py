"""cluster-autoscaler: scale-up for pods the scheduler cannot place, scale-down of unneeded nodes.

Modelled on the static autoscaler's loop: every scan interval, drop the pods it must not help
(expendable, nominated to an existing node, held by pod-scale-up-delay), drop the ones that fit on
existing or upcoming nodes, wait while the remaining pods are new (the oldest created less than 2 s
ago, or the oldest that asks for a GPU less than 30 s ago), then let the expander choose one group
(ties at random, as the expander chain ends) and add the nodes the binpacking estimate says, within
max. Scale-down: a node under the utilisation threshold (a GPU node by its GPU alone) whose pods all
fit on other nodes, unneeded for the unneeded time and not within the delay after a scale-up or a
failed scale-down, is tainted and drained through evictions that respect budgets (retried every 10 s
for at most 2 min), then removed; never below min.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from makeroom.model import (
    SCALE_UP_DELAY,
    Expander,
    Node,
    NodeGroup,
    OwnerKind,
    Pod,
    PodSpec,
    Taint,
    TaintEffect,
)
from makeroom.model.fit import label_fit
from makeroom.model.quantity import QuantityError, parse_duration
from makeroom.model.resources import CPU, MEMORY, Vector
from makeroom.model.scheduling import Placement, pod_mask
from makeroom.model.scheduling.interpodaffinity import term_matches
from makeroom.model.state import ClusterState, Mask
from makeroom.scenario.schema import AutoscalerSpec
from makeroom.sim.clock import Phase
from makeroom.sim.world import EvictionRefusedError, World

NEW_POD_BUFFER = 2.0
NEW_GPU_POD_BUFFER = 30.0
# The drain (core/scaledown/actuation/drain.go): a refused eviction is retried every 10 s, for at most
# --max-pod-eviction-time (2 min); then the drain fails, the node is untainted and scale-down waits
# --scale-down-delay-after-failure (3 min). Evicted pods are then awaited, checked every 5 s, for their
# grace period (at most --max-graceful-termination-sec) plus 30 s.
EVICTION_RETRY = 10.0
MAX_POD_EVICTION_TIME = 120.0
TERMINATION_POLL = 5.0
POD_EVICTION_HEADROOM = 30.0
SCALE_DOWN_DELAY_AFTER_FAILURE = 180.0
TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"
NON_EMPTY_CANDIDATES = 30  # --scale-down-non-empty-candidates-count


def _repels(state: ClusterState, a: Pod, b: Pod) -> bool:
    """Whether either pod's required anti-affinity keeps the other off its node (on a new node every
    topology domain is shared by the pods binpacked onto it)."""
    return any(term_matches(state, t, a, b) for t in a.spec.pod_anti_affinity) or any(
        term_matches(state, t, b, a) for t in b.spec.pod_anti_affinity
    )


@dataclass(slots=True)
class Option:
    group: NodeGroup
    nodes: int
    pods: list[Pod]
    waste: float


class Autoscaler:
    def __init__(self, world: World, spec: AutoscalerSpec, rng: random.Random) -> None:
        self.world = world
        self.spec = spec
        self.rng = rng
        self.last_scale_up = -float("inf")
        self.last_scale_down_failure = -float("inf")
        self.unneeded_since: dict[str, float] = {}
        self.draining: dict[str, float] = {}  # node -> drain start
        self._last_no_scale_up = -1
        self._unneeded_cache: tuple[int, set[str]] | None = None

    def start(self) -> None:
        if self.spec.enabled:
            self.world.loop.at(0.0, Phase.AUTOSCALER, self.scan)

    def scan(self) -> None:
        self.scale_up()
        self.scale_down()
        self.world.loop.after(self.spec.scan_interval, Phase.AUTOSCALER, self.scan)

    # --- scale-up ----------------------------------------------------------------------------
    def pods_to_help(self) -> list[Pod]:
        world = self.world
        now = world.now
        out = []
        for pod in world.pending.values():
            if pod.unschedulable_since is None or pod.terminating:
                continue
            if pod.priority < self.spec.expendable_pods_priority_cutoff:
                continue
            if pod.nominated_node is not None and pod.nominated_node in world.state.nodes:
                continue
            delay = pod.annotations.get(SCALE_UP_DELAY)
            if delay is not None:
                try:
                    if now - pod.created_at < parse_duration(delay):
                        continue
                except QuantityError:
                    pass
            out.append(pod)
        return out

    def _template_mask(self, spec: PodSpec) -> Mask:
        """Nodes that take pods of this spec by labels and taints, upcoming ones counted as Ready
        (as the autoscaler's snapshot does), nodes being drained not at all."""
        state = self.world.state
        mask = state.static_mask(spec).copy()
        for name, node in state.nodes.items():
            if not node.ready and name not in self.draining:
                mask[state.slot_of[name]] = label_fit(spec, node.labels, node.taints) is None
        for name in self.draining:
            mask[state.slot_of[name]] = False
        return mask

    def scale_up(self) -> None:
        world = self.world
        pods = sorted(self.pods_to_help(), key=lambda p: (-p.priority, p.created_at, p.seq))
        if not pods:
            return
        state = world.state
        free = state.free_after_nominations()
        remaining: list[Pod] = []
        for same in _by_spec(pods):
            spec = same[0].spec
            mask = self._template_mask(spec)
            others = pod_mask(Placement(state), same[0])  # the estimator runs those filters too
            if others is not None:
                mask = mask & others[: len(mask)]
            placed = fill(free, state.requests_of(spec), mask, len(same))
            remaining += same[placed:]
        if not remaining:
            return
        if all_pods_are_new(remaining, world.now):
            return
        options = [o for g in state.groups.values() if (o := self._option(g, remaining)) is not None]
        if not options:
            if self._last_no_scale_up != len(remaining):
                world.rec.event(world.now, "no_scale_up", pods=len(remaining))
                self._last_no_scale_up = len(remaining)
            return
        self._last_no_scale_up = -1
        choice = self._expand(options)
        self.last_scale_up = world.now
        world.rec.event(
            world.now,
            "scale_up",
            group=choice.group.name,
            nodes=choice.nodes,
            pods=sorted(p.name for p in choice.pods),
        )
        for _ in range(choice.nodes):
            world.provision_node(choice.group.name)

    def _option(self, group: NodeGroup, pods: list[Pod]) -> Option | None:
        state = self.world.state
        room = group.max - len(state.nodes_of(group.name))
        if room <= 0:
            return None
        cap = state.index.vector(group.capacity)
        labels = group.node_labels()
        helped: list[Pod] = []
        bins: list[Vector] = []
        in_bin: list[list[Pod]] = []
        for pod in sorted(pods, key=lambda p: -self._size(p, cap)):
            if label_fit(pod.spec, labels, group.taints) is not None:
                continue
            req = state.requests_of(pod.spec)
            if not np.all(req <= cap):
                continue
            for i, left_in_bin in enumerate(bins):
                if np.all(left_in_bin >= req) and not any(_repels(state, pod, o) for o in in_bin[i]):
                    bins[i] = left_in_bin - req
                    in_bin[i].append(pod)
                    helped.append(pod)
                    break
            else:
                if len(bins) < room:
                    bins.append(cap - req)
                    in_bin.append([pod])
                    helped.append(pod)
        if not helped:
            return None
        cols = [state.index.position(CPU), state.index.position(MEMORY)]
        # in floats: a node of 1Pi of memory is 2**60 milli-units, and a few of them pass int64
        total = cap[cols].astype(np.float64) * len(bins)
        left = sum((b[cols].astype(np.float64) for b in bins), start=np.zeros(len(cols)))
        waste = float(np.mean(np.where(total > 0, left / np.where(total > 0, total, 1), 0.0)))
        return Option(group, len(bins), helped, waste)

    @staticmethod
    def _size(pod: Pod, cap: Vector) -> float:
        return float(pod.spec.requests["cpu"]) / max(1, int(cap[0])) + float(
            pod.spec.requests["memory"]
        ) / max(1, int(cap[1]))

    def _expand(self, options: list[Option]) -> Option:
        expander = self.spec.expander
        order = {name: i for i, name in enumerate(self.world.state.groups)}
        if expander is Expander.RANDOM:
            return self.rng.choice(options)
        if expander is Expander.PRIORITY:
            return min(options, key=lambda o: order[o.group.name])
        if expander is Expander.PRICE:
            return min(
                options,
                key=lambda o: (o.group.price_per_hour * o.nodes / len(o.pods), order[o.group.name]),
            )
        # least-waste, then (as the autoscaler's expander chain ends) a random choice among the options
        # that waste exactly as little: two groups of the same CPU and memory, a CPU and a GPU group of
        # one shape, tie, and either may be chosen.
        least = min(o.waste for o in options)
        tied = sorted((o for o in options if o.waste == least), key=lambda o: order[o.group.name])
        return tied[0] if len(tied) == 1 else self.rng.choice(tied)

    # --- scale-down --------------------------------------------------------------------------
    def utilization(self) -> npt.NDArray[np.float64]:
        """Requested over allocatable per node: the larger of CPU and memory, or the GPU alone on a
        node that has GPUs."""
        state = self.world.state
        alloc = state.alloc.astype(np.float64)
        used = state.used.astype(np.float64)
        safe = np.where(alloc > 0, alloc, 1.0)
        share = np.where(alloc > 0, used / safe, 0.0)
        cols = [state.index.position(CPU), state.index.position(MEMORY)]
        util: npt.NDArray[np.float64] = share[:, cols].max(axis=1)
        gpus = state.index.gpu_positions()
        if gpus:
            has_gpu = (state.alloc[:, gpus] > 0).any(axis=1)
            util = np.where(has_gpu, share[:, gpus].max(axis=1), util)
        return util

    def _movable(self, node: Node, free: Vector, removing: set[str]) -> bool:
        """Every pod of the node fits on some other node that stays (a simulation on a copy)."""
        world = self.world
        state = world.state
        pods = []
        for pod in state.pods_on[node.name].values():
            if pod.terminating or pod.owner_kind == OwnerKind.DAEMON_SET:
                continue
            if pod.owner_kind in (OwnerKind.NONE, OwnerKind.NODE):
                return False
            allowed = world.disruptions_allowed(pod.workload)
            if allowed is not None and allowed < 1 and pod.ready:
                return False
            pods.append(pod)
        for same in _by_spec(pods):
            mask = state.static_mask(same[0].spec).copy()
            for gone in (*removing, node.name, *self.draining):
                mask[state.slot_of[gone]] = False
            if fill(free, state.requests_of(same[0].spec), mask, len(same)) < len(same):
                return False
        return True

    def _unneeded(self) -> set[str]:
        """Nodes the autoscaler could remove now; recomputed only when placements changed."""
        world = self.world
        state = world.state
        key = state.generation + len(self.draining)
        if self._unneeded_cache is not None and self._unneeded_cache[0] == key:
            return self._unneeded_cache[1]
        util = self.utilization()
        free = state.free()
        size = {g: len(state.nodes_of(g)) for g in state.groups}
        for name in self.draining:
            size[state.nodes[name].group] -= 1
        candidates = [
            name
            for name, node in state.nodes.items()
            if node.ready
            and name not in self.draining
            and util[state.slot_of[name]] < self.spec.scale_down_utilization_threshold
        ]
        candidates.sort(key=lambda n: (util[state.slot_of[n]], world.node_order[n]))
        unneeded: set[str] = set()
        non_empty = 0
        for name in candidates:
            node = state.nodes[name]
            if size[node.group] <= state.groups[node.group].min:
                continue
            busy = _busy(state, name)
            if busy and non_empty >= NON_EMPTY_CANDIDATES:
                continue
            trial = free.copy()
            if not self._movable(node, trial, unneeded):
                continue
            free = trial
            unneeded.add(name)
            non_empty += busy
            size[node.group] -= 1
        self._unneeded_cache = (key, unneeded)
        return unneeded

    def scale_down(self) -> None:
        world = self.world
        state = world.state
        now = world.now
        unneeded = self._unneeded()
        for name in list(self.unneeded_since):
            if name not in unneeded:
                del self.unneeded_since[name]
        for name in unneeded:
            self.unneeded_since.setdefault(name, now)
        if (
            now - self.last_scale_up < self.spec.scale_down_delay_after_add
            or now - self.last_scale_down_failure < SCALE_DOWN_DELAY_AFTER_FAILURE
            or self.draining
        ):
            return
        ripe = [
            n
            for n in sorted(unneeded, key=world.node_order.__getitem__)
            if now - self.unneeded_since[n] >= self.spec.scale_down_unneeded_time
        ]
        empty = [n for n in ripe if not _busy(state, n)]
        for name in empty:
            self.unneeded_since.pop(name, None)
            world.rec.event(now, "scale_down", node=name, group=state.nodes[name].group, empty=True)
            world.remove_node(name, "scale_down")
        busy = [n for n in ripe if n not in empty]
        if busy and not empty:
            self.drain(busy[0])

    def drain(self, name: str) -> None:
        world = self.world
        node = world.state.nodes[name]
        self.draining[name] = world.now
        self.unneeded_since.pop(name, None)
        world.set_taints(name, (*node.taints, Taint(TO_BE_DELETED, "", TaintEffect.NO_SCHEDULE)))
        world.rec.event(world.now, "scale_down", node=name, group=node.group, empty=False)
        self._drain_step(name)

    def _drain_step(self, name: str) -> None:
        world = self.world
        state = world.state
        if name not in state.nodes:
            self.draining.pop(name, None)
            return
        left = [p for p in state.pods_on[name].values() if p.owner_kind != OwnerKind.DAEMON_SET]
        refused = False
        for pod in left:
            if pod.terminating:
                continue
            try:
                world.evict(pod, "evicted")
            except EvictionRefusedError:
                refused = True
        if not left:
            self.draining.pop(name, None)
            world.remove_node(name, "scale_down")
            return
        elapsed = world.now - self.draining[name]
        if refused:
            if elapsed + EVICTION_RETRY < MAX_POD_EVICTION_TIME:
                world.loop.after(EVICTION_RETRY, Phase.AUTOSCALER, lambda: self._drain_step(name))
                return
            self._drain_failed(name)
            return
        if elapsed > self.spec.max_graceful_termination + POD_EVICTION_HEADROOM:
            self._drain_failed(name)
            return
        world.loop.after(TERMINATION_POLL, Phase.AUTOSCALER, lambda: self._drain_step(name))

    def _drain_failed(self, name: str) -> None:
        world = self.world
        self.draining.pop(name, None)
        self.last_scale_down_failure = world.now
        node = world.state.nodes[name]
        world.set_taints(name, tuple(t for t in node.taints if t.key != TO_BE_DELETED))
        world.rec.event(world.now, "scale_down_failed", node=name)


def all_pods_are_new(pods: list[Pod], now: float) -> bool:
    """The autoscaler's wait for more pods (core/static_autoscaler.go, allPodsAreNew): while the oldest
    pod it would help was created less than 2 s ago, or the oldest of them that asks for a GPU less
    than 30 s ago. By creation time, over the whole set: one new GPU pod holds the others too."""
    if not pods:
        return False
    if now - min(p.created_at for p in pods) < NEW_POD_BUFFER:
        return True
    gpu = [p.created_at for p in pods if p.spec.requests.requests_gpu()]
    return bool(gpu) and now - min(gpu) < NEW_GPU_POD_BUFFER


def _by_spec(pods: list[Pod]) -> list[list[Pod]]:
    """Pods grouped by their (shared) spec, in the order of the first of each group."""
    groups: dict[int, list[Pod]] = {}
    for pod in pods:
        groups.setdefault(id(pod.spec), []).append(pod)
    return list(groups.values())


def fill(free: Vector, req: Vector, mask: Mask, count: int) -> int:
    """Place up to ``count`` copies of ``req`` on the masked nodes in slot order, first-fit, and take
    their room out of ``free``; return how many were placed."""
    need = req > 0
    if not need.any():
        return count
    room = free[:, need] // req[need]
    copies = np.where(mask, room.min(axis=1).clip(min=0), 0)
    before = np.cumsum(copies) - copies
    take = np.minimum(copies, np.clip(count - before, 0, None))
    free -= take[:, None] * req
    return int(min(count, take.sum()))


def _busy(state: ClusterState, name: str) -> bool:
    return any(p.owner_kind != OwnerKind.DAEMON_SET for p in state.pods_on[name].values())
