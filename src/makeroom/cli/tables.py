"""Readable terminal tables for runs and comparisons, in the report's units (``1m52s``, ``$0.23``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich import box
from rich.table import Table

from makeroom.report.impact import REMOVALS, TOP_WORKLOADS, UNAVAILABLE, rank_workloads, shown_removals, split
from makeroom.report.story import as_text, story
from makeroom.report.units import duration, money, money_parts
from makeroom.report.verdict import Verdict
from makeroom.sim import Result
from makeroom.sim.recorder import Removal
from makeroom.sim.results import WorkloadResult


def _n(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}"


def simulated(results: Sequence[Result]) -> str:
    """``over the simulated 20m00s``: the window every cost covers."""
    return f"over the simulated {duration(max(r.duration_s for r in results))}"


def run_tables(result: Result) -> list[Table]:
    workloads = Table(title=f"{result.scenario} · strategy {result.label}", title_justify="left")
    workloads.add_column("workload (priority)", no_wrap=True)
    # one run: only the ways its pods went (evicted, 0, when none went), so that it fits 80 columns
    removals = [h for h in Removal if any(w.removed.get(h, 0) for w in result.workloads.values())]
    removals = removals or [Removal.EVICTED]
    heads = ["Ready at end / desired", "time to Ready", "lowest Ready", UNAVAILABLE]
    for col in [*heads, *(REMOVALS[h] for h in removals)]:
        workloads.add_column(col, justify="right", no_wrap=True)
    for name, w in result.workloads.items():
        workloads.add_row(
            f"{name} ({w.priority})",
            f"{w.ready_at_end}/{w.desired}",
            duration(w.time_to_ready_s),
            _n(w.min_ready),
            _n(w.unavailable_replica_seconds),
            *(str(w.removed.get(h, 0)) for h in removals),
        )
    groups = Table(title="node groups", title_justify="left")
    groups.add_column("group", no_wrap=True)
    for col in ("at end", "peak", "added", "removed", "node-hours", f"cost {simulated([result])}"):
        groups.add_column(col, justify="right", no_wrap=True)
    costs = money_parts([g.cost for g in result.node_groups.values()], result.cost)
    for (name, g), cost in zip(result.node_groups.items(), costs, strict=True):
        groups.add_row(
            name,
            str(g.nodes_at_end),
            str(g.peak_nodes),
            str(g.nodes_added),
            str(g.nodes_removed),
            f"{g.node_hours:.2f}",
            cost,
        )
    groups.add_section()
    groups.add_row("total", "", "", "", "", "", money(result.cost))
    return [workloads, groups]


def timeline(result: Result, limit: int | None = 40) -> list[str]:
    """What happened, one line per decision (report.story)."""
    return as_text(story(result), limit)


def comparison_table(results: Sequence[Result], wide: bool = False, under: bool = False) -> Table:
    """Strategies side by side. Past a few workloads only the most affected are shown one by one and
    the others summed in one row, unless ``wide``. Runs under one autoscaler are named by strategy
    alone, the autoscaler in the title (always with ``under``)."""
    first = results[0]
    kinds = {r.autoscaler for r in results}
    named = len(kinds) == 1 and (under or first.label != first.strategy.value)
    title = f"{first.scenario}: strategies side by side" + (f" under {first.autoscaler}" if named else "")
    table = Table(title=title, title_justify="left")
    table.add_column("", justify="left")
    for r in results:
        table.add_column(r.strategy.value if len(kinds) == 1 else r.label, justify="right", no_wrap=True)
    ranked = rank_workloads(results)
    shown, others = (ranked, []) if wide else split(ranked, TOP_WORKLOADS)
    shown_set = set(shown)
    workloads = [w for w in dict.fromkeys(w for r in results for w in r.workloads) if w in shown_set]
    groups = list(dict.fromkeys(g for r in results for g in r.node_groups))

    def row(label: str, values: list[str]) -> None:
        table.add_row(label, *values)

    def removal_rows(label: str, per_run: list[list[Mapping[Removal, int]]]) -> None:
        for how in shown_removals([c for cs in per_run for c in cs]):
            row(f"{label}{REMOVALS[how]}", [str(sum(c.get(how, 0) for c in cs)) for cs in per_run])

    for w in workloads:
        ws = [r.workloads.get(w) for r in results]
        row(f"[bold]{w}[/] time to Ready", [duration(x.time_to_ready_s) if x else "-" for x in ws])
        row("  lowest Ready", [_n(x.min_ready) if x else "-" for x in ws])
        row(f"  {UNAVAILABLE}", [_n(x.unavailable_replica_seconds) if x else "-" for x in ws])
        row("  Ready at end / desired", [f"{x.ready_at_end}/{x.desired}" if x else "-" for x in ws])
        removal_rows("  ", [[x.removed] if x else [] for x in ws])
    if others:
        groups_of = [[r.workloads[w] for w in others if w in r.workloads] for r in results]
        row(f"[bold]others ({len(others)} workloads)[/] slowest to Ready", [_slowest(ws) for ws in groups_of])
        row(f"  {UNAVAILABLE}", [_n(sum(x.unavailable_replica_seconds for x in ws)) for ws in groups_of])
        row(
            "  Ready at end / desired",
            [f"{sum(x.ready_at_end for x in ws)}/{sum(x.desired for x in ws)}" for ws in groups_of],
        )
        removal_rows("  ", [[x.removed for x in ws] for ws in groups_of])
    table.add_section()
    removal_rows("pods ", [[r.removed] for r in results])
    for g in groups:
        gs = [r.node_groups.get(g) for r in results]
        row(f"{g} nodes added / removed", [f"{x.nodes_added} / {x.nodes_removed}" if x else "-" for x in gs])
    row("pods pending at end", [str(len(r.pending_at_end)) for r in results])
    row(f"cost {simulated(results)}", [money(r.cost) for r in results])
    if others:
        table.caption = f"{len(others)} more workloads summed as others; -o wide shows each"
        table.caption_justify = "left"
    return table


def verdict_table(found: Verdict) -> Table:
    """The verdict's standings, the best first, under its goals."""
    table = Table(
        title=found.header(), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False
    )
    for i, col in enumerate(found.columns()):
        table.add_column(col, justify="left" if i in (0, 3) else "right", no_wrap=i not in (1, 3))
    for i, cells in enumerate(found.rows()):
        table.add_row(*cells, style="bold" if found.ranked()[i].strategy in found.best else None)
    return table


def _slowest(ws: Sequence[WorkloadResult]) -> str:
    times = [x.time_to_ready_s for x in ws]
    if any(t is None for t in times):
        return "never"
    return duration(max((t for t in times if t is not None), default=0.0))
