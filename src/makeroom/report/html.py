"""One self-contained HTML page: per scenario, the verdict, the figures inline as SVG at a readable size,
one table with the strategies side by side, and what happened under each strategy, told in words.
No scripts, no links."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from makeroom.errors import InputError, Problem
from makeroom.report.impact import (
    REMOVALS,
    TOP_WORKLOADS,
    UNAVAILABLE,
    rank_workloads,
    shown_removals,
    split,
)
from makeroom.report.story import Line, story
from makeroom.report.units import duration, money
from makeroom.report.verdict import verdict
from makeroom.sim.results import Result, WorkloadResult

CSS = """
html { font-size: 16px; }
body { font-family: "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; color: #222; margin: 16px 20px;
       line-height: 1.4; }
h1 { font-size: 1.6em; margin: 0 0 0.2em; }
h2 { font-size: 1.3em; margin-top: 1.6em; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 1.05em; margin: 1.2em 0 0.4em; }
p.lead { color: #555; margin-top: 0; max-width: 70em; }
.verdict { background: #f6f8fa; border-left: 4px solid #2f7d32; padding: 8px 14px; margin: 10px 0 14px;
           max-width: 100%; overflow-wrap: anywhere; }
.verdict p { margin: 4px 0; }
.verdict .best { font-weight: 600; }
.verdict table.standings { margin: 6px 0 2px; }
.verdict table.standings td:nth-child(4),
.verdict table.standings th:nth-child(4) { text-align: left; white-space: normal; }
.verdict tr.best td { font-weight: 600; }
.figures { display: flex; flex-wrap: wrap; gap: 12px 24px; align-items: flex-start; }
figure { margin: 6px 0; max-width: 100%; }
figure svg { display: block; max-width: 100%; height: auto; }
.wide { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.95em; margin: 6px 0 10px; }
caption { text-align: left; font-weight: bold; padding: 2px 0; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 3px 10px; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
thead th { border-bottom: 2px solid #bbb; font-weight: 600; }
th.best { background: #e8f5e9; }
tr.workload td:first-child { font-weight: 600; }
tr.detail td:first-child { padding-left: 1.6em; color: #444; }
td.never { color: #b3261e; font-weight: 600; }
details { margin: 6px 0; }
summary { cursor: pointer; font-weight: 600; }
table.story th { text-align: left; }
table.story td { text-align: left; white-space: normal; vertical-align: top; }
table.story td.t { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
table.story td.reason { white-space: nowrap; font-family: "DejaVu Sans Mono", monospace; font-size: 0.92em; }
table.story tr.warning td { color: #8a4b00; }
"""

_XML_PROLOGUE = re.compile(r"\A(?:<\?xml[^>]*\?>\s*)?(?:<!DOCTYPE[^>]*>\s*)?", re.DOTALL)
_ID = re.compile(r'(\sid="|url\(#|xlink:href="#|\shref="#)([^"\)]+)')

LEAD = (
    "Time runs left to right. Nodes are stacked by group (hatched: billed but not yet Ready); each "
    "workload shows Ready replicas (solid) against desired (dashed), the shaded gap's area being its "
    "unavailable replica·s; then pending pods (makeroom's own surge replicas included while they wait) and "
    "the events, one row per Kubernetes Event reason, as told in words under each strategy below."
)


def inline_svg(svg: str, prefix: str) -> str:
    """The <svg> element of a matplotlib SVG document, without its XML declaration and doctype, and
    with every id (and every reference to one) prefixed, so several figures can share one page."""
    body = _XML_PROLOGUE.sub("", svg, count=1).strip()
    return _ID.sub(lambda m: f"{m.group(1)}{prefix}{m.group(2)}", body)


def num(x: Any) -> str:
    """A count as the tables print it."""
    if x is None:
        return "—"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return f"{x:,.0f}"
    return escape(str(x))


def _ready_cell(seconds: float | None) -> str:
    if seconds is None:
        return '<td class="never">never</td>'
    return f"<td>{duration(seconds)}</td>"


def comparison_table(results: Sequence[Result]) -> str:
    """One table, strategies side by side: per workload (the most affected, the others summed), then
    evictions, nodes, pending pods and cost."""
    found = verdict(results)
    head = "".join(
        f'<th class="best">{escape(str(r.strategy))} (best)</th>'
        if r.strategy in found.best
        else f"<th>{escape(str(r.strategy))}</th>"
        for r in results
    )
    out = [f'<div class="wide"><table class="comparison"><thead><tr><th></th>{head}</tr></thead><tbody>']

    def row(label: str, cells: Sequence[str], cls: str = "detail") -> None:
        out.append(f'<tr class="{cls}"><td>{escape(label)}</td>{"".join(cells)}</tr>')

    shown, others = split(rank_workloads(results), TOP_WORKLOADS)
    prio = {w: x.priority for r in results for w, x in r.workloads.items()}
    for w in sorted(shown, key=lambda n: (-prio[n], shown.index(n))):
        ws = [r.workloads.get(w) for r in results]
        row(
            f"{w} (priority {prio[w]}): time to Ready",
            [_ready_cell(x.time_to_ready_s) if x else "<td>—</td>" for x in ws],
            "workload",
        )
        row("lowest Ready", [f"<td>{num(x.min_ready)}</td>" if x else "<td>—</td>" for x in ws])
        row(
            UNAVAILABLE,
            [f"<td>{num(x.unavailable_replica_seconds)}</td>" if x else "<td>—</td>" for x in ws],
        )
        row(
            "Ready at end / desired",
            [f"<td>{x.ready_at_end}/{x.desired}</td>" if x else "<td>—</td>" for x in ws],
        )
        for how in shown_removals([x.removed for x in ws if x]):
            cells = [f"<td>{num(x.removed.get(how, 0))}</td>" if x else "<td>—</td>" for x in ws]
            row(f"pods {REMOVALS[how]}", cells)
    if others:
        groups: list[list[WorkloadResult]] = [
            [r.workloads[w] for w in others if w in r.workloads] for r in results
        ]
        row(
            f"others ({len(others)} workloads, summed): slowest to Ready",
            [_slowest(ws) for ws in groups],
            "workload",
        )
        row(
            UNAVAILABLE,
            [f"<td>{num(sum(x.unavailable_replica_seconds for x in ws))}</td>" for ws in groups],
        )
        row("pods removed", [f"<td>{num(sum(x.evicted for x in ws))}</td>" for ws in groups])
    row("pods removed (all workloads)", [f"<td>{num(r.evictions)}</td>" for r in results], "workload")
    for g in dict.fromkeys(g for r in results for g in r.node_groups):
        gs = [r.node_groups.get(g) for r in results]
        row(
            f"{g} nodes added / removed (peak)",
            [
                f"<td>{x.nodes_added} / {x.nodes_removed} ({x.peak_nodes})</td>" if x else "<td>—</td>"
                for x in gs
            ],
        )
    row("pods pending at end", [f"<td>{num(len(r.pending_at_end))}</td>" for r in results], "workload")
    window = duration(max(r.duration_s for r in results))
    row(f"cost over the simulated {window}", [f"<td>{money(r.cost)}</td>" for r in results], "workload")
    out.append("</tbody></table></div>")
    return "".join(out)


def _slowest(ws: Sequence[WorkloadResult]) -> str:
    times = [x.time_to_ready_s for x in ws]
    if any(t is None for t in times):
        return '<td class="never">never</td>'
    return f"<td>{duration(max((t for t in times if t is not None), default=0.0))}</td>"


def verdict_block(results: Sequence[Result]) -> str:
    """Who meets the goals best and at what price: the goals first (they explain the table), the
    standings as a table (the best first), then the conclusions."""
    found = verdict(results)
    if not found.best:
        return ""
    out = ['<div class="verdict">', f"<p>{escape(found.header())}</p>"]
    for i, c in enumerate(found.conclusions()):
        out.append(f'<p class="{"best" if i == 0 else "fastest"}">{escape(c)}</p>')
    head = "".join(f"<th>{escape(c)}</th>" for c in found.columns())
    rows = "".join(
        f'<tr class="{"best" if s.strategy in found.best else ""}">'
        + "".join(f"<td>{escape(c)}</td>" for c in cells)
        + "</tr>"
        for s, cells in zip(found.ranked(), found.rows(), strict=True)
    )
    out.append(f'<table class="standings"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>')
    return "".join(out)


def story_table(lines: Sequence[Line]) -> str:
    rows = "".join(
        f'<tr class="{"warning" if x.warning else ""}"><td class="t">{duration(x.t)}</td>'
        f'<td>{escape(x.actor.value)}</td><td class="reason">{escape(x.reason)}</td>'
        f"<td>{escape(x.sentence(most=6))}</td></tr>"
        for x in lines
    )
    return (
        '<table class="story"><thead><tr><th>time</th><th>who</th><th>Event reason</th>'
        f"<th>object: what happened</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def stories(results: Sequence[Result]) -> str:
    """What happened under each strategy, in words; the best strategy's story open."""
    best = set(verdict(results).best)
    out = []
    for r in results:
        lines = story(r)
        is_open = " open" if r.strategy in best else ""
        out.append(
            f"<details{is_open}><summary>What happened under {escape(str(r.strategy))} "
            f"({len(lines)} lines)</summary>{story_table(lines) if lines else '<p>nothing</p>'}</details>"
        )
    return "".join(out)


def section(title: str | None, svgs: Sequence[str], results: Sequence[Result], prefix: str) -> str:
    heading = f"<h2>{escape(title)}</h2>" if title else ""
    figures = "".join(f"<figure>{inline_svg(svg, f'{prefix}{i}-')}</figure>" for i, svg in enumerate(svgs))
    simulated = duration(max(r.duration_s for r in results))
    return (
        f"<section>{heading}{verdict_block(results)}"
        f'<div class="figures">{figures}</div>'
        f"<h3>Side by side ({simulated} simulated)</h3>{comparison_table(results)}"
        f"<h3>What happened</h3>{stories(results)}</section>"
    )


def page(title: str, body: str, lead: str | None = LEAD) -> str:
    """A self-contained page; ``lead`` (the comparison's reading guide by default) opens it."""
    opening = f'<p class="lead">{escape(lead)}</p>\n' if lead else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f"<h1>{escape(title)}</h1>\n{opening}"
        f"{body}\n</body>\n</html>\n"
    )


def save_figure(
    fig: Figure, path: Path, title: str, prefix: str, body: Callable[[str], str] | None = None
) -> Path:
    """A benchmark's picture as a .png, or as an .html page around its inline SVG (``body`` wraps the
    figure's markup; by default the figure alone)."""
    suffix = path.suffix.lower()
    if suffix not in (".html", ".png"):
        raise InputError(str(path), [Problem("", "expected a file name ending in .html or .png")])
    if suffix == ".png":
        fig.savefig(path, format="png")
        return path
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    svg = f"<figure>{inline_svg(buf.getvalue(), prefix)}</figure>"
    path.write_text(page(title, body(svg) if body else svg, lead=None))
    return path
