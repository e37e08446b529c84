"""``makeroom simulate``, ``compare`` and ``demo``."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from makeroom.cli.app import app
from makeroom.cli.common import console, guarded, print_json
from makeroom.cli.progress import sim_progress
from makeroom.cli.tables import comparison_table, run_tables, timeline
from makeroom.cli.wiring import bundled_scenarios, check_strategy, parse_strategies, simulate
from makeroom.errors import InputError, Problem
from makeroom.scenario import Scenario, load_scenario
from makeroom.sim import Result

FileArg = Annotated[Path, typer.Argument(help="A scenario file (spec v1).", show_default=False)]
SeedOpt = Annotated[int, typer.Option(help="Seed for the random choices (the random expander).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the JSON result of the spec instead of tables.")]
ConsolidateOpt = Annotated[
    bool | None,
    typer.Option(
        "--consolidate/--no-consolidate",
        help="Turn the controller's consolidation pass on or off (default: the scenario's, on).",
    ),
]
ReportOpt = Annotated[
    Path | None,
    typer.Option(help="Write a picture of the run: .png, .svg or a self-contained .html page."),
]


def _check_report_path(path: Path | None) -> None:
    """Refuse a picture that cannot be written before the runs it shows take their time."""
    if path is None:
        return
    if path.suffix.lower() not in (".png", ".svg", ".html", ".htm"):
        raise InputError(str(path), [Problem("", "expected a report path ending in .png, .svg or .html")])
    parent = path.parent
    if not parent.is_dir():
        raise InputError(str(path), [Problem("", f"expected an existing directory {parent}")])
    if path.is_dir():
        raise InputError(str(path), [Problem("", "expected a file name, found a directory")])
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(str(path), [Problem("", "cannot write here: permission denied")])


def _render(render: Callable[[], Path], path: Path) -> None:
    """Draw and write the picture; a file system that refuses it is reported as input, exit 2."""
    try:
        render()
    except OSError as exc:
        raise InputError(str(path), [Problem("", f"cannot write: {exc.strerror or exc}")]) from None


def _run_all(
    scenario: Scenario, strategies: list[str], seed: int, consolidate: bool | None = None
) -> list[Result]:
    results = []
    with sim_progress() as bar:
        for s in strategies:
            track = bar.track(f"{scenario.name} · {s}", scenario.spec.duration)
            results.append(simulate(scenario, s, seed, track, consolidate))
    return results


@app.command("simulate")
def simulate_cmd(
    file: FileArg,
    strategy: Annotated[
        str | None,
        typer.Option(help="none | preemption | evict | migrate; overrides the file's controller.strategy."),
    ] = None,
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
    report: ReportOpt = None,
    consolidate: ConsolidateOpt = None,
) -> None:
    """Run one scenario in the simulated cluster and summarise what happened."""

    def go() -> None:
        scenario = load_scenario(file)
        chosen = strategy or scenario.strategy
        check_strategy(chosen, "--strategy" if strategy else f"{file}: controller.strategy")
        _check_report_path(report)
        (result,) = _run_all(scenario, [chosen], seed, consolidate)
        if report is not None:
            from makeroom.report import render_run

            _render(lambda: render_run(result, report), report)
        if json_out:
            print_json(result.data)
            return
        _print_run(result.data)
        if report is not None:
            console.print(f"picture: {report}")

    guarded(go)


def _print_run(data: dict[str, Any]) -> None:
    for table in run_tables(data):
        console.print(table)
    if data["pending_at_end"]:
        console.print(f"[yellow]pending at end:[/] {', '.join(data['pending_at_end'])}")
    lines = timeline(data)
    if lines:
        console.print("[bold]timeline[/]")
        for line in lines:
            console.print(line, highlight=False)


StrategiesOpt = Annotated[
    str | None, typer.Option(help="Comma-separated strategies; default: every available one.")
]


@app.command("compare")
def compare_cmd(
    file: FileArg,
    strategies: StrategiesOpt = None,
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
    report: ReportOpt = None,
    consolidate: ConsolidateOpt = None,
) -> None:
    """Run one scenario under several strategies and show them side by side."""

    def go() -> None:
        scenario = load_scenario(file)
        names = parse_strategies(strategies)
        _check_report_path(report)
        results = _run_all(scenario, names, seed, consolidate)
        if report is not None:
            from makeroom.report import render_comparison

            _render(lambda: render_comparison(results, report), report)
        if json_out:
            print_json(_comparison_json(scenario, results))
            return
        console.print(comparison_table([r.data for r in results]))
        if report is not None:
            console.print(f"picture: {report}")

    guarded(go)


def _comparison_json(scenario: Scenario, results: list[Result]) -> dict[str, Any]:
    return {
        "scenario": scenario.name,
        "strategies": [r.data["strategy"] for r in results],
        "results": {r.data["strategy"]: r.data for r in results},
    }


@app.command("demo")
def demo_cmd(
    strategies: StrategiesOpt = None,
    json_out: JsonOpt = False,
    report: Annotated[
        Path | None,
        typer.Option(help="Where to write the pictures (.html, .png or .svg)."),
    ] = Path("makeroom-demo.html"),
    no_report: Annotated[bool, typer.Option("--no-report", help="Write no picture.")] = False,
) -> None:
    """Compare the strategies on the four bundled seed scenarios of cortex issue 1966."""

    def go() -> None:
        names = parse_strategies(strategies)
        target = None if no_report else report
        _check_report_path(target)
        comparisons = []
        for path in bundled_scenarios():
            scenario = load_scenario(path)
            comparisons.append((scenario, _run_all(scenario, names, 0)))
        if target is not None:
            from makeroom.report import render_demo

            _render(lambda: render_demo([results for _, results in comparisons], target), target)
        if json_out:
            print_json([_comparison_json(s, rs) for s, rs in comparisons])
            return
        for _, results in comparisons:
            console.print(comparison_table([r.data for r in results]))
            console.print()
        if target is not None:
            console.print(f"pictures: {target.resolve()}")

    guarded(go)
