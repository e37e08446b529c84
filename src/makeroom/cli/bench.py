"""``makeroom bench``: benchmarks whose results are JSON, each with its baseline from the same run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from makeroom.cli.app import app
from makeroom.cli.common import (
    Output,
    check_writable,
    console,
    format_or_file,
    guarded,
    old_output_file,
    usage_error,
    write_json,
)
from makeroom.cli.common import emit as emit_data
from makeroom.cli.fit import print_table
from makeroom.cli.progress import sim_progress
from makeroom.cli.wiring import bundled_scenarios
from makeroom.model import limits

bench_app = typer.Typer(
    help="Benchmarks; results as JSON with a baseline measured in the same run.", rich_markup_mode=None
)
app.add_typer(bench_app, name="bench")

JsonOpt = Annotated[bool, typer.Option("--json", help="The same as -o json.")]
OutOpt = Annotated[
    str | None,
    typer.Option(
        "--output",
        "-o",
        metavar="FORMAT",
        help="table, json or yaml. (A file name here is deprecated: use --write.)",
        show_default=False,
    ),
]
WriteOpt = Annotated[Path | None, typer.Option("--write", help="Also write the JSON result to this file.")]
FORMATS = (Output.TABLE, Output.JSON, Output.YAML)


def check_outputs(output: str | None, write: Path | None, picture: Path | None = None) -> None:
    """Every file a bench command is to write, refused before its runs take their time if it cannot
    be (exit 2): the JSON (--write, or -o's deprecated file name) and the picture (.png or .html)."""
    check_writable(write)
    check_writable(old_output_file(output))
    check_writable(picture, (".png", ".html"), "a file name ending in .png or .html")


def emit(
    data: dict[str, Any],
    json_out: bool,
    output: str | None,
    write: Path | None,
    table: Table,
    drawn: tuple[str, Path] | None = None,
) -> None:
    """The result as a table (and where the JSON and the picture, ``drawn`` as (its name, its path),
    were written) or as data."""
    fmt, old_file = format_or_file(output, FORMATS, "--write")
    if json_out:
        if output not in (None, "", "json") and old_file is None:
            usage_error(f"--json and -o {output}: choose one")
        fmt = Output.JSON
    target = write or old_file
    if target is not None:
        write_json(target, data)
    if fmt.data:
        emit_data(data, fmt)
    else:
        print_table(console, table)
        if target is not None:
            console.print(f"JSON: {target}")
        if drawn is not None and old_file is None:
            console.print(f"{drawn[0]}: {drawn[1]}")


@bench_app.command("sim")
def bench_sim(
    nodes: Annotated[int, typer.Option(min=10, help="Nodes of the generated churn cluster.")] = 1000,
    pods: Annotated[int, typer.Option(min=10, help="Pods of the generated churn cluster.")] = 30_000,
    hours: Annotated[float, typer.Option(min=0.01, help="Simulated hours of churn.")] = 24.0,
    quick: Annotated[bool, typer.Option(help="A small churn run (100 nodes, 3,000 pods, 1 h).")] = False,
    output: OutOpt = None,
    json_out: JsonOpt = False,
    write: WriteOpt = None,
) -> None:
    """Wall time and simulated events per second: each seed scenario under each of the four
    strategies, and a generated cluster with churn (goals: a seed under 0.5 s; 1,000 nodes,
    30,000 pods, 24 h under 60 s). Prints a table; -o json prints the JSON result."""
    from makeroom.bench.sim import run_sim_bench

    if quick:
        nodes, pods, hours = 100, 3000, 1.0
    try:
        limits.number(hours, low=0, low_open=True, high=limits.MAX_DURATION / 3600, what="hours")
    except limits.InvalidValueError as exc:
        usage_error(f"--hours: {exc}")

    def go() -> None:
        check_outputs(output, write)
        with sim_progress() as bar:
            data = run_sim_bench(bundled_scenarios(), nodes, pods, hours, bar.track)
        emit(data, json_out, output, write, sim_table(data))

    guarded(go)


def sim_table(data: dict[str, Any]) -> Table:
    """The result of ``bench sim`` for a person: one row per run."""
    table = Table(title=f"makeroom bench sim · bare loop {data['baseline']['events_per_s']:,} ev/s")
    for col in ("run", "wall s", "events", "events/s", "goal s", "ok"):
        table.add_column(col, justify="left" if col == "run" else "right", no_wrap=col != "run")
    for row in [*data["seeds"], data["churn"]]:
        table.add_row(
            row["name"],
            f"{row['wall_s']:.3f}",
            f"{row['events']:,}",
            f"{row['events_per_s']:,}",
            f"{row['goal_s']:g}",
            "yes" if row["meets_goal"] else "[red]no[/]",
        )
    return table
