"""``makeroom bench fleet``: a whole published trace replayed under each strategy, over seeds."""

from __future__ import annotations

import json
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from makeroom.cli.bench import JsonOpt, OutOpt, WriteOpt, bench_app, check_outputs, emit
from makeroom.cli.common import err_console, guarded, usage_error, write_json
from makeroom.cli.progress import sim_progress
from makeroom.report.units import duration

if TYPE_CHECKING:
    from makeroom.bench.fleet import Fleet

TRACES = ("dlrm", "openb")
DEFAULT_SCALE = {"dlrm": 0.05, "openb": 0.02}


@bench_app.command("fleet")
def bench_fleet(
    trace: Annotated[
        str, typer.Argument(help="dlrm (alibaba-dlrm-v2025.csv) or openb (alibaba-gpu-v2023/).")
    ],
    source: Annotated[Path, typer.Argument(help="The trace's CSV file (dlrm) or folder (openb).")],
    scale: Annotated[
        float | None,
        typer.Option(help="dlrm: replicas x scale (default 0.05); openb: nodes x scale (default 0.02)."),
    ] = None,
    hours: Annotated[
        float | None, typer.Option(help="Replay only the trace's first hours (default: all of it).")
    ] = None,
    seeds: Annotated[int, typer.Option(min=1, max=1000, help="Seeds 1..N per strategy.")] = 10,
    first_seed: Annotated[
        int, typer.Option(min=1, max=10**6, help="The first seed (runs split over processes).")
    ] = 1,
    strategies: Annotated[
        str | None, typer.Option(help="Comma-separated strategies (default: all); balloons are sized after.")
    ] = None,
    balloons: Annotated[
        str | None,
        typer.Option(
            help="Balloon sizes in GPU nodes, e.g. 1,2,4 (default: the k at makeroom's cost and p99)."
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=256,
            help="Processes running the seeds side by side (default: the CPUs this process may use).",
        ),
    ] = None,
    report: Annotated[Path | None, typer.Option("--report", help="An .html page or a .png picture.")] = None,
    output: OutOpt = None,
    json_out: JsonOpt = False,
    write: Annotated[
        Path | None,
        typer.Option(
            "--write",
            help="Also write the JSON result to this file; it holds the runs finished so far while the "
            "command runs.",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Keep the runs already in the --write file (of this command, stopped halfway) and "
            "replay only the others.",
        ),
    ] = False,
) -> None:
    """GPU-pod waits (p50/p90/p99, share over 60 s, never placed), GPU use, cost and node-hours per
    group, scale-ups, needless nodes, evictions and the moved services' unavailable replica-seconds,
    per strategy, as means with 95% confidence intervals over the seeds (docs/benchmarks.md)."""
    from makeroom.bench.fleet import BASE, Contender, Fleet, makes_balloons, to_resume
    from makeroom.bench.fleet_demand import dlrm_demand, openb_demand
    from makeroom.bench.forked import available_cpus
    from makeroom.model import limits

    if trace not in TRACES:
        usage_error(f"TRACE: expected dlrm or openb, got {trace!r}")
    chosen: tuple[Contender, ...] = BASE
    if strategies is not None:
        names = [s.strip() for s in strategies.split(",") if s.strip()]
        unknown = [n for n in names if n not in {c.name for c in BASE}]
        if unknown or not names:
            usage_error(
                f"--strategies: expected some of {', '.join(c.name for c in BASE)}, got {strategies!r}"
            )
        chosen = tuple(c for c in BASE if c.name in names)
    sizes = None
    if balloons is not None:
        try:
            sizes = [limits.count(int(k), low=0, high=limits.MAX_NODES) for k in balloons.split(",")]
        except (ValueError, limits.InvalidValueError):
            usage_error(f"--balloons: expected node counts such as 1,2,4, got {balloons!r}")
    factor = DEFAULT_SCALE[trace] if scale is None else scale
    try:
        limits.number(factor, low=0, low_open=True, high=limits.MAX_FACTOR, what="a scale")
        if hours is not None:
            limits.number(hours, low=0, low_open=True, high=limits.MAX_DURATION / 3600, what="hours")
    except limits.InvalidValueError as exc:
        usage_error(f"--scale or --hours: {exc}")

    if resume and write is None:
        usage_error("--resume: expected --write FILE, the result of the command to resume")
    previous = _read_result(write) if resume and write is not None and write.exists() else None

    def go() -> None:
        check_outputs(output, write, report)
        with sim_progress() as bar:
            if trace == "dlrm":
                demand = dlrm_demand(source, factor, hours)
            else:
                demand = openb_demand(source, factor, hours)
            fleet = Fleet(
                demand,
                list(range(first_seed, first_seed + seeds)),
                bar.track,
                sizes,
                jobs=available_cpus() if jobs is None else jobs,
                checkpoint=None if write is None else lambda partial: write_json(write, partial),
            )
            if previous is not None:
                assert write is not None
                names = [c.name for c in chosen]
                try:
                    kept = to_resume(previous, fleet, names, balloons=makes_balloons(names, sizes))
                except ValueError as exc:
                    usage_error(f"{write}: {exc}")
                fleet.resume(kept, float(previous.get("elapsed_s") or 0.0))
            try:
                data = fleet.run_all(chosen)
            except KeyboardInterrupt:
                _stopped(fleet, write, "stopped")
                raise typer.Exit(130) from None
            except BrokenProcessPool:
                # A worker killed from outside (the kernel's OOM killer, a kill -9): no traceback, and
                # the runs that finished are not lost.
                _stopped(fleet, write, "a worker process was killed (out of memory?); stopped")
                raise typer.Exit(1) from None
        _show(data, report, json_out, output, write)

    guarded(go)


