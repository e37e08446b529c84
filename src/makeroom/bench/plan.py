"""``makeroom bench plan``: the planner at Kubernetes' limits, with the scheduler's per-node preemption
and the per-pod planner of before issue 13 (``Policy(joint=False)``) measured on the same states in the
same run as baselines; and the joint plans of mid-size clusters against their exact optimum.

Each size runs in its own subprocess, so that its peak memory (ru_maxrss) is its own. A size is a
generated cluster given as Kubernetes objects (plain dicts, as a dump or a watch cache holds them):
a CPU group and two GPU groups; CPU-only replicas fill the CPU nodes and also sit on GPU nodes (issue
1966), GPU replicas hold some GPUs, and 100 high-priority GPU pods are pending. Measured:
- build: ``snapshot.state_from_objects`` on the objects;
- plan per pending pod: each pod planned on its own (p50, p99), and plans for 1, 10 and 100 pending
  pods at once (total and per pod);
- with 10 waiting: ten plans of ten waiting pods each (the pending pods in tens), per waiting pod
  (p50, p99), by the default planner and by the per-pod planner; 100 waiting at once, by both;
- baseline: ``find_preemption`` for each pending pod on the same state (p50, p99);
- peak memory of the subprocess (objects, state and plans together).

Mid-size (``bench.midsize``, the joint-oracle clusters): the time of the default plan, of the exact
joint plan (CP-SAT, after its import), of the per-pod plan and of the controller's round (the default
search, then CP-SAT seeded by it where the problem is within its size and the bound does not prove the
default plan already), and how often each equals the optimum. The round's search is measured on every
size too (``waiting.round``): past its size it is the default search plus the size's estimate.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

GOALS = {
    "plan_p50_ms": 30.0,
    "plan_p99_ms": 200.0,
    "waiting_10_p50_ms_per_pod": 30.0,
    "waiting_10_p99_ms_per_pod": 200.0,
    "waiting_100_s": 3.0,
    "build_s": 3.0,
    "peak_mib": 1536.0,
}
MIDSIZE_GOAL_S = 1.0  # a mid-size joint plan
MIDSIZE_SEEDS = 60
QUICK_MIDSIZE_SEEDS = 5


@dataclass(frozen=True, slots=True)
class Size:
    name: str
    nodes: int
    pods_per_node: int
    packed_nodes: int = 0  # nodes filled to the 110-pod limit (the extreme), the rest share the remainder
    total_pods: int = 0  # 0: nodes * pods_per_node
    pending: int = 100
    constrained: bool = False  # nodes in 3 zones; a third of the workloads spread over them and 1 per node


SIZES = (
    Size("500 nodes, 15,000 pods", 500, 30),
    Size("1,000 nodes, 30,000 pods", 1000, 30),
    Size("5,000 nodes, 150,000 pods", 5000, 30),
    Size(
        "5,000 nodes, 150,000 pods, 1,000 nodes at 110 pods", 5000, 30, packed_nodes=1000, total_pods=150_000
    ),
    Size("5,000 nodes, 150,000 pods, a third of the workloads constrained", 5000, 30, constrained=True),
)
ZONES = ("zone-a", "zone-b", "zone-c")
QUICK = (Size("100 nodes, 3,000 pods", 100, 30, pending=20),)

CPU_SIZES = (("100m", "256Mi"), ("250m", "512Mi"), ("400m", "1Gi"), ("500m", "1Gi"))
CPU_PRIORITIES = (0, 100, 100, 500)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _milli(q: str) -> int:
    from makeroom.model import parse_quantity

    return parse_quantity(q)


def generate(size: Size) -> list[dict[str, Any]]:
    """The cluster as Kubernetes objects: nodes, pods, PDBs and the autoscaler's status ConfigMap."""
    n_gpu_a = max(2, size.nodes * 15 // 100)
    n_gpu_b = max(1, size.nodes * 10 // 100)
    n_cpu = size.nodes - n_gpu_a - n_gpu_b
    groups = [
        ("cpu", n_cpu, n_cpu + max(10, n_cpu // 10), {"cpu": "16", "memory": "64Gi", "pods": "110"}, []),
        (
            "gpu-a10",
            n_gpu_a,
            n_gpu_a,
            {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "1"},
            [GPU_TAINT],
        ),
        (
            "gpu-a100",
            n_gpu_b,
            n_gpu_b,
            {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "4"},
            [GPU_TAINT],
        ),
    ]
    objects: list[dict[str, Any]] = []
    nodes: list[tuple[str, str, dict[str, int]]] = []
    for group, count, _, quantities, taints in groups:
        for i in range(count):
            name = f"{group}-{i:05d}"
            nodes.append((name, group, {k: _milli(v) for k, v in quantities.items()}))
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "labels": {
                            "karpenter.sh/nodepool": group,
                            "kubernetes.io/hostname": name,
                            **({"topology.kubernetes.io/zone": ZONES[i % 3]} if size.constrained else {}),
                        },
                    },
                    "spec": {"taints": list(taints)} if taints else {},
                    "status": {
                        "allocatable": dict(quantities),
                        "conditions": [{"type": "Ready", "status": "True"}],
                    },
                }
            )
    n_workloads = max(20, size.nodes // 5)
    workloads: list[dict[str, Any]] = []
    for w in range(n_workloads):
        cpu, mem = CPU_SIZES[w % len(CPU_SIZES)]
        workloads.append(
            {
                "name": f"api-{w:04d}",
                "cpu": cpu,
                "mem": mem,
                "req": (_milli(cpu), _milli(mem)),
                "priority": CPU_PRIORITIES[(w // 4) % len(CPU_PRIORITIES)],
                "tolerates": w % 2 == 0,
                "constrained": size.constrained and w % 3 == 0,
            }
        )
    tolerant = [w for w in workloads if w["tolerates"]]
    small = [w for w in workloads if w["cpu"] == "100m"]
    big_tolerant = [w for w in tolerant if w["cpu"] in ("400m", "500m")]
    total = size.total_pods or size.nodes * size.pods_per_node
    per_node = [size.pods_per_node] * size.nodes
    if size.packed_nodes:
        rest = total - 110 * size.packed_nodes
        per_node = [110] * size.packed_nodes + [rest // (size.nodes - size.packed_nodes)] * (
            size.nodes - size.packed_nodes
        )
    counts: dict[str, int] = {}
    gpu_pods = 0

    def add_pod(w: dict[str, Any], node: str | None, gpu: bool = False) -> None:
        n = counts.get(w["name"], 0)
        counts[w["name"]] = n + 1
        h = "5f7d8c9b6"
        container: dict[str, Any] = {
            "name": "main",
            "resources": {"requests": {"cpu": w["cpu"], "memory": w["mem"]}},
        }
        spec: dict[str, Any] = {"priority": w["priority"], "containers": [container]}
        if gpu:
            container["resources"]["requests"]["nvidia.com/gpu"] = "1"
            spec["nodeSelector"] = {"karpenter.sh/nodepool": "gpu-a10"}
        if w["tolerates"] or gpu:
            spec["tolerations"] = [GPU_TOLERATION]
        if node is not None:
            spec["nodeName"] = node
        if w.get("constrained"):
            spec.update(constraints(w["name"]))
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{w['name']}-{h}-{n:05d}",
                    "namespace": "default",
                    "labels": {"app": w["name"], "pod-template-hash": h},
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "ReplicaSet",
                            "name": f"{w['name']}-{h}",
                            "controller": True,
                        }
                    ],
                },
                "spec": spec,
                "status": {"phase": "Running" if node else "Pending"},
            }
        )

    gpu_workload: dict[str, Any] = {
        "name": "llm",
        "cpu": "5",
        "mem": "20Gi",
        "priority": 1000,
        "tolerates": True,
    }
    for i, (name, group, capacity) in enumerate(nodes):
        room_cpu, room_mem = capacity["cpu"], capacity["memory"]
        pool = small if per_node[i] > 60 else (tolerant if group != "cpu" else workloads)
        if group != "cpu" and i % 5 < 3:  # three GPU nodes in five run a GPU replica
            add_pod(gpu_workload, name, gpu=True)
            gpu_pods += 1
            room_cpu -= 5000
            room_mem -= 20 * 2**30 * 1000
        count = per_node[i]
        if group != "cpu" and i % 5 >= 3:  # the others have a free GPU, but CPU-only replicas took its CPU
            pool, count = big_tolerant, max(count, 36)
        here: set[str] = set()
        for k in range(count):
            chosen = pool[(i * 7 + k) % len(pool)]
            c, m = chosen["req"]
            if c > room_cpu or m > room_mem or chosen["name"] in here:
                continue
            if chosen["constrained"]:
                here.add(chosen["name"])  # one replica per node: as its anti-affinity says
            add_pod(chosen, name)
            room_cpu -= c
            room_mem -= m
    for _ in range(size.pending):
        add_pod(gpu_workload, None, gpu=True)
    for budgeted in workloads[::3]:
        objects.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": budgeted["name"], "namespace": "default"},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": budgeted["name"]}}},
            }
        )
    status = ["autoscalerStatus: Running", "nodeGroups:"]
    for group, count, gmax, _, _ in groups:
        status += [f"- name: {group}", "  health:", f"    minSize: {min(1, count)}", f"    maxSize: {gmax}"]
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cluster-autoscaler-status", "namespace": "kube-system"},
            "data": {"status": "\n".join(status) + "\n"},
        }
    )
    return objects


