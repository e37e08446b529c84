"""A whole trace as the demand of ``makeroom bench fleet``: the trace converters' scenario for the
trace's full length, with the fleet's assumptions on top (docs/traces.md, "The fleet benchmark").

DLRM serving trace 2025: one workload per (service, role) whose replicas follow the live instances,
CPU and GPU groups autoscaling from the packing of the first instant, ``max_instance_per_node`` kept
as a per-node count (an extended resource the capped workload asks one of, every node offering the
cap), GPU-node (HN) instances allowed to preempt so that preemption, balloons and a preemption delay
apply to them. openb GPU trace 2023: every task a single-replica workload deployed at its creation and
deleted at its deletion, its groups autoscaling between 0 and the trace's count x node scale, priced.
Pure: rows in, a scenario dict out.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from makeroom.errors import InputError, Problem
from makeroom.model import limits
from makeroom.model.quantity import MILLI
from makeroom.trace import dlrm, gpu
from makeroom.trace.common import Row, cell, dns_name, read_rows, whole

CAP_RESOURCE = "makeroom.io/per-node-"  # + workload name: one per pod, the cap per node
HN_PREEMPTION = "PreemptLowerPriority"
STEP_S = 60.0  # DLRM: instances counted every minute, so a scale-up is seen within a scan or six
OPENB_HEADROOM = 1.0  # openb: a group grows back to the trace's size at most
# openb prices (assumptions; round figures, read relative to each other): per core-hour and GPU-hour.
CORE_HOUR = 0.04
GPU_HOUR = 2.0


@dataclass(frozen=True, slots=True)
class Demand:
    trace: str  # dlrm or openb
    scenario: dict[str, Any]
    gpu_group_names: tuple[str, ...]


# --- DLRM ------------------------------------------------------------------------------------------


def _cap(row: Row, where: str, problems: list[Problem]) -> tuple[str, str, int] | None:
    cap = cell(row, "max_instance_per_node")
    value = -1 if cap.strip() == "-1" else whole(cap, f"{where}.max_instance_per_node", problems, high=10**6)
    if value is None:
        return None
    return cell(row, "app_name"), cell(row, "role"), value


def read_caps(path: Path) -> dict[tuple[str, str], int]:
    """``max_instance_per_node`` per (app, role): the most common value of its rows (-1: no cap)."""
    rows = read_rows(path, ("app_name", "role", "max_instance_per_node"), _cap)
    counts: dict[tuple[str, str], Counter[int]] = {}
    for app, role, cap in rows:
        counts.setdefault((app, role), Counter())[cap] += 1
    return {key: max(c, key=lambda v: (c[v], -v)) for key, c in counts.items()}


def trace_end(instances: list[dlrm.Instance]) -> float:
    times = [t for i in instances for t in (i.created, i.deleted) if math.isfinite(t)]
    if not times:
        raise InputError("trace", [Problem("", "no instance has a creation or deletion time")])
    return max(times)


def dlrm_demand(path: Path, scale: float, hours: float | None = None) -> Demand:
    instances = dlrm.read_instances(path)
    caps = read_caps(path)
    span = hours if hours is not None else math.ceil(trace_end(instances) / 3600)
    options = dlrm.Options(start=0.0, hours=span, step=STEP_S, scale=scale)
    scenario = dlrm.convert(instances, options, str(path)).scenario
    scenario["name"] = f"alibaba-dlrm-v2025 {_span(hours)} x{scale:g}"
    _apply_caps(scenario, caps)
    for w in scenario["workloads"]:
        if w["name"].endswith("-hn"):
            w["preemption_policy"] = HN_PREEMPTION
    return Demand("dlrm", scenario, ("gpu",))


def _apply_caps(scenario: dict[str, Any], caps: dict[tuple[str, str], int]) -> None:
    """A cap that binds (fewer than the node holds by its resources) becomes a per-node count."""
    groups = scenario["node_groups"]
    by_name = {f"{dns_name(app, 'app')}-{role.lower()}": cap for (app, role), cap in caps.items()}
    for w in scenario["workloads"]:
        cap = by_name.get(w["name"], -1)
        if cap < 1 or cap >= _fits_per_node(w["requests"], groups):
            continue
        resource = CAP_RESOURCE + w["name"]
        w["requests"][resource] = "1"
        for g in groups:
            g["capacity"][resource] = str(cap)
    for g in groups:  # a cap spreads the start replicas over more nodes than the converter packed
        g["initial"] = _first_fit(g, scenario["workloads"])
        g["max"] = max(g["max"], g["initial"])


def _first_fit(group: dict[str, Any], workloads: list[dict[str, Any]]) -> int:
    """Nodes of ``group`` that the loader's first-fit of the start replicas fills."""
    names = sorted(group["capacity"])
    shape = [limits.resource_quantity(r, group["capacity"][r]) for r in names]
    nodes: list[list[int]] = []
    for w in workloads:
        count = w.get("placement", {}).get(group["name"], 0)
        if not count:
            continue
        ask = [limits.resource_quantity(r, w["requests"].get(r, "0")) for r in names]
        ask[names.index("pods")] = MILLI
        for room in nodes:
            count -= _take(room, ask, count)
        while count:
            nodes.append(list(shape))
            count -= _take(nodes[-1], ask, count)
    return len(nodes)


def _take(room: list[int], ask: list[int], count: int) -> int:
    """Take up to ``count`` copies of ``ask`` out of ``room``; how many it took."""
    take = min(count, *(room[i] // a for i, a in enumerate(ask) if a))
    for i, a in enumerate(ask):
        room[i] -= a * take
    return take


def _fits_per_node(requests: dict[str, str], groups: list[dict[str, Any]]) -> int:
    most = 0
    for g in groups:
        room = []
        for res, q in requests.items():
            ask = limits.resource_quantity(res, q)
            have = limits.resource_quantity(res, g["capacity"].get(res, "0"))
            if ask:
                room.append(have // ask)
        pods = limits.resource_quantity("pods", g["capacity"].get("pods", "110")) // MILLI
        most = max(most, min([*room, pods]))
    return most


# --- openb -----------------------------------------------------------------------------------------


def openb_demand(directory: Path, node_scale: float, hours: float | None = None) -> Demand:
    machines, tasks = gpu.read_dir(directory)
    if not tasks:
        raise InputError(str(directory), [Problem("", "the pod list is empty")])
    end = max(t.deleted if math.isfinite(t.deleted) else t.created for t in tasks)
    span = hours if hours is not None else math.ceil((end + 1) / 3600)
    options = gpu.Options(start=0.0, hours=span, node_scale=node_scale)
    scenario = gpu.convert(machines, tasks, options, str(directory)).scenario
    scenario["name"] = f"alibaba-gpu-v2023 openb {_span(hours)}, nodes x{node_scale:g}"
    scenario["autoscaler"] = {"enabled": True}
    gpu_groups = []
    for g in scenario["node_groups"]:
        size = g["initial"]
        cores = limits_of(g, "cpu") / MILLI
        gpus = limits_of(g, gpu.GPU) / MILLI / MILLI
        g["min"] = 0
        g["max"] = max(size, math.ceil(size * OPENB_HEADROOM))
        g["price_per_hour"] = round(cores * CORE_HOUR + gpus * GPU_HOUR, 4)
        if gpus:
            gpu_groups.append(g["name"])
    return Demand("openb", scenario, tuple(gpu_groups))


def _span(hours: float | None) -> str:
    return "whole trace" if hours is None else f"first {hours:g} h"


def limits_of(group: dict[str, Any], resource: str) -> int:
    return limits.resource_quantity(resource, group["capacity"].get(resource, "0"))