def _stopped(fleet: Fleet, write: Path | None, what: str) -> None:
    finished = sum(map(len, fleet.runs.values()))
    where = f"; they are in {write}: the same command with --resume runs the others"
    err_console.print(
        f"makeroom: {what} after {finished} finished runs{where if write else ''}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _show(
    data: dict[str, Any], report: Path | None, json_out: bool, output: str | None, write: Path | None
) -> None:
    """The picture if asked for, then the table or the data, as every fleet command ends."""
    if report is not None:
        from makeroom.report.fleet import render

        render(data, report)
    emit(data, json_out, output, write, _table(data), None if report is None else ("report", report))


def _table(data: dict[str, Any]) -> Table:
    """Means over the seeds; the confidence intervals are in -o json and --report."""
    table = Table(title=f"{data['scenario']} · {len(data['seeds'])} seeds · means", title_justify="left")
    table.add_column("strategy", no_wrap=True)
    for col in ("p50", "p99", ">60s", "GPU use", "cost", "evictions", "needless"):
        table.add_column(col, justify="right")
    for name, s in data["contenders"].items():
        cost = s["cost"]["mean"]
        table.add_row(
            name,
            duration(s["gpu_wait_p50_s"]["mean"], "-"),
            duration(s["gpu_wait_p99_s"]["mean"], "-"),
            _share(s["gpu_wait_over_60s_share"]["mean"]),
            _share(s["gpu_utilisation"]["mean"]),
            "-" if cost is None else f"${cost / 1000:,.0f}k",
            f"{s['evictions']['mean']:.0f}",
            f"{s['needless_nodes']['mean']:.1f}",
        )
    return table


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


@bench_app.command("fleet-merge")
def bench_fleet_merge(
    results: Annotated[
        list[Path], typer.Argument(help="JSON results of makeroom bench fleet (--write) to merge.")
    ],
    report: Annotated[Path | None, typer.Option("--report", help="An .html page or a .png picture.")] = None,
    output: OutOpt = None,
    json_out: JsonOpt = False,
    write: WriteOpt = None,
) -> None:
    """Results of makeroom bench fleet over the same demand (trace, --scale, --hours) but other seeds
    or strategies, as one result with the intervals over all the seeds: for runs split over
    processes (--first-seed), machines or days. A strategy's seed in two of them must have the same
    outcome in both (it is kept once)."""
    from makeroom.bench.fleet import merge

    guarded(lambda: check_outputs(output, write, report))
    parts = [_read_result(path) for path in results]
    try:
        merged = merge(parts)
    except KeyError as exc:
        usage_error(f"{', '.join(map(str, results))}: expected {exc} in every result and run")
    except (ValueError, TypeError) as exc:
        usage_error(f"{', '.join(map(str, results))}: cannot be merged: {exc}")

    guarded(lambda: _show(merged, report, json_out, output, write))


def _read_result(path: Path) -> dict[str, Any]:
    """A result of makeroom bench fleet --write, or a clear refusal (exit 2)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        usage_error(f"{path}: cannot be read: {exc.strerror or exc}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        usage_error(f"{path}: expected the JSON that makeroom bench fleet --write writes: {exc}")
    if not isinstance(data, dict) or data.get("benchmark") != "fleet" or "runs" not in data:
        usage_error(f"{path}: /benchmark: expected a result of makeroom bench fleet")
    return data
