"""``alibaba-gpu-v2023/`` (Alibaba Cluster Trace Program, cluster-trace-gpu-v2023) to a scenario.

Two files: ``openb_node_list_all_node.csv`` (one row per node: cores and memory in milli-cores and MiB,
GPUs and GPU model) and ``openb_pod_list_default.csv`` (one row per task: requests, ``num_gpu`` GPUs of
``gpu_milli`` thousandths each, QoS, creation and deletion in seconds). The nodes become a fixed
cluster: one node group per (model, shape), its size the trace's count x node scale, no autoscaling.
Each pod that lives in the window becomes a one-replica workload: present at t=0 when it was created
before the window, else a ``deploy`` event at its creation; a ``delete`` event at its deletion when that
falls in the window. Pure: text in, a scenario dict out (docs/traces.md).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from makeroom.errors import InputError, Problem
from makeroom.model import limits
from makeroom.model.quantity import MILLI, format_quantity
from makeroom.model.resources import GPU_SHARE
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
from makeroom.trace.dlrm import check_window

GPU = GPU_SHARE  # thousandths of a GPU, whole numbers: Kubernetes refuses a fraction of nvidia.com/gpu
NODE_FILE = "openb_node_list_all_node.csv"
POD_FILE = "openb_pod_list_default.csv"
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "qos",
    "creation_time",
    "deletion_time",
)
# Assumptions (docs/traces.md): QoS class as priority, latency-sensitive first; best-effort tasks are
# below the autoscaler's expendable cutoff neither way (no autoscaling here).
PRIORITY = {"LS": 1000, "Guaranteed": 500, "Burstable": 100, "BE": 0}
MODEL_LABEL = "alibaba.com/gpu-model"
_MIB = 2**20


@dataclass(frozen=True, slots=True)
class Machine:
    model: str  # "" for a node without GPU
    cpu: int  # milli-cores
    memory: int  # milli-bytes
    gpus: int


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    cpu: int
    memory: int
    gpu: int  # milli-GPUs: num_gpu x gpu_milli (a shared GPU is a fraction of one)
    qos: str
    created: float
    deleted: float  # +inf when empty
    num_gpu: int = 0  # the GPUs it asks for, each of ``share`` thousandths (gpu = num_gpu x share)
    share: int = 0


@dataclass(frozen=True, slots=True)
class Options:
    start: float = 0.0
    hours: float = 6.0
    node_scale: float = 1.0  # nodes of each group = round(count x F), at least 1


def read_machines(path: Path) -> list[Machine]:
    return read_rows(path, NODE_COLUMNS, _machine)


def read_tasks(path: Path) -> list[Task]:
    return read_rows(path, POD_COLUMNS, _task)


def read_dir(directory: Path) -> tuple[list[Machine], list[Task]]:
    if not directory.is_dir():
        raise InputError(
            str(directory), [Problem("", f"expected a directory holding {NODE_FILE} and {POD_FILE}")]
        )
    return read_machines(directory / NODE_FILE), read_tasks(directory / POD_FILE)


def _milli(row: Row, column: str, where: str, unit: int, problems: list[Problem]) -> int:
    """The cell in milli-units of a scenario: ``unit`` is milli-units per unit of the column."""
    value = number(cell(row, column), f"{where}.{column}", problems)
    return 0 if value is None else milli(value, unit, f"{where}.{column}", problems)


def _machine(row: Row, where: str, problems: list[Problem]) -> Machine | None:
    before = len(problems)
    cpu = _milli(row, "cpu_milli", where, 1, problems)
    memory = _milli(row, "memory_mib", where, _MIB * MILLI, problems)
    gpus = whole(cell(row, "gpu"), f"{where}.gpu", problems, high=1000) or 0
    model = cell(row, "model")
    if gpus and not model:
        problems.append(Problem(f"{where}.model", f"expected the GPU model of a node with {gpus} GPUs"))
    return None if len(problems) > before else Machine(model if gpus else "", cpu, memory, gpus)


def _task(row: Row, where: str, problems: list[Problem]) -> Task | None:
    before = len(problems)
    name = cell(row, "name")
    if not name:
        problems.append(Problem(f"{where}.name", "expected a pod name, got an empty cell"))
    cpu = _milli(row, "cpu_milli", where, 1, problems)
    memory = _milli(row, "memory_mib", where, _MIB * MILLI, problems)
    count = whole(cell(row, "num_gpu"), f"{where}.num_gpu", problems, high=1000)
    share = whole(cell(row, "gpu_milli"), f"{where}.gpu_milli", problems, high=1000)
    qos = cell(row, "qos")
    if qos not in PRIORITY:
        problems.append(Problem(f"{where}.qos", f"expected one of {', '.join(PRIORITY)}, got {qos!r}"))
    created = time_cell(cell(row, "creation_time"), f"{where}.creation_time", -math.inf, problems)
    deleted = time_cell(cell(row, "deletion_time"), f"{where}.deletion_time", math.inf, problems)
    if deleted < created:
        problems.append(
            Problem(f"{where}.deletion_time", f"expected a time after creation_time {created:.0f}")
        )
    if len(problems) > before or count is None or share is None:
        return None
    return Task(name, cpu, memory, count * share, qos, created, deleted, count, share)


def convert(machines: list[Machine], tasks: list[Task], options: Options, source: str) -> Conversion:
    problems = check_window(options.start, options.hours)
    try:
        limits.number(options.node_scale, low=0, high=limits.MAX_FACTOR, low_open=True)
    except limits.InvalidValueError as exc:
        problems.append(Problem("--node-scale", str(exc)))
    if problems:
        raise InputError("options", problems)
    t0, t1 = options.start, options.start + options.hours * 3600
    in_window = (t for t in tasks if t.created < t1 and t.deleted > t0 and t.deleted > t.created)
    live = sorted(in_window, key=lambda t: (t.created, natural(t.name)))
    if not live:
        raise InputError(
            source,
            [Problem("", f"no pod is live between trace seconds {t0:.0f} and {t1:.0f}: an empty window")],
        )
    if not machines:
        raise InputError(source, [Problem("", f"{NODE_FILE} lists no node")])

    groups = _groups(machines, options.node_scale)
    workloads: list[dict[str, Any]] = []
    events: list[tuple[float, int, dict[str, Any]]] = []
    taken: set[str] = set()
    for order, task in enumerate(live):
        name = unique(dns_name(task.name, "pod"), taken)
        taken.add(name)
        workload = _workload(name, task)
        if task.created <= t0:
            workloads.append(workload)
        else:
            events.append((task.created - t0, order, {"at": duration(task.created - t0), "deploy": workload}))
        if task.deleted < t1:
            at = max(0.0, task.deleted - t0)
            events.append((at, order, {"at": duration(at), "delete": {"workload": name}}))
    scenario: dict[str, Any] = {
        "version": 1,
        "name": f"alibaba-gpu-v2023 {duration(t0)}+{duration(t1 - t0)} nodes x{options.node_scale:g}",
        "duration": duration(t1 - t0),
        "node_groups": groups,
        "autoscaler": {"enabled": False},
        "workloads": workloads,
        "events": [e for _, _, e in sorted(events, key=lambda e: (e[0], e[1]))],
    }
    notes = (
        f"Converted by `makeroom trace gpu` from {Path(source).name}: Alibaba Cluster Trace Program",
        "(github.com/alibaba/clusterdata, cluster-trace-gpu-v2023), for research or study; cite Weng et al.,",
        '"Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent",',
        "USENIX ATC '23.",
        f"Window: trace seconds {t0:.0f} to {t1:.0f}; {len(live)} pods; nodes x {options.node_scale:g}.",
        "Priorities by QoS and shared GPUs as fractions are assumptions: see docs/traces.md in makeroom.",
        "",
    )
    return Conversion(scenario, notes)


def _groups(machines: list[Machine], node_scale: float) -> list[dict[str, Any]]:
    """One group per (model, shape), GPU models first by how many nodes, nodes without GPU last."""
    counts = Counter(machines)
    models = Counter(m.model for m in machines)
    shapes = sorted(
        counts, key=lambda m: (m.model == "", -models[m.model], m.model, -counts[m], -m.gpus, -m.cpu)
    )
    per_model = Counter(m.model for m in shapes)
    groups: list[dict[str, Any]] = []
    taken: set[str] = set()
    for m in shapes:
        base = dns_name(m.model, "cpu") if m.model else "cpu"
        if per_model[m.model] > 1:
            cores = f"{m.cpu // MILLI}c"
            base = f"{base}-{m.gpus}g-{cores}" if m.gpus else f"{base}-{cores}"
        name = unique(base, taken)
        taken.add(name)
        size = max(1, math.floor(counts[m] * node_scale + 0.5))
        capacity = {
            "cpu": format_quantity(m.cpu, "cpu"),
            "memory": format_quantity(m.memory, "memory"),
        }
        group: dict[str, Any] = {"name": name, "capacity": capacity}
        if m.gpus:
            capacity[GPU] = str(m.gpus * MILLI)
            group["labels"] = {MODEL_LABEL: m.model}
        # The trace publishes no prices: a stated 0, on purpose, as the loader requires (no guessing).
        group |= {"min": size, "max": size, "initial": size, "price_per_hour": 0}
        groups.append(group)
    return groups


def _workload(name: str, task: Task) -> dict[str, Any]:
    requests = {"cpu": format_quantity(task.cpu, "cpu"), "memory": format_quantity(task.memory, "memory")}
    if task.gpu:
        requests[GPU] = str(task.gpu)
    return {"name": name, "replicas": 1, "priority": PRIORITY[task.qos], "requests": requests}
