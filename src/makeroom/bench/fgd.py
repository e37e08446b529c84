"""``makeroom bench fgd``: the steady-state protocol of "Beware of Fragmentation" (Weng et al., USENIX
ATC '23) on the openb trace, each scoring policy with and without makeroom.

The protocol, as the authors' artifact runs it: openb's nodes are the cluster, fixed; the tasks are
shuffled (one seed per run) and fed one by one, none leaving, and once the trace's tasks are all in,
tasks drawn again at random from it, until the arrived tasks' GPU requests reach ``ratio`` (1.3) times
the cluster's GPUs; a task that fits nowhere stays unplaced. After each arrival: the GPUs unallocated
and the fragmented GPUs (fgd_score), against the arrived workload in % of the cluster's GPUs.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from makeroom.bench.fgd_room import Room
from makeroom.bench.fgd_score import (
    POLICIES,
    SCORES,
    WHOLE,
    Cluster,
    Policy,
    Shape,
    Typical,
    fragmentation,
    policy,
    typical,
)
from makeroom.bench.fleet import interval
from makeroom.trace.gpu import PRIORITY, read_dir

RATIO = 1.3
SEEDS = tuple(range(42, 52))
# The order of the nodes, which breaks ties: the trace's, or as the artifact runs it, shuffled once per
# run (its simulator prefixes each node's name with a seeded random rank, and its scheduler takes the
# first name among the top scores).
NODE_ORDERS = ("trace", "shuffled")
STEPS = 131  # the curve at 0, 1, ..., 130% of the cluster's GPUs arrived (1.3x)


@dataclass(frozen=True, slots=True)
class Workload:
    source: str
    nodes: tuple[tuple[int, int, int], ...]  # milli-cores, milli-bytes, GPUs
    tasks: tuple[tuple[Shape, int], ...]  # shape, priority (from the QoS class, docs/traces.md)

    @property
    def gpu_milli(self) -> int:
        return sum(n[2] for n in self.nodes) * WHOLE


def load(directory: Path, gpu_nodes_only: bool = False) -> Workload:
    """The trace's nodes and tasks; ``gpu_nodes_only``: without the 310 nodes that have no GPU, as the
    authors' artifact runs it (its openb_node_list_gpu_node.csv), CPU-only tasks then on GPU nodes."""
    machines, tasks = read_dir(directory)
    return Workload(
        str(directory) + (" (GPU nodes only)" if gpu_nodes_only else ""),
        tuple((m.cpu, m.memory, m.gpus) for m in machines if m.gpus or not gpu_nodes_only),
        tuple((Shape(t.cpu, t.memory, t.num_gpu, t.share), PRIORITY[t.qos]) for t in tasks),
    )


def shuffled(w: Workload, seed: int) -> Workload:
    """The same nodes in a random order drawn from ``seed`` (another stream than the arrivals')."""
    nodes = list(w.nodes)
    random.Random(f"nodes/{seed}").shuffle(nodes)
    return Workload(w.source, tuple(nodes), w.tasks)


def arrivals(w: Workload, seed: int, ratio: float = RATIO) -> list[int]:
    """Task indices in arrival order: the trace shuffled, then drawn again, while the GPU requests
    arrived stay within ``ratio`` x the cluster's GPUs (the artifact's rule: the first task that would
    pass it ends the arrivals)."""
    rng = random.Random(seed)
    order = list(range(len(w.tasks)))
    rng.shuffle(order)
    target = ratio * w.gpu_milli
    out: list[int] = []
    total = 0
    for t in order:
        total += w.tasks[t][0].gpu_milli
        if total > target:
            return out
        out.append(t)
    if total == 0:
        return out  # no GPU demand at all: the trace once
    while True:
        t = rng.randrange(len(w.tasks))
        total += w.tasks[t][0].gpu_milli
        if total > target:
            return out
        out.append(t)


