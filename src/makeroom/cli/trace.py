"""``makeroom trace``: scenarios from published cluster traces (docs/traces.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from makeroom.cli.app import app
from makeroom.cli.common import console, guarded
from makeroom.errors import InputError, Problem
from makeroom.model.quantity import QuantityError, parse_duration

trace_app = typer.Typer(help="Convert published cluster traces into scenario files (spec v1).")
app.add_typer(trace_app, name="trace")

OutOpt = Annotated[
    Path,
    typer.Option("--output", "-o", help="The scenario file to write ('-' for stdout).", show_default=False),
]


def _seconds(text: str, option: str) -> float:
    try:
        return parse_duration(text)
    except QuantityError as exc:
        raise InputError(option, [Problem("", str(exc))]) from None


@trace_app.command("dlrm")
def dlrm_cmd(
    csv_file: Annotated[
        Path, typer.Argument(help="alibaba-dlrm-v2025.csv (cluster-trace-gpu-v2025).", show_default=False)
    ],
    output: OutOpt,
    start: Annotated[str, typer.Option(help="Window start, seconds from the trace start (or 480h).")] = "0",
    hours: Annotated[float, typer.Option(help="Window length in hours.")] = 6.0,
    step: Annotated[str, typer.Option(help="How often the live instances are sampled.")] = "5m",
    services: Annotated[
        int | None, typer.Option(help="Keep the N services with the most instances in the window.")
    ] = None,
    scale: Annotated[float, typer.Option(help="Replicas = live instances x F (at least 1 where any).")] = 1.0,
    cpu_node: Annotated[str, typer.Option(help="Allocatable of one CPU node.")] = "cpu=192,memory=1024Gi",
    gpu_node: Annotated[
        str, typer.Option(help="Allocatable of one GPU node.")
    ] = "cpu=96,memory=1024Gi,gpu=8",
    headroom: Annotated[float, typer.Option(help="Max nodes of a group = peak nodes x H.")] = 1.2,
) -> None:
    """A window of the DLRM serving trace as a scenario: one workload per (service, role), its replicas
    following the live instances; GPU-node (HN) replicas outrank CPU-node (CN) ones, which tolerate
    the GPU nodes' taint."""
    from makeroom.trace.dlrm import GPU, Options, convert, read_instances

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
        text = conversion.yaml()
        if str(output) == "-":
            typer.echo(text, nl=False)
            return
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise InputError(str(output), [Problem("", f"cannot write: {exc.strerror or exc}")]) from None
        scenario = conversion.scenario
        workloads = scenario["workloads"]
        gpu = sum(w["replicas"] for w in workloads if GPU in w["requests"])
        cpu = sum(w["replicas"] for w in workloads if GPU not in w["requests"])
        groups = ", ".join(f"{g['name']} {g['initial']}..{g['max']}" for g in scenario["node_groups"])
        events = len(scenario["events"])
        console.print(
            f"{output}: {len(workloads)} workloads ({gpu} GPU-node and {cpu} CPU-node replicas at the "
            f"start), {events} scale events over {scenario['duration']}; nodes initial..max: {groups}",
            highlight=False,
            soft_wrap=True,
        )

    guarded(go)
