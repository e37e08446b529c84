"""Readable terminal tables for runs and comparisons."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from makeroom.sim import Result

NOTABLE = {
    "scale_up": "autoscaler adds {nodes} {group} node(s) for {npods} pod(s)",
    "node_ready": "node {node} Ready",
    "scale_down": "autoscaler removes {node}",
    "node_removed": "node {node} gone ({reason})",
    "preempted": "{pod} preempted on {node}",
    "evicted": "{pod} evicted from {node}",
    "nominated": "{pod} nominated to {node}",
    "scale": "{workload} scaled to {replicas}",
    "deploy": "{workload} deployed with {replicas}",
    "delete": "{workload} deleted",
}


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "never"
    if isinstance(value, float):
        return f"{value:,.1f}{unit}" if value % 1 else f"{value:,.0f}{unit}"
    return f"{value}{unit}"


def run_tables(result: Result) -> list[Table]:
    workloads = Table(title=f"{result.scenario} · strategy {result.strategy}", title_justify="left")
    workloads.add_column("workload", no_wrap=True)
    for col in ("prio", "want", "ready", "to ready", "min ready", "unavail r·s", "evicted"):
        workloads.add_column(col, justify="right")
    for name, w in result.workloads.items():
        workloads.add_row(
            name,
            str(w.priority),
            str(w.desired),
            str(w.ready_at_end),
            _fmt(w.time_to_ready_s, " s"),
            _fmt(w.min_ready),
            _fmt(w.unavailable_replica_seconds),
            str(w.evicted),
        )
    groups = Table(title="node groups", title_justify="left")
    groups.add_column("group", no_wrap=True)
    for col in ("nodes at end", "peak", "added", "removed", "node-hours", "cost"):
        groups.add_column(col, justify="right")
    for name, g in result.node_groups.items():
        groups.add_row(
            name,
            str(g.nodes_at_end),
            str(g.peak_nodes),
            str(g.nodes_added),
            str(g.nodes_removed),
            f"{g.node_hours:.2f}",
            f"{g.cost:.3f}",
        )
    groups.add_section()
    groups.add_row("total", "", "", "", "", "", f"{result.cost:.3f}")
    return [workloads, groups]


def timeline(result: Result, limit: int = 40) -> list[str]:
    lines = []
    for e in result.events:
        template = NOTABLE.get(e.kind)
        if template is None:
            continue
        fields = {"npods": len(e.get("pods") or []), **e.to_json()}
        try:
            text = template.format(**fields)
        except KeyError:
            text = e.kind
        lines.append(f"{e.t / 60:6.1f} min  {text}")
    if len(lines) > limit:
        lines = [*lines[: limit - 1], f"... and {len(lines) - limit + 1} more events (see --json)"]
    return lines


def comparison_table(results: Sequence[Result]) -> Table:
    first = results[0]
    table = Table(title=f"{first.scenario}: strategies side by side", title_justify="left")
    table.add_column("", justify="left", no_wrap=True)
    for r in results:
        table.add_column(str(r.strategy), justify="right")
    workloads = list(dict.fromkeys(w for r in results for w in r.workloads))
    groups = list(dict.fromkeys(g for r in results for g in r.node_groups))

    def row(label: str, values: list[str]) -> None:
        table.add_row(label, *values)

    for w in workloads:
        ws = [r.workloads.get(w) for r in results]
        row(f"[bold]{w}[/] time to ready", [_fmt(x.time_to_ready_s, " s") if x else "-" for x in ws])
        row("  min ready", [_fmt(x.min_ready) if x else "-" for x in ws])
        row("  unavailable replica·s", [_fmt(x.unavailable_replica_seconds) if x else "-" for x in ws])
        row("  ready at end / desired", [f"{x.ready_at_end}/{x.desired}" if x else "-" for x in ws])
        row("  evicted", [str(x.evicted) if x else "-" for x in ws])
    table.add_section()
    row("evictions", [str(r.evictions) for r in results])
    for g in groups:
        gs = [r.node_groups.get(g) for r in results]
        row(
            f"{g} nodes added / removed",
            [f"{x.nodes_added} / {x.nodes_removed}" if x else "-" for x in gs],
        )
    row("pending at end", [str(len(r.pending_at_end)) for r in results])
    row("cost", [f"{r.cost:.3f}" for r in results])
    return table