def constraints(app: str) -> dict[str, Any]:
    """A constrained workload's pod spec fields: zones spread (maxSkew 1) and one replica per node."""
    selector = {"matchLabels": {"app": app}}
    return {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector,
            }
        ],
    }


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def reference_ms() -> float:
    """A fixed pure-Python workload (a million small dicts), timed in the same process: numbers from
    a loaded or slower machine scale with it."""
    start = time.perf_counter()
    junk = [{"a": i, "b": {"c": (1, 2)}} for i in range(1_000_000)]
    del junk
    return round((time.perf_counter() - start) * 1000.0, 1)


def measure(size: Size) -> dict[str, Any]:
    """One size, in this process: build, plan, baseline; peak memory from ru_maxrss."""
    from makeroom.controller.policy import EXACT_BUDGET
    from makeroom.planner import Policy, plan
    from makeroom.sim.preemption import find_preemption
    from makeroom.snapshot import state_from_objects

    objects = generate(size)
    start = time.perf_counter()
    state = state_from_objects(objects, source="generated")
    build_s = time.perf_counter() - start
    pending = sorted(state.pending(), key=lambda p: p.key)
    policy = Policy(now=0.0)

    single: list[float] = []
    outcomes = {"relocation": 0, "new-node": 0, "fits-now": 0, "unplaceable": 0}
    moves: list[int] = []
    for pod in pending:
        t0 = time.perf_counter()
        result = plan(state, policy, pending=[pod])
        single.append((time.perf_counter() - t0) * 1000.0)
        for p in result.placements:
            outcomes[p.reason.value] += 1
        outcomes["unplaceable"] += len(result.unplaceable)
        moves.append(len(result.moves))
    batches = []
    for k in (1, 10, 100):
        if k > len(pending):
            continue
        t0 = time.perf_counter()
        result = plan(state, policy, pending=pending[:k])
        ms = (time.perf_counter() - t0) * 1000.0
        batches.append(
            {
                "pending": k,
                "total_ms": round(ms, 2),
                "per_pod_ms": round(ms / k, 3),
                "placed": len(result.placements),
                "moves": len(result.moves),
                "new_nodes": result.stats.new_nodes,
                "unplaceable": len(result.unplaceable),
            }
        )

    waiting = {
        "default": _waiting(state, pending, Policy(now=0.0)),
        "per_pod": _waiting(state, pending, Policy(now=0.0, joint=False)),
        "round": _waiting(
            state, pending, Policy(now=0.0, exact_if_available=True, exact_budget=EXACT_BUDGET)
        ),
    }

    baseline: list[float] = []
    found = 0
    for pod in pending:
        t0 = time.perf_counter()
        choice = find_preemption(state, pod, lambda _w: None)
        baseline.append((time.perf_counter() - t0) * 1000.0)
        found += choice is not None
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "size": asdict(size),
        "nodes": len(state.nodes),
        "pods": len(state.pods),
        "build_s": round(build_s, 3),
        "plan_single_ms": {
            "p50": round(_pct(single, 50), 3),
            "p99": round(_pct(single, 99), 3),
            "max": round(max(single, default=0.0), 3),
            "mean": round(statistics.fmean(single), 3) if single else 0.0,
        },
        "plan_batches": batches,
        "waiting": waiting,
        "outcomes_single": outcomes,
        "moves_per_pod_mean": round(statistics.fmean(moves), 2) if moves else 0.0,
        "baseline_find_preemption_ms": {
            "p50": round(_pct(baseline, 50), 3),
            "p99": round(_pct(baseline, 99), 3),
            "found": found,
        },
        "peak_mib": round(peak_kib / 1024.0, 1),
        "reference_ms": reference_ms(),
    }


