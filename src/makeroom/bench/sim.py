"""``makeroom bench sim``: how fast the simulated cluster runs, against a bare event loop measured in
the same process, so that numbers from different machines can be compared."""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from makeroom.bench.generate import churn_scenario
from makeroom.controller import Strategy
from makeroom.controller.config import CURES
from makeroom.scenario import load_scenario
from makeroom.sim import Options, Simulation
from makeroom.sim.clock import EventLoop, Phase
from makeroom.sim.runs import build

SEED_GOAL_S = 0.5
CHURN_GOAL_S = 60.0

Tracker = Callable[[str, float], Callable[[float], None]]


def machine() -> dict[str, Any]:
    import os

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }


def bare_loop_rate(events: int = 200_000) -> float:
    """Events per second of the event heap alone, running no-op actions: the ceiling any simulation
    on this machine can reach, and the baseline the runs below are read against."""
    loop = EventLoop()
    for i in range(events):
        loop.at(i * 0.001, Phase.WORLD, _noop)
    start = time.perf_counter()
    loop.run_until(float("inf"))
    return events / (time.perf_counter() - start)


def _noop() -> None:
    return None


def _timed_run(sim: Simulation, progress: Callable[[float], None] | None = None) -> dict[str, Any]:
    start = time.perf_counter()
    result = sim.run(progress=progress)
    wall = time.perf_counter() - start
    return {
        "wall_s": round(wall, 4),
        "events": result.events_processed,
        "events_per_s": round(result.events_processed / wall) if wall > 0 else None,
        "simulated_s": result.duration_s,
        "pods_at_end": len(result.pods),
    }


def bench_seeds(paths: list[Path], repeat: int = 5) -> list[dict[str, Any]]:
    """Every seed under every strategy, the relocating ones with the controller attached as
    ``makeroom simulate`` runs them."""
    rows = []
    for path in paths:
        scenario = load_scenario(path)
        for strategy in CURES:
            runs = [_timed_run(build(scenario, strategy)) for _ in range(repeat)]
            best = min(runs, key=lambda r: r["wall_s"])
            median = statistics.median(r["wall_s"] for r in runs)
            rows.append(
                {
                    "name": f"{scenario.name} ({strategy})",
                    **best,
                    "wall_s_median": round(median, 4),
                    "goal_s": SEED_GOAL_S,
                    "meets_goal": median <= SEED_GOAL_S,
                }
            )
    return rows


def bench_churn(nodes: int, pods: int, hours: float, track: Tracker | None) -> dict[str, Any]:
    build_start = time.perf_counter()
    scenario = churn_scenario(nodes=nodes, pods=pods, hours=hours)
    sim = Simulation(scenario, Options(Strategy.NONE))
    build = time.perf_counter() - build_start
    progress = track(scenario.name, scenario.spec.duration) if track else None
    row = _timed_run(sim, progress)
    goal = CHURN_GOAL_S * hours / 24.0
    return {
        "name": scenario.name,
        "nodes": nodes,
        "pods": pods,
        "build_s": round(build, 4),
        **row,
        "goal_s": round(goal, 3),
        "meets_goal": row["wall_s"] <= goal,
    }


def run_sim_bench(
    seeds: list[Path], nodes: int, pods: int, hours: float, track: Tracker | None = None
) -> dict[str, Any]:
    baseline = bare_loop_rate()
    seed_rows = bench_seeds(seeds)
    churn = bench_churn(nodes, pods, hours, track)
    for row in [*seed_rows, churn]:
        rate = row.get("events_per_s")
        row["share_of_bare_loop"] = round(rate / baseline, 4) if rate else None
    return {
        "benchmark": "sim",
        "machine": machine(),
        "baseline": {"name": "bare event loop, no-op events", "events_per_s": round(baseline)},
        "seeds": seed_rows,
        "churn": churn,
    }