@dataclass
class Run:
    """One policy over one arrival order, with or without makeroom."""

    w: Workload
    policy: Policy
    shapes: tuple[tuple[Shape, float], ...]
    room: Room | None = None

    def __post_init__(self) -> None:
        self.c = Cluster.of(self.w.nodes)
        self.typical = Typical.of(self.shapes)
        self.frag = fragmentation(self.c.cpu, self.c.gpu, self.typical)
        self.where: dict[int, tuple[int, tuple[int, ...], Shape, int]] = {}
        self.moves = 0

    def _changed(self, node: int) -> None:
        self.policy.changed(node)
        self.frag[node] = fragmentation(self.c.cpu[[node]], self.c.gpu[[node]], self.typical)[0]

    def _devices(self, node: int, shape: Shape) -> tuple[int, ...]:
        return self.policy.devices(self.c, shape, node)

    def place(self, task: int, shape: Shape, priority: int, node: int, devices: tuple[int, ...]) -> None:
        self.c.take(node, shape, devices)
        self.where[task] = (node, devices, shape, priority)
        self._changed(node)
        if self.room is not None:
            self.room.bind(task, shape, priority, node, devices, self.c.gpu.shape[1])

    def lift(self, task: int) -> tuple[int, tuple[int, ...], Shape, int]:
        node, devices, shape, priority = self.where.pop(task)
        self.c.give(node, shape, devices)
        self._changed(node)
        if self.room is not None:
            self.room.unbind(task, shape, priority, node, devices, self.c.gpu.shape[1])
        return node, devices, shape, priority

    def arrive(self, task: int, shape: Shape, priority: int) -> bool:
        got = self.policy.choose(self.c, shape)
        if got is not None:
            self.place(task, shape, priority, *got)
            return True
        if self.room is None or shape.gpus == 0:
            return False
        return self._relocate(task, shape, priority)

    def _relocate(self, task: int, shape: Shape, priority: int) -> bool:
        assert self.room is not None
        proposal = self.room.plan_for(self.c, task, shape, priority, float(task))
        if proposal is None:
            return False
        node, steps = proposal
        lifted = {s.task: self.lift(s.task) for s in steps}
        done: list[int] = []
        ok = True
        for s in steps:
            _, _, vshape, vprio = lifted[s.task]
            if not self.c.fits_on(s.to_node, vshape):
                ok = False
                break
            self.place(s.task, vshape, vprio, s.to_node, self._devices(s.to_node, vshape))
            done.append(s.task)
        if ok and self.c.fits_on(node, shape):
            self.place(task, shape, priority, node, self._devices(node, shape))
            self.moves += len(steps)
            return True
        for t in done:  # the devices disagree with the plan: undo it
            self.lift(t)
        for t, (vnode, vdevices, vshape, vprio) in lifted.items():
            self.place(t, vshape, vprio, vnode, vdevices)
        self.room.refused += 1
        return False


def run(
    w: Workload,
    order: Sequence[int],
    name: str,
    makeroom: bool,
    shapes: tuple[tuple[Shape, float], ...],
    tick: Callable[[float], None] | None = None,
    steps: int = STEPS,
    scores: str = "exact",
) -> dict[str, Any]:
    """Feed the tasks in ``order``; the curves (at 0, 1, ..., steps - 1 % arrived) and totals."""
    started = time.perf_counter()
    chosen = policy(name, shapes, len(w.nodes), scores)
    r = Run(w, chosen, shapes, Room(w.nodes) if makeroom else None)
    capacity = w.gpu_milli
    arrived = np.zeros(len(order) + 1)
    placed = np.zeros(len(order) + 1)
    fragmented = np.zeros(len(order) + 1)
    fragmented[0] = float(r.frag.sum())
    demand = got = unplaced = 0
    for i, t in enumerate(order):
        shape, priority = w.tasks[t]
        demand += shape.gpu_milli
        if r.arrive(i, shape, priority):
            got += shape.gpu_milli
        else:
            unplaced += 1
        arrived[i + 1], placed[i + 1], fragmented[i + 1] = demand, got, float(r.frag.sum())
        if tick is not None:
            tick(100 * demand / capacity)
    # the last arrival at or below each whole % of the capacity
    at = np.searchsorted(arrived, np.arange(steps) * capacity / 100, side="right") - 1
    return {
        "tasks": len(order),
        "gpu_demand": demand / WHOLE,
        "gpu_placed": got / WHOLE,
        "placed_demand_share": got / demand if demand else 1.0,
        "unplaced_tasks": unplaced,
        "unallocated_gpus": (capacity - got) / WHOLE,
        "fragmented_gpus": float(r.frag.sum()) / WHOLE,
        "moves": r.moves,
        "plans": 0 if r.room is None else r.room.plans,
        "plans_refused": 0 if r.room is None else r.room.refused,
        "plan_s": 0.0 if r.room is None else round(r.room.plan_s, 2),
        "wall_s": round(time.perf_counter() - started, 2),
        "curve": {
            "unallocated_gpus": [round((capacity - placed[k]) / WHOLE, 3) for k in at],
            "fragmented_gpus": [round(fragmented[k] / WHOLE, 3) for k in at],
        },
    }


SUMMARY = (
    "unallocated_gpus",
    "fragmented_gpus",
    "placed_demand_share",
    "unplaced_tasks",
    "moves",
    "plans",
    "plans_refused",
    "plan_s",
    "wall_s",
)

Tracker = Callable[[str, float], Callable[[float], None]]