def _waiting(state: Any, pending: list[Any], policy: Any) -> dict[str, Any]:
    """Plans of ten waiting pods (the pending pods in tens), per waiting pod, and all at once."""
    from makeroom.planner import plan

    per_pod: list[float] = []
    placed = moves = proven = 0
    for start in range(0, len(pending) - 9, 10):
        t0 = time.perf_counter()
        result = plan(state, policy, pending=pending[start : start + 10])
        per_pod.append((time.perf_counter() - t0) * 1000.0 / 10)
        placed += len(result.placements)
        moves += len(result.moves)
        proven += result.optimality is not None and result.optimality.proof.value == "optimal"
    t0 = time.perf_counter()
    everything = plan(state, policy, pending=pending)
    all_s = time.perf_counter() - t0
    opt = everything.optimality
    return {
        "ms_per_pod_with_10": {
            "p50": round(_pct(per_pod, 50), 3),
            "p99": round(_pct(per_pod, 99), 3),
            "plans": len(per_pod),
            "placed": placed,
            "moves": moves,
            "proven_optimal": proven,
        },
        "all_at_once": {
            "pending": len(pending),
            "total_s": round(all_s, 3),
            "placed": len(everything.placements),
            "moves": len(everything.moves),
            "new_nodes": everything.stats.new_nodes,
            "objective": None if opt is None else opt.objective.to_json(),
        },
    }


