"""One self-contained HTML page: inline SVG figures and a summary table per run; no scripts, no links."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from typing import Any

from makeroom.sim.results import Result

CSS = """
body { font-family: "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; color: #222; margin: 24px;
       max-width: 1900px; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.lead { color: #555; margin-top: 0; }
figure { margin: 12px 0; }
figure svg { max-width: 100%; height: auto; }
.runs { display: flex; flex-wrap: wrap; gap: 28px; }
.run h3 { font-size: 1.05em; margin: 0.6em 0 0.3em; }
table { border-collapse: collapse; font-size: 0.86em; margin-bottom: 10px; }
caption { text-align: left; font-weight: bold; padding: 2px 0; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 3px 9px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead th { border-bottom: 2px solid #bbb; font-weight: 600; }
td.never { color: #b3261e; font-weight: 600; }
"""

_XML_PROLOGUE = re.compile(r"\A(?:<\?xml[^>]*\?>\s*)?(?:<!DOCTYPE[^>]*>\s*)?", re.DOTALL)
_ID = re.compile(r'(\sid="|url\(#|xlink:href="#|\shref="#)([^"\)]+)')


def inline_svg(svg: str, prefix: str) -> str:
    """The <svg> element of a matplotlib SVG document, without its XML declaration and doctype, and
    with every id (and every reference to one) prefixed, so several figures can share one page."""
    body = _XML_PROLOGUE.sub("", svg, count=1).strip()
    return _ID.sub(lambda m: f"{m.group(1)}{prefix}{m.group(2)}", body)


def num(x: Any) -> str:
    """A number as the tables print it: integers plainly, others with up to 6 significant digits."""
    if x is None:
        return "—"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:g}"
    return escape(str(x))


def money(x: Any) -> str:
    return f"{x:.4f}" if isinstance(x, int | float) and not isinstance(x, bool) else "—"


def summary_tables(result: Result) -> str:
    """The summary of one run: per workload, per node group, and the totals."""
    strategy = escape(str(result.strategy))
    out = [f'<div class="run"><h3>{strategy}</h3>']
    out.append(
        '<table class="workloads"><caption>Workloads</caption><thead><tr><th>workload</th>'
        "<th>priority</th><th>desired</th><th>Ready at end</th><th>time to Ready (s)</th>"
        "<th>min Ready</th><th>unavailable replica·s</th><th>evicted</th></tr></thead><tbody>"
    )
    # Highest priority first, as in the figure.
    for name, w in sorted(result.workloads.items(), key=lambda kv: -kv[1].priority):
        ttr = w.time_to_ready_s
        ttr_cell = '<td class="never">never</td>' if ttr is None else f"<td>{num(ttr)}</td>"
        out.append(
            f"<tr><td>{escape(name)}</td><td>{num(w.priority)}</td><td>{num(w.desired)}</td>"
            f"<td>{num(w.ready_at_end)}</td>{ttr_cell}<td>{num(w.min_ready)}</td>"
            f"<td>{num(w.unavailable_replica_seconds)}</td><td>{num(w.evicted)}</td></tr>"
        )
    out.append("</tbody></table>")
    out.append(
        '<table class="groups"><caption>Node groups</caption><thead><tr><th>group</th>'
        "<th>nodes added</th><th>nodes removed</th><th>peak nodes</th><th>nodes at end</th>"
        "<th>node-hours</th><th>cost</th></tr></thead><tbody>"
    )
    for name, g in result.node_groups.items():
        out.append(
            f"<tr><td>{escape(name)}</td><td>{num(g.nodes_added)}</td>"
            f"<td>{num(g.nodes_removed)}</td><td>{num(g.peak_nodes)}</td>"
            f"<td>{num(g.nodes_at_end)}</td><td>{num(g.node_hours)}</td>"
            f"<td>{money(g.cost)}</td></tr>"
        )
    out.append("</tbody></table>")
    out.append(
        '<table class="totals"><caption>Run</caption><tbody>'
        f"<tr><td>evictions</td><td>{num(result.evictions)}</td></tr>"
        f"<tr><td>cost</td><td>{money(result.cost)}</td></tr>"
        f"<tr><td>pods pending at end</td><td>{num(len(result.pending_at_end))}</td></tr>"
        f"<tr><td>simulated</td><td>{num(result.duration_s)} s</td></tr>"
        "</tbody></table></div>"
    )
    return "".join(out)


def section(title: str, svg: str, results: Sequence[Result], prefix: str, level: int = 2) -> str:
    tables = "".join(summary_tables(r) for r in results)
    return (
        f"<section><h{level}>{escape(title)}</h{level}>"
        f"<figure>{inline_svg(svg, prefix)}</figure>"
        f'<div class="runs">{tables}</div></section>'
    )


def page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f"<h1>{escape(title)}</h1>\n"
        '<p class="lead">Time runs left to right. Nodes are stacked by group (hatched: billed '
        "but not yet Ready); each workload shows Ready replicas (solid) against desired (dashed), the "
        "shaded gap being unavailable replica-seconds; then pending pods and the events that explain "
        "the changes.</p>\n"
        f"{body}\n</body>\n</html>\n"
    )