def bench(
    w: Workload,
    policies: Sequence[str] = POLICIES,
    seeds: Sequence[int] = SEEDS,
    ratio: float = RATIO,
    track: Tracker | None = None,
    scores: str = "exact",
    node_order: str = "trace",
) -> dict[str, Any]:
    """Every policy without and with makeroom over the same arrival orders; means and 95% intervals.
    ``scores``: the policies' scores exact, or as the authors' artifact computes them (SCORES);
    ``node_order``: ties to the trace's first node, or to the first in an order drawn per seed."""
    if scores not in SCORES:
        raise ValueError(f"unknown score resolution {scores!r}")
    if node_order not in NODE_ORDERS:
        raise ValueError(f"unknown node order {node_order!r}")
    shapes = typical(shape for shape, _ in w.tasks)
    orders = {seed: arrivals(w, seed, ratio) for seed in seeds}
    steps = round(100 * ratio) + 1
    runs: dict[str, list[dict[str, Any]]] = {}
    for name in policies:
        for makeroom in (False, True):
            label = name + ("+makeroom" if makeroom else "")
            runs[label] = []
            for seed in seeds:
                tick = None if track is None else track(f"{label} · seed {seed}", 100 * ratio)
                cluster = shuffled(w, seed) if node_order == "shuffled" else w
                out = run(cluster, orders[seed], name, makeroom, shapes, tick, steps, scores)
                runs[label].append({"seed": seed, **out})
    return {
        "benchmark": "fgd",
        "source": w.source,
        "nodes": len(w.nodes),
        "gpus": w.gpu_milli // WHOLE,
        "trace_tasks": len(w.tasks),
        "ratio": ratio,
        "scores": scores,
        "node_order": node_order,
        "seeds": list(seeds),
        "typical_shapes": len(shapes),
        "arrived_pct": list(range(steps)),
        "policies": {name: _compare(runs[name], runs[name + "+makeroom"]) for name in policies},
        "runs": runs,
    }


def merge(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Results of the same trace and ratio over other seeds or policies as one (runs split across
    processes); a policy's seeds must be the same with and without makeroom."""
    first = results[0]
    for other in results[1:]:
        for key in ("source", "nodes", "gpus", "ratio", "arrived_pct"):
            if other[key] != first[key]:
                raise ValueError(f"results differ in {key}: {first[key]!r} and {other[key]!r}")
        for key in ("scores", "node_order"):
            if _setting(other, key) != _setting(first, key):
                raise ValueError(
                    f"results differ in {key}: {_setting(first, key)!r} and {_setting(other, key)!r}"
                )
    runs: dict[str, list[dict[str, Any]]] = {}
    for result in results:
        for label, rs in result["runs"].items():
            runs.setdefault(label, []).extend(rs)
    for rs in runs.values():
        rs.sort(key=lambda r: int(r["seed"]))
    policies = sorted((label for label in runs if not label.endswith("+makeroom")), key=POLICIES.index)
    seeds = sorted({int(r["seed"]) for rs in runs.values() for r in rs})
    return {
        **{k: first[k] for k in ("benchmark", "source", "nodes", "gpus", "trace_tasks", "ratio")},
        "scores": _setting(first, "scores"),
        "node_order": _setting(first, "node_order"),
        "seeds": seeds,
        **{k: first[k] for k in ("typical_shapes", "arrived_pct")},
        "policies": {name: _compare(runs[name], runs[name + "+makeroom"]) for name in policies},
        "runs": runs,
    }


def _setting(result: dict[str, Any], key: str) -> str:
    # results written before these options had exact scores and the trace's node order
    return str(result.get(key, {"scores": "exact", "node_order": "trace"}[key]))


def _compare(without: list[dict[str, Any]], with_: list[dict[str, Any]]) -> dict[str, Any]:
    """Both variants' summaries and what makeroom's moves bought: moves per GPU it let be placed."""
    per_gpu: list[float | None] = []
    for a, b in zip(without, with_, strict=True):
        gained = b["gpu_placed"] - a["gpu_placed"]
        per_gpu.append(b["moves"] / gained if gained > 0 else None)
    return {
        "without": _summary(without),
        "with": _summary(with_),
        "gpus_gained": interval(
            [b["gpu_placed"] - a["gpu_placed"] for a, b in zip(without, with_, strict=True)]
        ),
        "moves_per_gpu_gained": interval(per_gpu),
    }


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {key: interval([r[key] for r in runs]) for key in SUMMARY}
    curves = np.asarray([r["curve"]["unallocated_gpus"] for r in runs])
    out["curve_unallocated_gpus"] = [round(float(v), 2) for v in curves.mean(axis=0)]
    frags = np.asarray([r["curve"]["fragmented_gpus"] for r in runs])
    out["curve_fragmented_gpus"] = [round(float(v), 2) for v in frags.mean(axis=0)]
    return out
