"""``alibaba-dlrm-v2025.csv`` (Alibaba Cluster Trace Program, cluster-trace-gpu-v2025) to a scenario.

The trace lists the instances of 156 recommendation-model inference services (``app_name``): each row is
one instance, on a CPU node (``role`` CN) or a GPU node (``role`` HN), with its requests and its creation
and deletion times in seconds from the trace start (empty: before the start, after the end). A window of
the trace becomes a spec-v1 scenario: one workload per (app, role) whose replicas follow the number of
live instances, sampled every step; the replicas live at the start are Running at t=0, packed first-fit
on their own group (CN on cpu, HN on gpu), which sets each group's initial nodes, and its max is the
window's peak x headroom. Pure: text in, a scenario dict out; the assumptions (node shapes, prices,
priorities, taints) are the constants below and docs/traces.md explains them.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from makeroom.errors import InputError, Problem
from makeroom.model import Expander, limits
from makeroom.model.quantity import MILLI, format_quantity
from makeroom.trace.common import (
    Conversion,
    Row,
    cell,
    dns_name,
    duration,
    milli,
    natural,
    number,
    read_rows,
    time_cell,
    unique,
    whole,
)

GPU = "nvidia.com/gpu"
RESOURCES = ("cpu", "memory", GPU)
COLUMNS = (
    "instance_sn",
    "role",
    "app_name",
    "cpu_request",
    "memory_request",
    "gpu_request",
    "creation_time",
    "deletion_time",
)
ROLES = ("HN", "CN")  # GPU-node instances first: they are the ones that must find room
GROUP_OF_ROLE = {"CN": "cpu", "HN": "gpu"}

# Assumptions (docs/traces.md). Node shapes hold the trace's largest instance of each role: a CN
# instance asks for up to 192 cores and 1000 GiB, an HN one for up to 24 cores, 400 GiB and one GPU.
CPU_NODE = "cpu=192,memory=1024Gi"
GPU_NODE = "cpu=96,memory=1024Gi,gpu=8"
PRICE_PER_HOUR = {"cpu": 10.0, "gpu": 32.0}  # about on-demand list prices of such machines
PROVISION_TIME = {"cpu": "3m", "gpu": "6m"}
PRIORITY = {"HN": 1000, "CN": 100}
PREEMPTION_POLICY = {"HN": "Never", "CN": "PreemptLowerPriority"}
STARTUP_TIME = {"HN": "2m", "CN": "1m"}  # loading a model takes a while
TERMINATION_GRACE = "30s"
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
GPU_LABELS = {"nvidia.com/gpu.present": "true"}
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}

_GIB = Decimal(2**30)


@dataclass(frozen=True, slots=True)
class Instance:
    app: str
    role: str  # CN or HN
    requests: tuple[int, int, int]  # milli-units of cpu, memory (bytes), nvidia.com/gpu
    created: float  # -inf: before the trace start
    deleted: float  # +inf: after the trace end; live at t when created <= t < deleted


@dataclass(frozen=True, slots=True)
class Options:
    start: float = 0.0  # seconds from the trace start
    hours: float = 6.0
    step: float = 300.0  # seconds between samples of the live instances
    services: int | None = None  # keep the N apps with the most instances in the window
    scale: float = 1.0  # replicas = round(live instances x scale), at least 1 where any
    cpu_node: str = CPU_NODE
    gpu_node: str = GPU_NODE
    headroom: float = 1.2  # max nodes of a group = ceil(peak nodes x headroom)


# --- reading the CSV -------------------------------------------------------------------------------


def read_instances(path: Path) -> list[Instance]:
    """Every row of the CSV file, checked; all problems at once, as ``rows[17].cpu_request``."""
    return read_rows(path, COLUMNS, _instance)


def _instance(row: Row, where: str, problems: list[Problem]) -> Instance | None:
    before = len(problems)
    role = cell(row, "role")
    if role not in ROLES:
        problems.append(Problem(f"{where}.role", f"expected CN or HN, got {role!r}"))
    app = cell(row, "app_name")
    if not app:
        problems.append(Problem(f"{where}.app_name", "expected a service name, got an empty cell"))
    requests = []
    for column, unit in (("cpu_request", Decimal(MILLI)), ("memory_request", _GIB * MILLI)):
        value = number(cell(row, column), f"{where}.{column}", problems)
        requests.append(0 if value is None else milli(value, unit, f"{where}.{column}", problems))
    gpus = whole(cell(row, "gpu_request"), f"{where}.gpu_request", problems, high=1000)  # GPUs are whole
    requests.append(0 if gpus is None else gpus * MILLI)
    created = time_cell(cell(row, "creation_time"), f"{where}.creation_time", -math.inf, problems)
    deleted = time_cell(cell(row, "deletion_time"), f"{where}.deletion_time", math.inf, problems)
    if deleted < created:
        message = f"expected a time after creation_time {created:.0f}"
        problems.append(Problem(f"{where}.deletion_time", message))
    if len(problems) > before:
        return None
    return Instance(app, role, (requests[0], requests[1], requests[2]), created, deleted)


# --- options -------------------------------------------------------------------------------------


def node_shape(text: str, option: str) -> dict[str, int]:
    """``cpu=192,memory=1024Gi,gpu=8`` to milli-units by resource (``gpu`` is nvidia.com/gpu)."""
    shape: dict[str, int] = {}
    problems = []
    names = {"cpu": "cpu", "memory": "memory", "gpu": GPU, GPU: GPU, "pods": "pods"}
    for part in (p.strip() for p in text.split(",")):
        key, sep, value = part.partition("=")
        resource = names.get(key.strip())
        if not sep or resource is None:
            problems.append(Problem("", f"expected cpu=..,memory=..[,gpu=..][,pods=..], got {part!r}"))
            continue
        value = value.strip()
        if resource == "memory" and re.fullmatch(r"[\d.]+", value):
            problems.append(
                Problem("memory", f"expected a quantity with a unit such as 1024Gi, got {value!r}")
            )
            continue
        try:
            shape[resource] = limits.resource_quantity(resource, value)
        except limits.InvalidValueError as exc:
            problems.append(Problem(key.strip(), str(exc)))
    for needed in ("cpu", "memory"):
        if needed not in shape and not problems:
            problems.append(Problem("", f"expected a {needed}= entry"))
    if problems:
        raise InputError(option, problems)
    shape.setdefault("pods", 110 * MILLI)
    return shape


MIN_STEP = 1.0
MAX_SAMPLES = 100_000


def check_options(options: Options) -> None:
    """The shared rules for the options (finite, in range), and a bound on the samples they make."""
    problems = check_window(options.start, options.hours)
    rules: list[tuple[str, Any, Any]] = [
        ("--step", options.step, lambda v: limits.number(v, low=MIN_STEP, high=limits.MAX_DURATION)),
        ("--scale", options.scale, lambda v: limits.number(v, low=0, high=limits.MAX_FACTOR, low_open=True)),
        ("--headroom", options.headroom, lambda v: limits.number(v, low=1, high=limits.MAX_FACTOR)),
    ]
    if options.services is not None:
        rules.append(("--services", options.services, lambda v: limits.count(v, low=1, high=10**6)))
    for option, value, rule in rules:
        try:
            rule(value)
        except limits.InvalidValueError as exc:
            problems.append(Problem(option, str(exc)))
    if not problems and options.hours * 3600 / options.step > MAX_SAMPLES:
        problems.append(
            Problem(
                "--step", f"expected at most {MAX_SAMPLES} samples in the window, got --hours x 3600 / --step"
            )
        )
    if problems:
        raise InputError("options", problems)


def check_window(start: float, hours: float) -> list[Problem]:
    """``--start`` (seconds) and ``--hours``: finite, the window within a year."""
    problems = []
    try:
        limits.duration(start)
    except limits.InvalidValueError as exc:
        problems.append(Problem("--start", str(exc)))
    try:
        limits.number(hours, low=0, high=limits.MAX_DURATION / 3600, low_open=True, what="a number of hours")
    except limits.InvalidValueError as exc:
        problems.append(Problem("--hours", str(exc)))
    return problems


# --- conversion ----------------------------------------------------------------------------------


def convert(instances: list[Instance], options: Options, source: str) -> Conversion:
    """The window of ``options`` as a scenario; ``source`` names the CSV in messages and notes."""
    check_options(options)
    shapes = {
        "cpu": node_shape(options.cpu_node, "--cpu-node"),
        "gpu": node_shape(options.gpu_node, "--gpu-node"),
    }
    t0 = options.start
    t1 = t0 + options.hours * 3600
    samples = [t0 + k * options.step for k in range(math.ceil(options.hours * 3600 / options.step))]
    in_window = [i for i in instances if i.created < t1 and i.deleted > t0]
    apps = _chosen_apps(in_window, options.services)
    by_key: dict[tuple[str, str], list[Instance]] = {}
    for inst in in_window:
        if inst.app in apps:
            by_key.setdefault((inst.app, inst.role), []).append(inst)

    workloads: list[dict[str, Any]] = []
    events: list[tuple[int, int, dict[str, Any]]] = []
    asks: dict[str, list[tuple[tuple[int, int, int], list[int]]]] = {g: [] for g in shapes}
    for order, key in enumerate(sorted(by_key, key=lambda k: (natural(k[0]), ROLES.index(k[1])))):
        app, role = key
        members = by_key[key]
        counts = _scaled_all(_live_counts(members, samples), options.scale)
        if not any(counts):
            continue
        requests = _shape(members)
        group = GROUP_OF_ROLE[role]
        _check_fits(app, role, requests, shapes[group], options)
        name = unique(f"{dns_name(app, 'app')}-{role.lower()}", {w["name"] for w in workloads})
        workloads.append(_workload(name, role, group, counts[0], requests))
        asks[group].append((requests, counts))
        for k in range(1, len(counts)):
            if counts[k] != counts[k - 1]:
                scale = {"workload": name, "replicas": counts[k]}
                events.append((k, order, {"at": duration(k * options.step), "scale": scale}))

    if not workloads:
        raise InputError(
            source,
            [
                Problem(
                    "", f"no instance is live between trace seconds {t0:.0f} and {t1:.0f}: an empty window"
                )
            ],
        )
    _check_size(asks, shapes, options)
    groups = [_group(g, shapes[g], asks[g], options.headroom) for g in ("cpu", "gpu")]
    scenario: dict[str, Any] = {
        "version": 1,
        "name": f"alibaba-dlrm-v2025 {duration(t0)}+{duration(t1 - t0)} x{options.scale:g}",
        "duration": duration(t1 - t0),
        "node_groups": groups,
        "autoscaler": {"expander": Expander.PRIORITY.value},
        "workloads": workloads,
        "events": [e for _, _, e in sorted(events, key=lambda e: (e[0], e[1]))],
    }
    return Conversion(scenario, _notes(source, options, len(apps), len({i.app for i in in_window})))


def _chosen_apps(in_window: list[Instance], services: int | None) -> set[str]:
    sizes = Counter(i.app for i in in_window)
    ranked = sorted(sizes, key=lambda app: (-sizes[app], natural(app)))
    return set(ranked if services is None else ranked[:services])


def _live_counts(members: list[Instance], samples: list[float]) -> list[int]:
    created = np.sort([i.created for i in members])
    deleted = np.sort([i.deleted for i in members])  # deleted <= t implies created <= t
    at = np.asarray(samples, dtype=np.float64)
    live = np.searchsorted(created, at, side="right") - np.searchsorted(deleted, at, side="right")
    return [int(n) for n in live]


def _scaled(live: int, scale: float) -> int:
    if live == 0:
        return 0
    return max(1, math.floor(live * scale + 0.5))


def _scaled_all(live: list[int], scale: float) -> list[int]:
    """``_scaled`` of every sample at once (the same floats, so the same counts)."""
    counts = np.asarray(live, dtype=np.int64)
    out = np.where(counts == 0, 0, np.maximum(1, np.floor(counts * scale + 0.5).astype(np.int64)))
    return [int(n) for n in out]


def _shape(members: list[Instance]) -> tuple[int, int, int]:
    """The most common requests among the instances (the largest on a tie)."""
    counts = Counter(i.requests for i in members)
    return max(counts, key=lambda r: (counts[r], r))


def _check_fits(
    app: str, role: str, requests: tuple[int, int, int], node: dict[str, int], options: Options
) -> None:
    too_big = [
        f"{res} {format_quantity(req, res)} > {format_quantity(node.get(res, 0), res)}"
        for res, req in zip(RESOURCES, requests, strict=True)
        if req > node.get(res, 0)
    ]
    if too_big:
        option, text = ("--gpu-node", options.gpu_node) if role == "HN" else ("--cpu-node", options.cpu_node)
        raise InputError(
            option,
            [Problem("", f"a node of {text} cannot hold one {app} {role} instance: {', '.join(too_big)}")],
        )


def _workload(
    name: str, role: str, group: str, replicas: int, requests: tuple[int, int, int]
) -> dict[str, Any]:
    workload: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "priority": PRIORITY[role],
        "preemption_policy": PREEMPTION_POLICY[role],
        "requests": {res: format_quantity(q, res) for res, q in zip(RESOURCES, requests, strict=True) if q},
        "tolerations": [dict(GPU_TOLERATION)],
        "startup_time": STARTUP_TIME[role],
        "termination_grace": TERMINATION_GRACE,
    }
    if replicas:
        workload["placement"] = {group: replicas}
    return workload


def _peak_nodes(shape: dict[str, int], asks: list[tuple[tuple[int, int, int], list[int]]]) -> int:
    """The most nodes of ``shape`` that the replicas need at any sample, by resources alone."""
    if not asks:
        return 0
    counts = np.asarray([c for _, c in asks], dtype=np.int64)  # asks x samples
    bound = 0
    for r, res in enumerate(RESOURCES):
        requests = [req[r] for req, _ in asks]
        if not any(requests):
            continue
        # whole nodes: exact in integers; int64 holds the sum unless a window is absurdly large
        if int(counts.max(initial=0)) * sum(requests) < 2**62:
            need = np.asarray(requests, dtype=np.int64) @ counts
            bound = max(bound, int((-(-need // shape[res])).max()))
        else:
            need_py = [sum(int(c) * q for c, q in zip(col, requests, strict=True)) for col in counts.T]
            bound = max(bound, *(-(-n // shape[res]) for n in need_py))
    return bound


def _check_size(
    asks: dict[str, list[tuple[tuple[int, int, int], list[int]]]],
    shapes: dict[str, dict[str, int]],
    options: Options,
) -> None:
    """A window x --scale x --headroom that makes more than a scenario holds is refused here, before
    the packing of the start replicas would take its time."""
    problems = []
    most = max((max(counts) for group in asks.values() for _, counts in group), default=0)
    if most > limits.MAX_REPLICAS:
        problems.append(f"{most} replicas of one workload (at most {limits.MAX_REPLICAS})")
    for group in ("cpu", "gpu"):
        peak = math.ceil(round(_peak_nodes(shapes[group], asks[group]) * options.headroom, 6))
        if peak > limits.MAX_NODES:
            problems.append(f"{peak} {group} nodes at the peak x --headroom (at most {limits.MAX_NODES})")
    if problems:
        message = f"the window x --scale {options.scale:g} needs {' and '.join(problems)}"
        raise InputError("--scale", [Problem("", message)])


def _group(
    name: str, shape: dict[str, int], asks: list[tuple[tuple[int, int, int], list[int]]], headroom: float
) -> dict[str, Any]:
    """Initial nodes: what the loader's first-fit of the start replicas fills; max: the peak x headroom."""
    bound = _peak_nodes(shape, asks)
    initial = _first_fit([(requests, counts[0]) for requests, counts in asks], shape)
    group: dict[str, Any] = {
        "name": name,
        "capacity": {res: format_quantity(v, res) for res, v in shape.items()},
    }
    if name == "gpu":
        group["labels"] = dict(GPU_LABELS)
        group["taints"] = [dict(GPU_TAINT)]
    group |= {
        "min": 0,
        "max": max(1, initial, math.ceil(round(bound * headroom, 6))),
        "initial": initial,
        "price_per_hour": PRICE_PER_HOUR[name],
        "provision_time": PROVISION_TIME[name],
    }
    return group


