"""Readable terminal tables for runs and comparisons, in the report's units (``1m52s``, ``$0.23``)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from makeroom.report.impact import TOP_WORKLOADS, rank_workloads, split
from makeroom.report.story import as_text, story
from makeroom.report.units import duration, money
from makeroom.sim import Result
from makeroom.sim.results import WorkloadResult


def _n(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}"


def run_tables(result: Result) -> list[Table]:
    workloads = Table(title=f"{result.scenario} · strategy {result.label}", title_justify="left")
    workloads.add_column("workload", no_wrap=True)
    for col in ("prio", "want", "ready", "to Ready", "min ready", "short r·s", "evicted"):
        workloads.add_column(col, justify="right")
    for name, w in result.workloads.items():
        workloads.add_row(
            name,
            str(w.priority),
            str(w.desired),
            str(w.ready_at_end),
            duration(w.time_to_ready_s),
            _n(w.min_ready),
            _n(w.unavailable_replica_seconds),
            str(w.evicted),
        )
    groups = Table(title="node groups", title_justify="left")
    groups.add_column("group", no_wrap=True)
    for col in ("at end", "peak", "added", "removed", "node-hours", "cost"):
        groups.add_column(col, justify="right")
    for name, g in result.node_groups.items():
        groups.add_row(
            name,
            str(g.nodes_at_end),
            str(g.peak_nodes),
            str(g.nodes_added),
            str(g.nodes_removed),
            f"{g.node_hours:.2f}",
            money(g.cost),
        )
    groups.add_section()
    groups.add_row("total", "", "", "", "", "", money(result.cost))
    return [workloads, groups]


def timeline(result: Result, limit: int | None = 40) -> list[str]:
    """What happened, one line per decision (report.story)."""
    return as_text(story(result), limit)


def comparison_table(results: Sequence[Result], wide: bool = False) -> Table:
    """Strategies side by side. Past a few workloads only the most affected are shown one by one and
    the others summed in one row, unless ``wide``."""
    first = results[0]
    table = Table(title=f"{first.scenario}: strategies side by side", title_justify="left")
    table.add_column("", justify="left", no_wrap=True)
    for r in results:
        table.add_column(r.label, justify="right")
    ranked = rank_workloads(results)
    shown, others = (ranked, []) if wide else split(ranked, TOP_WORKLOADS)
    shown_set = set(shown)
    workloads = [w for w in dict.fromkeys(w for r in results for w in r.workloads) if w in shown_set]
    groups = list(dict.fromkeys(g for r in results for g in r.node_groups))

    def row(label: str, values: list[str]) -> None:
        table.add_row(label, *values)

    for w in workloads:
        ws = [r.workloads.get(w) for r in results]
        row(f"[bold]{w}[/] time to Ready", [duration(x.time_to_ready_s) if x else "-" for x in ws])
        row("  min Ready", [_n(x.min_ready) if x else "-" for x in ws])
        row("  short (replica·s)", [_n(x.unavailable_replica_seconds) if x else "-" for x in ws])
        row("  Ready at end / desired", [f"{x.ready_at_end}/{x.desired}" if x else "-" for x in ws])
        row("  evicted", [str(x.evicted) if x else "-" for x in ws])
    if others:
        groups_of = [[r.workloads[w] for w in others if w in r.workloads] for r in results]
        row(f"[bold]others ({len(others)} workloads)[/] slowest to Ready", [_slowest(ws) for ws in groups_of])
        row("  short (replica·s)", [_n(sum(x.unavailable_replica_seconds for x in ws)) for ws in groups_of])
        row(
            "  Ready at end / desired",
            [f"{sum(x.ready_at_end for x in ws)}/{sum(x.desired for x in ws)}" for ws in groups_of],
        )
        row("  evicted", [str(sum(x.evicted for x in ws)) for ws in groups_of])
    table.add_section()
    row("evictions", [str(r.evictions) for r in results])
    for g in groups:
        gs = [r.node_groups.get(g) for r in results]
        row(f"{g} nodes added / removed", [f"{x.nodes_added} / {x.nodes_removed}" if x else "-" for x in gs])
    row("pending at end", [str(len(r.pending_at_end)) for r in results])
    row("cost", [money(r.cost) for r in results])
    if others:
        table.caption = f"{len(others)} more workloads summed as others; -o wide shows each"
        table.caption_justify = "left"
    return table


def _slowest(ws: Sequence[WorkloadResult]) -> str:
    times = [x.time_to_ready_s for x in ws]
    if any(t is None for t in times):
        return "never"
    return duration(max((t for t in times if t is not None), default=0.0))
