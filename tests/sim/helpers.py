"""Small scenario builders for behaviour tests of the simulated components."""

from __future__ import annotations

from typing import Any

import yaml

from makeroom.controller import Strategy
from makeroom.scenario import Scenario, parse_scenario
from makeroom.sim import Options, Result, Simulation


def group(name: str, cpu: str = "4", mem: str = "16Gi", gpu: int = 0, **kw: Any) -> dict[str, Any]:
    capacity: dict[str, Any] = {"cpu": cpu, "memory": mem, "pods": 110}
    if gpu:
        capacity["nvidia.com/gpu"] = gpu
    return {"name": name, "capacity": capacity, "min": 0, "max": 1, "initial": 1, **kw}


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
    return [e for e in result.data["events"] if e["kind"] == kind]
