"""``makeroom simulate``, ``compare`` and ``demo``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from makeroom.cli.app import app
from makeroom.cli.common import (
    ExitStatus,
    JsonOpt,
    Output,
    OutputOpt,
    check_writable,
    console,
    emit,
    guarded,
    output_format,
    say,
)
from makeroom.cli.fit import print_table
from makeroom.cli.progress import sim_progress
from makeroom.cli.tables import comparison_table, run_tables, timeline, verdict_table
from makeroom.cli.wiring import (
    bundled_scenarios,
    check_strategy,
    parse_autoscalers,
    parse_strategies,
    simulate,
)
from makeroom.controller import Strategy
from makeroom.errors import InputError, Problem
from makeroom.model import AutoscalerKind
from makeroom.report.verdict import Verdict, verdict
from makeroom.scenario import Scenario, load_scenario
from makeroom.sim import Result

FileArg = Annotated[Path, typer.Argument(help="A scenario file (spec v1).", show_default=False)]
SeedOpt = Annotated[int, typer.Option(help="Seed for the random choices (the random expander).")]
ConsolidateOpt = Annotated[
    bool | None,
    typer.Option(
        "--consolidate/--no-consolidate",
        help="Turn the controller's consolidation pass on or off (default: the scenario's, on).",
        show_default=False,
    ),
]
ReportOpt = Annotated[
    Path | None,
    typer.Option(help="Write a picture of the run: .png, .svg or a self-contained .html page."),
]


def _check_report_path(path: Path | None) -> None:
    """Refuse a picture that cannot be written before the runs it shows take their time."""
    check_writable(path, (".png", ".svg", ".html", ".htm"), "a report path ending in .png, .svg or .html")


def _render(render: Callable[[], Path], path: Path) -> None:
    """Draw and write the picture; a file system that refuses it is reported as input, exit 2."""
    try:
        render()
    except OSError as exc:
        raise InputError(str(path), [Problem("", f"cannot write: {exc.strerror or exc}")]) from None


AutoscalerOpt = Annotated[
    str | None,
    typer.Option(
        "--autoscaler",
        help="cluster-autoscaler | karpenter; overrides the file's autoscaler.kind.",
        show_default=False,
    ),
]
AutoscalersOpt = Annotated[
    str | None,
    typer.Option(
        help="Comma-separated autoscalers to put side by side (cluster-autoscaler,karpenter); "
        "default: the file's.",
        show_default=False,
    ),
]


def _run_all(
    scenario: Scenario,
    strategies: list[Strategy],
    seed: int,
    consolidate: bool | None = None,
    autoscalers: list[AutoscalerKind] | None = None,
) -> list[Result]:
    results = []
    kinds: list[AutoscalerKind | None] = list(autoscalers) if autoscalers else [None]
    with sim_progress() as bar:
        for kind in kinds:
            for s in strategies:
                label = f"{s}" if kind is None else f"{s}/{kind}"
                track = bar.track(f"{scenario.name} · {label}", scenario.spec.duration)
                results.append(simulate(scenario, s, seed, track, consolidate, kind))
    return results


def _status(pending: bool) -> None:
    """Exit status 3 when pods are still pending at the end (docs/cli.md)."""
    if pending:
        raise typer.Exit(ExitStatus.PENDING)


@app.command("simulate")
def simulate_cmd(
    file: FileArg,
    strategy: Annotated[
        str | None,
        typer.Option(help=f"{' | '.join(Strategy)}; overrides the file's controller.strategy."),
    ] = None,
    seed: SeedOpt = 0,
    output: OutputOpt = "",
    json_out: JsonOpt = False,
    report: ReportOpt = None,
    consolidate: ConsolidateOpt = None,
    autoscaler: AutoscalerOpt = None,
) -> None:
    """Run one scenario in the simulated cluster: what happened, and how each workload fared.

    Exit status 3 when pods are still pending at the end."""

    def go() -> Result:
        fmt = output_format(output, json_out)
        scenario = load_scenario(file)
        chosen = check_strategy(strategy) if strategy else scenario.strategy
        kinds = parse_autoscalers(autoscaler, "--autoscaler")
        _check_report_path(report)
        (result,) = _run_all(scenario, [chosen], seed, consolidate, kinds)
        if report is not None:
            from makeroom.report import render_run

            _render(lambda: render_run(result, report), report)
        if fmt.data:
            emit(result.to_json(), fmt)
            return result
        _print_run(result, wide=fmt is Output.WIDE)
        if report is not None:
            say(f"picture: {report}")
        return result

    _status(bool(guarded(go).pending_at_end))


def _print_run(result: Result, wide: bool = False) -> None:
    for table in run_tables(result):
        print_table(console, table)
    if result.pending_at_end:
        names = result.pending_at_end
        shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        say(f"pending at end: {shown}")
    lines = timeline(result, limit=None if wide else 40)
    if lines:
        console.print("[bold]what happened[/] (time, who, Event reason, object: message)")
        for line in lines:
            say(line)


StrategiesOpt = Annotated[
    str | None,
    typer.Option(
        help=f"Comma-separated strategies ({', '.join(Strategy)}); default: all of them, headroom only "
        "for a scenario that asks for it."
    ),
]


def print_comparison(results: list[Result], wide: bool, under: bool = False) -> Verdict:
    """The side-by-side table, then the verdict: who meets the goals best, and at what price."""
    print_table(console, comparison_table(results, wide=wide, under=under))
    found = verdict(results)
    if found.best:
        print_table(console, verdict_table(found))
        for line in found.conclusions():
            say(line)
    return found


@app.command("compare")
def compare_cmd(
    file: FileArg,
    strategies: StrategiesOpt = None,
    seed: SeedOpt = 0,
    output: OutputOpt = "",
    json_out: JsonOpt = False,
    report: ReportOpt = None,
    consolidate: ConsolidateOpt = None,
    autoscalers: AutoscalersOpt = None,
) -> None:
    """Run one scenario under several strategies: side by side, then a verdict per strategy and which
    one meets the goals best, at what price. With --autoscalers, each strategy under each autoscaler:
    a table and a verdict per autoscaler.

    Past eight workloads the table shows the most affected and sums the others (-o wide: every one).
    Exit status 3 when every strategy leaves pods pending at the end."""

    def go() -> list[Result]:
        fmt = output_format(output, json_out)
        scenario = load_scenario(file)
        names = parse_strategies(strategies, scenario)
        kinds = parse_autoscalers(autoscalers)
        _check_report_path(report)
        if report is not None and kinds is not None and len(kinds) > 1:
            raise InputError(
                "--report",
                [Problem("", "expected one autoscaler for a picture; run compare once per autoscaler")],
            )
        results = _run_all(scenario, names, seed, consolidate, kinds)
        if report is not None:
            from makeroom.report import render_comparison

            _render(lambda: render_comparison(results, report), report)
        if fmt.data:
            emit(_comparison_json(scenario, results, kinds), fmt)
            return results
        if kinds is not None and len(kinds) > 1:
            _print_autoscalers(results, kinds, wide=fmt is Output.WIDE)
        else:
            print_comparison(results, wide=fmt is Output.WIDE)
        if report is not None:
            say(f"picture: {report}")
        return results

    _status(all(r.pending_at_end for r in guarded(go)))


def _print_autoscalers(results: list[Result], kinds: list[AutoscalerKind], wide: bool) -> None:
    """Per autoscaler, its strategies side by side and the verdict among them."""
    for i, kind in enumerate(kinds):
        if i:
            console.print()
        print_comparison([r for r in results if r.autoscaler is kind], wide, under=True)


def _comparison_json(
    scenario: Scenario, results: list[Result], kinds: list[AutoscalerKind] | None = None
) -> dict[str, Any]:
    """Spec v1's comparison; with --autoscalers, also the autoscalers, and results by run label."""
    out: dict[str, Any] = {
        "scenario": scenario.name,
        "strategies": list(dict.fromkeys(r.strategy.value for r in results)),
    }
    if kinds is not None:
        out["autoscalers"] = [k.value for k in kinds]
    out["results"] = {r.label: r.to_json() for r in results}
    return out


@app.command("demo")
def demo_cmd(
    strategies: StrategiesOpt = None,
    output: OutputOpt = "",
    json_out: JsonOpt = False,
    report: Annotated[
        Path | None,
        typer.Option(help="Where to write the pictures (.html, .png or .svg)."),
    ] = Path("makeroom-demo.html"),
    no_report: Annotated[bool, typer.Option("--no-report", help="Write no picture.")] = False,
) -> None:
    """Compare the strategies on the four bundled seed scenarios: seeds 1 to 3 of cortex issue 1966 (room
    for a GPU replica), seed 4 of cortex issue 1965 (consolidation onto cheaper groups).

    Exit status 3 when, in some scenario, every strategy leaves pods pending at the end."""

    def go() -> list[list[Result]]:
        fmt = output_format(output, json_out)
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
        if fmt.data:
            emit([_comparison_json(s, rs) for s, rs in comparisons], fmt)
        else:
            for _, results in comparisons:
                print_comparison(results, wide=fmt is Output.WIDE)
                console.print()
            if target is not None:
                say(f"pictures: {target.resolve()}")
        return [rs for _, rs in comparisons]

    _status(any(all(r.pending_at_end for r in rs) for rs in guarded(go)))