def measure_midsize(seeds: int = MIDSIZE_SEEDS) -> dict[str, Any]:
    """The mid-size joint plans: time of each search (the controller's round's too), and how often it
    equals the exact optimum."""
    from makeroom.bench.midsize import midsize
    from makeroom.controller.policy import EXACT_BUDGET
    from makeroom.planner import Policy, plan
    from makeroom.planner.objective import of_plan

    try:
        import ortools.sat.python.cp_model  # noqa: F401  (its import is not the plan's time)
    except ImportError:
        return {"error": ["the exact joint search needs OR-Tools: pip install 'makeroom[exact]'"]}
    times: dict[str, list[float]] = {"default": [], "exact": [], "per_pod": [], "round": []}
    equal = {"default": 0, "per_pod": 0, "round": 0}
    policies = {
        "default": Policy(),
        "exact": Policy(exact=True),
        "per_pod": Policy(joint=False),
        # the search of the controller's round (its other knobs as the others', to compare plans)
        "round": Policy(exact_if_available=True, exact_budget=EXACT_BUDGET),
    }
    for seed in range(seeds):
        state = midsize(seed).state
        keys = {}
        for name, policy in policies.items():
            t0 = time.perf_counter()
            result = plan(state, policy)
            times[name].append(time.perf_counter() - t0)
            keys[name] = of_plan(state, result).key()
        for name in equal:
            equal[name] += keys[name] == keys["exact"]
    out: dict[str, Any] = {"clusters": seeds}
    for name, values in times.items():
        out[name] = {
            "p50_s": round(_pct(values, 50), 4),
            "p99_s": round(_pct(values, 99), 4),
            "max_s": round(max(values), 4),
        }
        if name in equal:
            out[name]["equals_optimum"] = equal[name]
    out["goals_met"] = {
        "default_within_1s": out["default"]["max_s"] <= MIDSIZE_GOAL_S,
        "exact_within_1s": out["exact"]["max_s"] <= MIDSIZE_GOAL_S,
    }
    return out


def _in_subprocess(size: Size | int) -> dict[str, Any]:
    """One size, or (an int) that many mid-size clusters, measured in a process of its own."""
    code = (
        "import json, sys\n"
        "from makeroom.bench.plan import Size, measure, measure_midsize\n"
        "arg = json.loads(sys.argv[1])\n"
        "print(json.dumps(measure_midsize(arg) if isinstance(arg, int) else measure(Size(**arg))))\n"
    )
    arg: Any = size if isinstance(size, int) else asdict(size)
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(arg)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return {"size": arg, "error": done.stderr.strip().splitlines()[-1:] or ["failed"]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run_plan_bench(
    progress: Callable[[str], None] | None = None, quick: bool = False, only: str | None = None
) -> dict[str, Any]:
    """``only``: just the sizes whose name holds it, without the mid-size plans (None: every size)."""
    from makeroom.bench.sim import machine

    rows = []
    sizes = QUICK if quick else SIZES
    for size in [s for s in sizes if only is None or only in s.name]:
        if progress is not None:
            progress(size.name)
        row = _in_subprocess(size)
        if "error" not in row and size.nodes >= 5000:
            with10 = row["waiting"]["default"]["ms_per_pod_with_10"]
            row["goals_met"] = {
                "plan_p50": row["plan_single_ms"]["p50"] <= GOALS["plan_p50_ms"],
                "plan_p99": row["plan_single_ms"]["p99"] <= GOALS["plan_p99_ms"],
                "waiting_10_p50": with10["p50"] <= GOALS["waiting_10_p50_ms_per_pod"],
                "waiting_10_p99": with10["p99"] <= GOALS["waiting_10_p99_ms_per_pod"],
                "waiting_100": row["waiting"]["default"]["all_at_once"]["total_s"] <= GOALS["waiting_100_s"],
                "build": row["build_s"] <= GOALS["build_s"],
                "peak_memory": row["peak_mib"] <= GOALS["peak_mib"],
            }
        rows.append(row)
    mid: dict[str, Any] | None = None
    if only is None:
        if progress is not None:
            progress("mid-size joint plans")
        mid = _in_subprocess(QUICK_MIDSIZE_SEEDS if quick else MIDSIZE_SEEDS)
    return {
        "benchmark": "plan",
        "machine": machine(),
        "goals_at_5000_nodes": GOALS,
        "sizes": rows,
        "midsize": mid,
        "midsize_goal_s": MIDSIZE_GOAL_S,
    }
