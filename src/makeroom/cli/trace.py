"""``makeroom trace``: scenarios from published cluster traces (docs/traces.md)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from makeroom.cli.app import app
from makeroom.cli.common import console, guarded, usage_error, warn
from makeroom.errors import InputError, Problem
from makeroom.model.quantity import QuantityError, parse_duration
from makeroom.trace.dlrm import CPU_NODE, GPU, GPU_NODE

trace_app = typer.Typer(
    help="Convert published cluster traces into scenario files (spec v1).", rich_markup_mode=None
)
app.add_typer(trace_app, name="trace")

WriteOpt = Annotated[
    Path | None,
    typer.Option("--write", "-w", help="The scenario file to write ('-' for stdout).", show_default=False),
]
OutOpt = Annotated[
    Path | None,
    typer.Option("--output", "-o", help="Deprecated: the same as --write.", show_default=False),
]


def _target(write: Path | None, output: Path | None) -> Path:
    """--write, or for one more release the -o/--output FILE it replaces."""
    if output is not None:
        warn(f"-o/--output FILE is deprecated and will be removed in the next release: use --write {output}")
    target = write or output
    if target is None:
        usage_error("--write: expected the scenario file to write ('-' for stdout)")
    return target


def _seconds(text: str, option: str) -> float:
    try:
        return parse_duration(text)
    except QuantityError as exc:
        raise InputError(option, [Problem("", str(exc))]) from None


def _write(text: str, output: Path) -> bool:
    """Write the scenario; False when it went to stdout (and nothing else may be printed)."""
    if str(output) == "-":
        typer.echo(text, nl=False)
        return False
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(str(output), [Problem("", f"cannot write: {exc.strerror or exc}")]) from None
    return True


@trace_app.command("dlrm")
def dlrm_cmd(
    csv_file: Annotated[
        Path, typer.Argument(help="alibaba-dlrm-v2025.csv (cluster-trace-gpu-v2025).", show_default=False)
    ],
    write: WriteOpt = None,
    output: OutOpt = None,
    start: Annotated[str, typer.Option(help="Window start, seconds from the trace start (or 480h).")] = "0",
    hours: Annotated[float, typer.Option(help="Window length in hours.")] = 6.0,
    step: Annotated[str, typer.Option(help="How often the live instances are sampled.")] = "5m",
    services: Annotated[
        int | None, typer.Option(help="Keep the N services with the most instances in the window.")
    ] = None,
    scale: Annotated[float, typer.Option(help="Replicas = live instances x F (at least 1 where any).")] = 1.0,
    cpu_node: Annotated[str, typer.Option(help="Allocatable of one CPU node.")] = CPU_NODE,
    gpu_node: Annotated[str, typer.Option(help="Allocatable of one GPU node.")] = GPU_NODE,
    headroom: Annotated[float, typer.Option(help="Max nodes of a group = peak nodes x H.")] = 1.2,
) -> None:
    """A window of the Alibaba DLRM serving trace (2025) as a scenario.

    One workload per (service, role) whose replicas follow the live instances; GPU-node (HN) replicas
    outrank CPU-node (CN) ones, which tolerate the GPU nodes' taint (docs/traces.md)."""
    from makeroom.trace.dlrm import Options, convert, read_instances

    target = _target(write, output)

    def go() -> None:
        options = Options(
            start=_seconds(start, "--start"),
            hours=hours,
            step=_seconds(step, "--step"),
            services=services,
            scale=scale,
            cpu_node=cpu_node,
            gpu_node=gpu_node,
            headroom=headroom,
        )
        conversion = convert(read_instances(csv_file), options, str(csv_file))
        if not _write(conversion.yaml(), target):
            return
        scenario = conversion.scenario
        workloads = scenario["workloads"]
        gpu = sum(w["replicas"] for w in workloads if GPU in w["requests"])
        cpu = sum(w["replicas"] for w in workloads if GPU not in w["requests"])
        groups = ", ".join(f"{g['name']} {g['initial']}..{g['max']}" for g in scenario["node_groups"])
        events = len(scenario["events"])
        console.print(
            f"{target}: {len(workloads)} workloads ({gpu} GPU-node and {cpu} CPU-node replicas at the "
            f"start), {events} scale events over {scenario['duration']}; nodes initial..max: {groups}",
            highlight=False,
            soft_wrap=True,
        )

    guarded(go)


@trace_app.command("gpu")
def gpu_cmd(
    csv_dir: Annotated[
        Path,
        typer.Argument(
            help="alibaba-gpu-v2023/ (cluster-trace-gpu-v2023): the openb node list and pod list.",
            show_default=False,
        ),
    ],
    write: WriteOpt = None,
    output: OutOpt = None,
    start: Annotated[str, typer.Option(help="Window start, seconds from the trace start (or 2800h).")] = "0",
    hours: Annotated[float, typer.Option(help="Window length in hours.")] = 6.0,
    node_scale: Annotated[
        float, typer.Option(help="Nodes of each group = trace count x F (at least 1).")
    ] = 1.0,
) -> None:
    """A window of the Alibaba GPU-sharing trace (2023) as a scenario.

    A fixed cluster with one node group per GPU model and shape, and one single-replica workload per
    pod, deployed and deleted as in the trace (docs/traces.md)."""
    from makeroom.trace.gpu import Options, convert, read_dir

    target = _target(write, output)

    def go() -> None:
        options = Options(start=_seconds(start, "--start"), hours=hours, node_scale=node_scale)
        machines, tasks = read_dir(csv_dir)
        conversion = convert(machines, tasks, options, str(csv_dir))
        if not _write(conversion.yaml(), target):
            return
        scenario = conversion.scenario
        nodes = sum(g["initial"] for g in scenario["node_groups"])
        kinds = Counter(next(k for k in e if k != "at") for e in scenario["events"])
        console.print(
            f"{target}: {len(scenario['node_groups'])} node groups, {nodes} nodes; "
            f"{len(scenario['workloads'])} pods at the start, {kinds['deploy']} deployed and "
            f"{kinds['delete']} deleted over {scenario['duration']}",
            highlight=False,
            soft_wrap=True,
        )

    guarded(go)
