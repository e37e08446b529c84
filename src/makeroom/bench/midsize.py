"""Mid-size clusters where several pods wait at once: the instances of the joint-oracle tests and of
``makeroom bench plan``'s joint figures.

Each is drawn from its seed alone (``random.Random(seed)``), so a seed names one cluster for ever:
three node groups (a CPU group and two GPU groups, priced or not, some at their max), 5-9 nodes, 30-70
running pods: CPU-only replicas of a few workloads on every node, the ones that tolerate the GPU taint
on GPU nodes too (issue 1966), GPU replicas on some GPUs, some pods that may not move (opted out,
budgets at maxUnavailable 0, DaemonSets), sometimes a node still being provisioned; and 2-4 GPU pods of
mixed priorities waiting, none of which fits on any node without a move.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from makeroom.model import (
    DO_NOT_MOVE,
    DisruptionBudget,
    Node,
    NodeGroup,
    OwnerKind,
    Pod,
    PodSpec,
    Resources,
    Taint,
    Toleration,
    Workload,
)
from makeroom.model.fit import static_fit
from makeroom.model.state import ClusterState

GPU = "nvidia.com/gpu"
GPU_TAINT = Taint(GPU, "present")
GPU_TOLERATION = Toleration(GPU, "Exists")


@dataclass(frozen=True, slots=True)
class Instance:
    seed: int
    state: ClusterState
    waiting: tuple[Pod, ...]


def _spec(cpu_m: int, mem_mi: int, gpu: int, priority: int, tolerates: bool, selector: str | None) -> PodSpec:
    req = {"cpu": f"{cpu_m}m", "memory": f"{mem_mi}Mi"}
    if gpu:
        req[GPU] = str(gpu)
    return PodSpec(
        Resources.parse(req),
        priority,
        node_selector=(("makeroom.io/group", selector),) if selector else (),
        tolerations=(GPU_TOLERATION,) if tolerates else (),
    )


def midsize(seed: int, varied: bool = False) -> Instance:
    """One mid-size cluster with several GPU pods waiting, drawn from ``seed``. ``varied``: shapes
    that vary more (issue 22): a second CPU group of larger nodes, each GPU group tainted or not on
    its own, budgets by ``minAvailable`` too, and 2-5 pods waiting, some for two GPUs, some for a
    large share of a CPU node, at priorities from 100 to 1000."""
    rng = random.Random(seed if not varied else 1_000_003 + seed)
    for _ in range(50):
        found = _attempt(rng, seed, varied)
        if found is not None:
            return found
    raise RuntimeError(f"no instance for seed {seed}")  # pragma: no cover (never seen)


def _attempt(rng: random.Random, seed: int, varied: bool = False) -> Instance | None:
    priced = rng.random() < 0.8
    tainted = rng.random() < 0.7
    n_cpu, n_a, n_b = rng.randint(2, 4), rng.randint(1, 3), rng.randint(1, 2)
    taints = (GPU_TAINT,) if tainted else ()
    taints_b = taints if not varied or rng.random() < 0.5 else ((GPU_TAINT,) if not tainted else ())
    groups = [
        NodeGroup(
            "cpu",
            Resources.parse({"cpu": "8", "memory": "32Gi", "pods": "110"}),
            max=n_cpu + rng.choice([0, 0, 1, 2]),
            price_per_hour=0.34 if priced else 0.0,
        ),
        NodeGroup(
            "gpu-a",
            Resources.parse({"cpu": "8", "memory": "32Gi", "pods": "110", GPU: "1"}),
            taints=taints,
            max=n_a + rng.choice([0, 0, 1]),
            price_per_hour=1.2 if priced else 0.0,
        ),
        NodeGroup(
            "gpu-b",
            Resources.parse({"cpu": "16", "memory": "64Gi", "pods": "110", GPU: "2"}),
            taints=taints_b,
            max=n_b + rng.choice([0, 0, 1]),
            price_per_hour=2.1 if priced else 0.0,
        ),
    ]
    n_big = rng.randint(0, 2) if varied else 0
    if n_big:
        groups.insert(
            1,
            NodeGroup(
                "cpu-big",
                Resources.parse({"cpu": "16", "memory": "64Gi", "pods": "110"}),
                max=n_big + rng.choice([0, 1]),
                price_per_hour=0.68 if priced else 0.0,
            ),
        )
    shapes = []
    for w in range(rng.randint(3, 6)):
        cpu_m = rng.choice([250, 500, 750, 1000, 1500, 2000])
        mem_mi = rng.choice([512, 1024, 2048, 4096, 6144])
        priority = rng.choice([0, 10, 100, 100, 300, 500])
        tolerates = rng.random() < 0.7
        shapes.append((f"api-{w}", _spec(cpu_m, mem_mi, 0, priority, tolerates, None)))
    gpu_running = _spec(rng.choice([2000, 3000]), rng.choice([8192, 12288]), 1, 1000, True, None)
    budgets = {name: DisruptionBudget(max_unavailable=rng.choice([1, 1, 1, 2, 0])) for name, _ in shapes}
    if varied:
        for name in budgets:
            if rng.random() < 0.3:
                drawn = rng.choice(["50%", "80%", "2"])
                least: int | str = int(drawn) if drawn.isdigit() else drawn
                budgets[name] = DisruptionBudget(min_available=least)
    workloads = [
        Workload(name, spec, 0, pdb=budgets[name] if rng.random() < 0.5 else None) for name, spec in shapes
    ]
    workloads.append(Workload("llm", gpu_running, 0))
    state = ClusterState(groups, workloads, {GPU}, capacity=16)
    names: list[str] = []
    for group, count in (("cpu", n_cpu), ("cpu-big", n_big), ("gpu-a", n_a), ("gpu-b", n_b)):
        if not count:
            continue
        g = state.groups[group]
        for i in range(count):
            state.add_node(Node(f"{group}-{i}", group, g.capacity, g.node_labels(), g.taints))
            names.append(f"{group}-{i}")
    if rng.random() < 0.25 and state.groups["cpu"].max > n_cpu:
        g = state.groups["cpu"]
        state.add_node(Node("cpu-up", "cpu", g.capacity, g.node_labels(), g.taints, ready=False))
    seq = 0

    def add(name: str, spec: PodSpec, node: str | None, **kw: object) -> Pod | None:
        nonlocal seq
        if node is not None:
            slot = state.slot_of[node]
            target = state.nodes[node]
            if static_fit(spec, target) is not None:
                return None
            if not np.all(state.alloc[slot] - state.used[slot] >= state.requests_of(spec)):
                return None
        seq += 1
        pod = Pod(
            f"{name}-{seq}", spec, name, node=node, seq=seq, created_at=float(seq), ready=node is not None
        )
        for k, v in kw.items():
            setattr(pod, k, v)
        state.add_pod(pod)
        return pod

    for name in names:
        if name.startswith("gpu") and rng.random() < 0.5:
            gpus = 1 if name.startswith("gpu-a") else rng.randint(1, 2)
            for _ in range(gpus):
                add("llm", gpu_running, name)
    wanted = rng.randint(30, 70)
    attempts = 0
    while len(state.pods) < wanted and attempts < 400:
        attempts += 1
        workload, spec = rng.choice(shapes)
        target = rng.choice(names)
        kw: dict[str, object] = {}
        roll = rng.random()
        if roll < 0.05:
            kw["annotations"] = {DO_NOT_MOVE: "true"}
        elif roll < 0.08:
            kw["owner_kind"] = OwnerKind.DAEMON_SET
        add(workload, spec, target, **kw)
    for wl in state.workloads.values():
        wl.replicas = sum(1 for p in state.pods.values() if p.workload == wl.name)
    waiting: list[Pod] = []
    for i in range(rng.randint(2, 5) if varied else rng.randint(2, 4)):
        selector = rng.choice([None, None, "gpu-a", "gpu-b"])
        gpus, priorities = 1, [1000, 1000, 500, 200]
        if varied:
            gpus = rng.choice([0, 1, 1, 2])
            priorities = [1000, 700, 500, 500, 200, 100]
            selector = "gpu-b" if gpus == 2 else (None if gpus == 0 else selector)
        spec = _spec(
            rng.choice([2000, 3000, 4000, 5000, 6000]) + (1000 if gpus == 0 else 0),
            rng.choice([8192, 12288, 16384, 20480]),
            gpus,
            rng.choice(priorities),
            True,
            selector,
        )
        pod = add(f"waiting-{i}", spec, None)
        assert pod is not None
        waiting.append(pod)
    free = state.free()
    for pod in waiting:
        if np.any(state.static_mask(pod.spec) & np.all(free >= state.requests_of(pod.spec), axis=1)):
            return None  # one fits without a move: draw again
    return Instance(seed, state, tuple(waiting))
