"""makeroom in the FGD protocol: when a GPU task fits nowhere, the planner relocates lower-priority
tasks to other existing nodes (the cluster is fixed, so no node is bought) to make room for it.

The planner reads makeroom's model (``ClusterState``), which counts GPU thousandths per node, not per
device (docs/traces.md). For each call the nodes' GPU allocatable is what the waiting task could use
(the devices holding at least its share), so "it fits now" means the same to both; a plan is applied
only when every step of it also fits device by device, else it is refused and counted.
"""

from __future__ import annotations

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


@dataclass(frozen=True, slots=True)
class Step:
    """A task moved by a plan: from node to node, on these devices there."""

    task: int
    to_node: int


@dataclass
class Room:
    """A mirror of the placed tasks in makeroom's model, and per priority what the tasks of that
    priority hold on each node (to tell quickly where moving lower-priority tasks could ever help)."""

    nodes: Sequence[tuple[int, int, int]]
    state: ClusterState = field(init=False)
    pods: dict[int, Pod] = field(default_factory=dict)
    held: dict[int, tuple[Ints, Ints, Ints]] = field(default_factory=dict)  # priority -> cpu, memory, gpu
    specs: dict[tuple[Shape, int], PodSpec] = field(default_factory=dict)
    plans: int = 0
    refused: int = 0

    def __post_init__(self) -> None:
        shapes = sorted(set(self.nodes))
        groups = [
            NodeGroup(f"g{i}", _resources(cpu, mem, gpus * MILLI) + POD_SLOTS, min=n, max=n)
            for i, (cpu, mem, gpus) in enumerate(shapes)
            for n in [sum(1 for s in self.nodes if s == (cpu, mem, gpus))]
        ]
        self.state = ClusterState(groups, (), {CPU, MEMORY, GPU_SHARE}, capacity=len(self.nodes) + 1)
        group_of = {s: g for s, g in zip(shapes, groups, strict=True)}
        for i, shape in enumerate(self.nodes):
            g = group_of[shape]
            self.state.add_node(Node(_name(i), g.name, g.capacity, g.node_labels()))
        self.gpu_col = self.state.index.position(GPU_SHARE)
        self.slots = np.asarray([self.state.slot_of[_name(i)] for i in range(len(self.nodes))])

    def spec(self, shape: Shape, priority: int) -> PodSpec:
        key = (shape, priority)
        if key not in self.specs:
            self.specs[key] = PodSpec(_resources(shape.cpu, shape.memory, shape.gpu_milli), priority)
        return self.specs[key]

    def bind(self, task: int, shape: Shape, priority: int, node: int, devices: tuple[int, ...], gpu_slots: int) -> None:
        pod = self.pods.get(task)
        if pod is None:
            pod = Pod(f"t{task}", self.spec(shape, priority), f"t{task}", ready=True)
            self.pods[task] = pod
        self.state.add_pod(pod)
        self.state.bind(pod, _name(node))
        self._hold(priority, node, shape, devices, 1, gpu_slots)

    def unbind(self, task: int, shape: Shape, priority: int, node: int, devices: tuple[int, ...], gpu_slots: int) -> None:
        pod = self.pods[task]
        self.state.remove_pod(pod)
        self._hold(priority, node, shape, devices, -1, gpu_slots)

    def _hold(self, priority: int, node: int, shape: Shape, devices: tuple[int, ...], sign: int, slots: int) -> None:
        if priority not in self.held:
            n = len(self.nodes)
            self.held[priority] = (
                np.zeros(n, dtype=np.int64),
                np.zeros(n, dtype=np.int64),
                np.zeros((n, slots), dtype=np.int64),
            )
        cpu, mem, gpu = self.held[priority]
        cpu[node] += sign * shape.cpu
        mem[node] += sign * shape.memory
        for d in devices:
            gpu[node, d] += sign * shape.share

    def could_help(self, c: Cluster, shape: Shape, priority: int) -> bool:
        """Whether some node would take the task were every lower-priority task on it gone."""
        cpu, mem, gpu = c.cpu.copy(), c.memory.copy(), c.gpu.copy()
        for p, (hc, hm, hg) in self.held.items():
            if p < priority:
                cpu += hc
                mem += hm
                gpu += hg
        ok = (cpu >= shape.cpu) & (mem >= shape.memory) & ((gpu >= shape.share).sum(axis=1) >= shape.gpus)
        return bool(ok.any())

    def plan_for(self, c: Cluster, task: int, shape: Shape, priority: int, now: float) -> tuple[int, list[Step]] | None:
        """The node the planner puts the task on and the moves it makes for it, or None."""
        pod = Pod(f"t{task}", self.spec(shape, priority), f"t{task}", created_at=now)
        self.state.add_pod(pod)
        usable = np.where(c.gpu >= max(shape.share, 1), c.gpu, 0).sum(axis=1)
        col = self.state.alloc[:, self.gpu_col]
        saved = col.copy()
        col[self.slots] = (self.state.used[self.slots, self.gpu_col] + usable * MILLI)
        self.state.alloc[:, self.gpu_col] = col
        self.state.generation += 1
        try:
            self.plans += 1
            result = plan(self.state, Policy(now=now, use_upcoming_nodes=False), [pod])
        finally:
            self.state.alloc[:, self.gpu_col] = saved
            self.state.generation += 1
            self.state.remove_pod(pod)
        placed = [p for p in result.placements if p.pod is pod and p.node is not None]
        if not placed or result.scale_ups or any(m.to_node is None for m in result.moves):
            return None
        task_of = {id(p): t for t, p in self.pods.items()}
        steps = [Step(task_of[id(m.pod)], _index(m.to_node)) for m in result.moves if m.to_node is not None]
        return _index(placed[0].node or ""), steps


def _name(i: int) -> str:
    return f"n{i}"


def _index(name: str) -> int:
    return int(name[1:])


def _resources(cpu: int, memory: int, gpu_milli: int) -> Resources:
    return Resources({CPU: cpu, MEMORY: memory, GPU_SHARE: gpu_milli * MILLI})
