"""The result of a run, as the JSON contract of spec v1 describes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from makeroom.sim.recorder import Sample

if TYPE_CHECKING:
    from makeroom.sim.simulation import Simulation


@dataclass(frozen=True, slots=True)
class Result:
    data: dict[str, Any]
    samples: tuple[Sample, ...]
    events_processed: int


def _r(x: float) -> float:
    return round(x, 3)


def summarize(sim: Simulation, horizon: float) -> Result:
    world = sim.world
    rec = sim.recorder
    workloads = {}
    for name, t in rec.workloads.items():
        workloads[name] = {
            "priority": t.priority,
            "desired": t.desired,
            "ready_at_end": t.ready,
            "time_to_ready_s": None if t.ready_at is None else _r(t.ready_at - t.raised_at),
            "min_ready": t.min_ready,
            "unavailable_replica_seconds": _r(t.unavailable_s),
            "evicted": t.evicted,
        }
    groups = {}
    for name, g in rec.groups.items():
        hours = g.node_seconds / 3600.0
        groups[name] = {
            "nodes_at_end": g.nodes,
            "peak_nodes": g.peak,
            "nodes_added": g.added,
            "nodes_removed": g.removed,
            "node_hours": round(hours, 6),
            "cost": round(hours * g.price_per_hour, 6),
        }
    pods = []
    for pod in sorted(world.state.pods.values(), key=lambda p: p.seq):
        node = world.state.nodes.get(pod.node) if pod.node else None
        phase = "Terminating" if pod.terminating else "Running" if pod.ready else "Pending"
        pods.append(
            {
                "name": pod.name,
                "workload": pod.workload,
                "node": pod.node,
                "group": node.group if node else None,
                "phase": phase,
            }
        )
    data: dict[str, Any] = {
        "scenario": sim.scenario.name,
        "strategy": sim.options.strategy,
        "seed": sim.options.seed,
        "duration_s": _r(horizon),
        "workloads": workloads,
        "node_groups": groups,
        "evictions": rec.evictions,
        "cost": round(sum(g["cost"] for g in groups.values()), 6),
        "pending_at_end": [p["name"] for p in pods if p["phase"] == "Pending"],
        "pods": pods,
        "events": rec.events,
    }
    return Result(data, tuple(rec.samples), sim.loop.processed)
