"""Scenarios of spec v1 from a few arguments, their runs in the simulator, and the bundled examples
(for the sim, controller and report tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

import makeroom.examples
from makeroom.controller import Strategy
from makeroom.scenario import Scenario, parse_scenario
from makeroom.sim import Options, Result, Simulation
from makeroom.sim.recorder import TimelineEvent

EXAMPLES = Path(makeroom.examples.__file__).parent


def example(stem: str) -> Path:
    """A bundled scenario by the start of its name (``seed-1``)."""
    (path,) = EXAMPLES.glob(f"{stem}*.yaml")
    return path


def group(name: str, cpu: str = "4", mem: str = "16Gi", gpu: int = 0, **kw: Any) -> dict[str, Any]:
    capacity: dict[str, Any] = {"cpu": cpu, "memory": mem, "pods": 110}
    if gpu:
        capacity["nvidia.com/gpu"] = gpu
    return {"name": name, "capacity": capacity, "min": 0, "max": 1, "initial": 1, "price_per_hour": 0, **kw}


def workload(name: str, replicas: int, cpu: str = "1", mem: str = "1Gi", **kw: Any) -> dict[str, Any]:
    return {"name": name, "replicas": replicas, "requests": {"cpu": cpu, "memory": mem}, **kw}


def scenario(groups: list[dict[str, Any]], workloads: list[dict[str, Any]], **kw: Any) -> Scenario:
    data = {"version": 1, "name": "test", "duration": "30m", "node_groups": groups, "workloads": workloads}
    data.update(kw)
    return parse_scenario(yaml.safe_load(yaml.safe_dump(data)), "test.yaml")


def run(s: Scenario, strategy: str = "none", until: float | None = None) -> tuple[Simulation, Result]:
    sim = Simulation(s, Options(strategy=Strategy(strategy)))
    return sim, sim.run(until=until)


def kinds(result: Result, kind: str) -> list[dict[str, Any]]:
    """The timeline events of one kind, as the JSON of spec v1 has them."""
    return [e.to_json() for e in result.events if e.kind == kind]


def events(result: Result, kind: str) -> list[TimelineEvent]:
    return [e for e in result.events if e.kind == kind]
