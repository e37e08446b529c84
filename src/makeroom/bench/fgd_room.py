"""makeroom in the FGD protocol: when a GPU task fits nowhere, the planner relocates lower-priority
tasks to other existing nodes (the cluster is fixed, so no node is bought) to make room for it.

The planner reads makeroom's model (``ClusterState``), which counts GPU thousandths per node, not per
device (docs/traces.md). Each call's nodes offer as GPU allocatable what the waiting task could use
(the devices holding at least its share), so "it fits now" means the same to both; a plan is applied
only when every step of it also fits device by device, else it is refused and counted.

The planner sees part of the cluster: the nodes where the task would fit were every lower-priority
task on them gone (the ``CANDIDATES`` missing least), and as destinations the ``DESTINATIONS`` nodes
with the most free CPU and those with the most free GPU. On all 1,523 nodes one call took about 7 s;
on this part, a fraction of a second (docs/benchmarks.md).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from makeroom.bench.fgd_score import Cluster, Ints, Shape
from makeroom.model import Node, NodeGroup, Pod, PodSpec, Resources
from makeroom.model.resources import CPU, GPU_SHARE, MEMORY, PODS
from makeroom.model.state import ClusterState
from makeroom.planner import Policy, plan

MILLI = 1000  # milli-units of a whole unit in makeroom's model
# The trace's nodes say nothing of a pod limit and the protocol sets none: more slots than tasks fit.
POD_SLOTS = Resources({PODS: 100_000 * MILLI})
CANDIDATES = 8  # as the planner's own heuristic compares at most 8 candidate nodes (Policy.max_candidates)
DESTINATIONS = 32  # by free CPU, and as many by free GPU


@dataclass(frozen=True, slots=True)
class Step:
    """A task a plan moves, and the node it goes to."""

    task: int
    to_node: int


@dataclass
class Room:
    """The placed tasks per node, and per priority what they hold on each node (to tell quickly
    where moving lower-priority tasks could ever help)."""

    nodes: Sequence[tuple[int, int, int]]
    on: dict[int, dict[int, tuple[Shape, int]]] = field(default_factory=dict)  # node -> task -> shape, prio
    held: dict[int, tuple[Ints, Ints, Ints]] = field(default_factory=dict)  # priority -> cpu, memory, gpu
    specs: dict[tuple[Shape, int], PodSpec] = field(default_factory=dict)
    plans: int = 0
    refused: int = 0
    plan_s: float = 0.0  # wall time in the planner (a measurement, reported, never asserted)
    # (shape, priority) the planner found no room for: not asked again until some plan is applied
    # (tasks only arrive, so room found nowhere rarely appears later; each call costs ~0.1 s)
    hopeless: set[tuple[Shape, int]] = field(default_factory=set)

    def spec(self, shape: Shape, priority: int) -> PodSpec:
        key = (shape, priority)
        if key not in self.specs:
            self.specs[key] = PodSpec(_resources(shape.cpu, shape.memory, shape.gpu_milli), priority)
        return self.specs[key]

    def bind(
        self, task: int, shape: Shape, priority: int, node: int, devices: tuple[int, ...], slots: int
    ) -> None:
        self.on.setdefault(node, {})[task] = (shape, priority)
        self._hold(priority, node, shape, devices, 1, slots)

    def unbind(
        self, task: int, shape: Shape, priority: int, node: int, devices: tuple[int, ...], slots: int
    ) -> None:
        del self.on[node][task]
        self._hold(priority, node, shape, devices, -1, slots)

    def _hold(
        self, priority: int, node: int, shape: Shape, devices: tuple[int, ...], sign: int, slots: int
    ) -> None:
        if priority not in self.held:
            n = len(self.nodes)
            zeros = np.zeros(n, dtype=np.int64)
            self.held[priority] = (zeros, zeros.copy(), np.zeros((n, slots), dtype=np.int64))
        cpu, mem, gpu = self.held[priority]
        cpu[node] += sign * shape.cpu
        mem[node] += sign * shape.memory
        for d in devices:
            gpu[node, d] += sign * shape.share

    def candidates(self, c: Cluster, shape: Shape, priority: int) -> Ints:
        """The nodes that would take the task were every lower-priority task on them gone, those that
        miss least first (the shortfall in CPU and in GPU, each over the task's own request)."""
        cpu, mem, gpu = c.cpu.copy(), c.memory.copy(), c.gpu.copy()
        for p, (hc, hm, hg) in self.held.items():
            if p < priority:
                cpu += hc
                mem += hm
                gpu += hg
        ok = (cpu >= shape.cpu) & (mem >= shape.memory) & ((gpu >= shape.share).sum(axis=1) >= shape.gpus)
        nodes = np.flatnonzero(ok)
        usable = np.where(c.gpu[nodes] >= max(shape.share, 1), c.gpu[nodes], 0).sum(axis=1)
        short = np.clip(shape.cpu - c.cpu[nodes], 0, None) / max(shape.cpu, 1)
        short = short + np.clip(shape.gpu_milli - usable, 0, None) / max(shape.gpu_milli, 1)
        return nodes[np.argsort(short, kind="stable")[:CANDIDATES]]

    def plan_for(
        self, c: Cluster, task: int, shape: Shape, priority: int, now: float
    ) -> tuple[int, list[Step]] | None:
        """The node the planner puts the task on and the moves it makes for it, or None."""
        if (shape, priority) in self.hopeless:
            return None
        near = self.candidates(c, shape, priority)
        if len(near) == 0:
            return None
        free_gpu = np.clip(c.gpu, 0, None).sum(axis=1)
        far = np.concatenate(
            [
                np.argsort(-c.cpu, kind="stable")[:DESTINATIONS],
                np.argsort(-free_gpu, kind="stable")[:DESTINATIONS],
            ]
        )
        chosen = list(dict.fromkeys([*near.tolist(), *far.tolist()]))
        state, pods = self._state(c, chosen, shape)
        pod = Pod(f"t{task}", self.spec(shape, priority), f"t{task}", created_at=now)
        state.add_pod(pod)
        started = time.perf_counter()
        self.plans += 1
        result = plan(state, Policy(now=now, use_upcoming_nodes=False), [pod])
        self.plan_s += time.perf_counter() - started
        placed = [p for p in result.placements if p.pod is pod and p.node is not None]
        if not placed or result.scale_ups or any(m.to_node is None for m in result.moves):
            self.hopeless.add((shape, priority))
            return None
        self.hopeless.clear()
        steps = [Step(pods[id(m.pod)], _index(m.to_node)) for m in result.moves if m.to_node is not None]
        return _index(placed[0].node or ""), steps

    def _state(self, c: Cluster, chosen: list[int], shape: Shape) -> tuple[ClusterState, dict[int, int]]:
        """The chosen nodes and their tasks in makeroom's model; each node's GPU allocatable is what it
        has in use plus the free devices that hold the waiting task's share. Groups at their max."""
        count: dict[tuple[int, int, int], int] = {}
        for n in chosen:
            count[self.nodes[n]] = count.get(self.nodes[n], 0) + 1
        groups = {s: NodeGroup(f"g{i}", _resources(*s[:2], s[2] * 1000) + POD_SLOTS, min=k, max=k)
                  for i, (s, k) in enumerate(count.items())}  # fmt: skip
        state = ClusterState(groups.values(), (), {CPU, MEMORY, GPU_SHARE, PODS}, capacity=len(chosen) + 1)
        pods: dict[int, int] = {}
        share = max(shape.share, 1)
        for n in chosen:
            g = groups[self.nodes[n]]
            used = int(np.clip(c.gpu_cap[n] * 1000 - np.clip(c.gpu[n], 0, None).sum(), 0, None))
            usable = int(np.where(c.gpu[n] >= share, c.gpu[n], 0).sum())
            alloc = Resources({**dict(g.capacity.items()), GPU_SHARE: (used + usable) * MILLI})
            state.add_node(Node(_name(n), g.name, alloc, g.node_labels()))
            tasks = []
            for t, (s, p) in self.on.get(n, {}).items():
                pod = Pod(f"t{t}", self.spec(s, p), f"t{t}", node=_name(n), ready=True)
                pods[id(pod)] = t
                tasks.append(pod)
            state.add_pods(tasks)
        return state, pods


def _name(i: int) -> str:
    return f"n{i}"


def _index(name: str) -> int:
    return int(name[1:])


def _resources(cpu: int, memory: int, gpu_milli: int) -> Resources:
    return Resources({CPU: cpu, MEMORY: memory, GPU_SHARE: gpu_milli * MILLI})