def _first_fit(pods: list[tuple[tuple[int, int, int], int]], shape: dict[str, int]) -> int:
    """Nodes that a first-fit in this order fills, as the loader places ``placement: {group: n}``.
    Replicas of one workload are alike, so each node in turn takes as many of them as fit: the same
    nodes as placing them pod by pod, in one step per (workload, node). Every ask fits an empty node
    (``_check_fits``)."""
    capacity = (shape.get("cpu", 0), shape.get("memory", 0), shape.get(GPU, 0), shape["pods"])
    free: list[list[int]] = []
    for (cpu, memory, gpu), count in pods:
        ask = (cpu, memory, gpu, MILLI)
        left = count
        for room in free:
            take = min(left, _how_many(ask, room))
            _take(room, ask, take)
            left -= take
        while left:
            room = list(capacity)
            take = min(left, _how_many(ask, room))
            _take(room, ask, take)
            free.append(room)
            left -= take
    return len(free)


def _take(room: list[int], ask: tuple[int, int, int, int], times: int) -> None:
    for r in range(4):
        room[r] -= ask[r] * times


def _how_many(ask: tuple[int, int, int, int], room: list[int]) -> int:
    return min(room[r] // ask[r] for r in range(4) if ask[r])


def _notes(source: str, options: Options, kept: int, live: int) -> tuple[str, ...]:
    services = f"the {kept} largest of {live} services" if options.services else f"all {live} services"
    end = options.start + options.hours * 3600
    return (
        f"Converted by `makeroom trace dlrm` from {Path(source).name}: Alibaba Cluster Trace Program",
        "(github.com/alibaba/clusterdata, cluster-trace-gpu-v2025), for research or study; cite Yang et al.,",
        '"GPU-Disaggregated Serving for Deep Learning Recommendation Models at Scale", USENIX NSDI \'25.',
        f"Window: trace seconds {options.start:.0f} to {end:.0f}, sampled every {options.step:g} s;",
        f"{services}; replicas = live instances x {options.scale:g}.",
        "Node shapes, prices, priorities and taints are assumptions: see docs/traces.md in makeroom.",
        "",
    )
