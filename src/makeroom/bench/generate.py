"""Generated clusters for benchmarks: a CPU group and a GPU group, many workloads, and churn."""

from __future__ import annotations

import random
from typing import Any

from makeroom.scenario import Scenario, parse_scenario

CPU_SIZES = ("250m", "500m", "1", "1500m")
MEM_SIZES = ("1Gi", "2Gi", "4Gi", "6Gi")


def churn_scenario(
    nodes: int = 1000, pods: int = 30_000, hours: float = 24.0, seed: int = 1, workloads: int = 100
) -> Scenario:
    """A cluster of ``nodes`` nodes (80 % CPU, 20 % GPU) running ``pods`` pods, with a scale,
    deploy or delete every five minutes and a spot reclaim every hour, for ``hours`` hours."""
    rng = random.Random(seed)
    cpu_nodes = int(nodes * 0.8)
    gpu_nodes = nodes - cpu_nodes
    groups = [
        {
            "name": "cpu",
            "capacity": {"cpu": "32", "memory": "128Gi", "pods": 110},
            "min": cpu_nodes // 2,
            "max": int(cpu_nodes * 1.3),
            "initial": cpu_nodes,
            "price_per_hour": 1.5,
            "provision_time": "3m",
        },
        {
            "name": "gpu",
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": 110, "nvidia.com/gpu": 8},
            "min": gpu_nodes // 2,
            "max": int(gpu_nodes * 1.3),
            "initial": gpu_nodes,
            "price_per_hour": 12.0,
            "provision_time": "5m",
        },
    ]
    specs: list[dict[str, Any]] = []
    workloads = max(2, min(workloads, pods))  # a small cluster has fewer workloads, never empty ones
    gpu_workloads = max(1, workloads // 5)
    # half the GPUs in use, and at most half the pods
    gpu_per_workload = min(gpu_nodes * 8 // 2, pods // 2) // gpu_workloads
    cpu_pods = pods - gpu_per_workload * gpu_workloads
    per_workload, extra = divmod(cpu_pods, workloads - gpu_workloads)
    for i in range(workloads):
        gpu = i < gpu_workloads
        k = rng.randrange(len(CPU_SIZES))
        spec: dict[str, Any] = {
            "name": f"{'gpu' if gpu else 'api'}-{i}",
            "replicas": per_workload + (1 if i - gpu_workloads < extra else 0),
            "priority": 1000 if gpu else rng.choice((10, 100, 500)),
            "requests": {"cpu": CPU_SIZES[k], "memory": MEM_SIZES[k]},
            "startup_time": f"{rng.randint(5, 90)}s",
            "termination_grace": "30s",
            "pdb": {"max_unavailable": "10%"},
        }
        if gpu:
            spec["requests"] = {"cpu": "2", "memory": "16Gi", "nvidia.com/gpu": 1}
            spec["replicas"] = gpu_per_workload
        specs.append(spec)
    events: list[dict[str, Any]] = []
    live = [s["name"] for s in specs]
    replicas = {s["name"]: s["replicas"] for s in specs}
    steps = int(hours * 12)
    for step in range(1, steps):
        at = step * 300
        roll = rng.random()
        if roll < 0.8 or len(live) < 10:
            name = rng.choice(live)
            new = max(0, int(replicas[name] * rng.uniform(0.7, 1.3)))
            replicas[name] = new
            events.append({"at": at, "scale": {"workload": name, "replicas": new}})
        elif roll < 0.9:
            name = f"new-{step}"
            events.append(
                {
                    "at": at,
                    "deploy": {
                        "name": name,
                        "replicas": per_workload // 2,
                        "priority": 100,
                        "requests": {"cpu": "500m", "memory": "1Gi"},
                    },
                }
            )
            live.append(name)
            replicas[name] = per_workload // 2
        else:
            name = rng.choice(live)
            live.remove(name)
            events.append({"at": at, "delete": {"workload": name}})
        if step % 12 == 0:
            events.append({"at": at + 1, "remove_node": {"node": f"cpu-{rng.randrange(cpu_nodes)}"}})
    data = {
        "version": 1,
        "name": f"churn-{nodes}-nodes-{pods}-pods-{hours:g}h",
        "duration": hours * 3600,
        "node_groups": groups,
        "workloads": specs,
        "events": events,
    }
    return parse_scenario(data, "<generated>")
