"""The pictures of ``makeroom bench fleet``: the GPU-pod wait CDF per strategy, and cost against the
p99 wait (the frontier: lower-left is better), each point the mean over the seeds with its 95%
confidence interval. From the benchmark's JSON alone; an Agg canvas, no pyplot (as figure.py)."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from makeroom.report.html import save_figure
from makeroom.report.units import duration, money

COLORS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
          "#bab0ac", "#2f4b7c", "#8cd17d")  # fmt: skip
DPI = 110


def figure(data: dict[str, Any]) -> Figure:
    fig = Figure(figsize=(12, 4.8), dpi=DPI)
    FigureCanvasAgg(fig)
    cdf, frontier = fig.subplots(1, 2)
    names = list(data["contenders"])
    quantiles = np.linspace(0, 1, 101)
    for i, name in enumerate(names):
        color = COLORS[i % len(COLORS)]
        curves = [r["gpu_wait_cdf"] for r in data["runs"][name] if r["gpu_wait_cdf"]]
        if curves:
            mean = np.mean(np.asarray(curves), axis=0)  # quantiles averaged over the seeds
            cdf.plot(np.maximum(mean, 0.5), quantiles, color=color, label=name, lw=1.6)
        summary = data["contenders"][name]
        cost, p99 = summary["cost"], summary["gpu_wait_p99_s"]
        if cost["mean"] is None or p99["mean"] is None:
            continue
        frontier.errorbar(
            p99["mean"], cost["mean"], xerr=p99["ci95"] or 0, yerr=cost["ci95"] or 0,
            fmt="o", color=color, capsize=3, label=name,
        )  # fmt: skip
    cdf.set_xscale("log")
    cdf.set_xlabel("GPU-pod wait, creation to binding (s; 0 drawn at 0.5 s)")
    cdf.set_ylabel("share of GPU pods placed")
    cdf.set_title("GPU-pod wait CDF (mean over seeds)")
    cdf.grid(alpha=0.3)
    cdf.legend(fontsize=8, loc="lower right")
    frontier.set_xlabel("p99 GPU-pod wait (s)")
    frontier.set_ylabel("cost ($)")
    frontier.set_title("cost against p99 wait (95% CI over seeds)")
    frontier.grid(alpha=0.3)
    frontier.legend(fontsize=8)
    fig.suptitle(f"{data['scenario']} · {len(data['seeds'])} seeds", fontsize=11)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.12, top=0.86, wspace=0.25)
    return fig


def _fmt(value: float, fmt: str) -> str:
    if fmt == "s":
        return duration(value)
    if fmt == "$":
        return money(value)
    if fmt == "%":
        return f"{value:.1%}"
    return f"{value:,.0f}"


def _cell(stat: dict[str, Any], fmt: str) -> str:
    mean, ci = stat["mean"], stat["ci95"]
    if mean is None:
        return "—"
    return _fmt(mean, fmt) + ("" if ci is None else f" ± {_fmt(ci, fmt)}")


COLUMNS = (
    ("p50 wait", "gpu_wait_p50_s", "s"),
    ("p90 wait", "gpu_wait_p90_s", "s"),
    ("p99 wait", "gpu_wait_p99_s", "s"),
    ("wait > 60 s", "gpu_wait_over_60s_share", "%"),
    ("never placed", "gpu_never_placed_share", "%"),
    ("GPU use", "gpu_utilisation", "%"),
    ("cost", "cost", "$"),
    ("node-hours", "node_hours", "n"),
    ("scale-ups", "scale_ups", "n"),
    ("needless nodes", "needless_nodes", "n"),
    ("evictions", "evictions", "n"),
    ("moved services' unavailable replica·s", "moved_unavailable_replica_s", "n"),
)


def table_html(data: dict[str, Any]) -> str:
    head = "".join(f"<th>{escape(label)}</th>" for label, _, _ in COLUMNS)
    rows = []
    for name, summary in data["contenders"].items():
        cells = "".join(f"<td>{escape(_cell(summary[key], fmt))}</td>" for _, key, fmt in COLUMNS)
        rows.append(f"<tr><td>{escape(name)}</td>{cells}</tr>")
    table = f"<table><thead><tr><th>strategy</th>{head}</tr></thead>{''.join(rows)}</table>"
    return f'<div class="wide">{table}</div>'


def render(data: dict[str, Any], path: Path) -> Path:
    lead = (
        f"<p>Seeds {', '.join(map(str, data['seeds']))}; every strategy replays the same demand "
        f"(same demand: {data['same_demand']}). Means over the seeds ± the half-width of the 95% "
        "confidence interval.</p>"
    )
    return save_figure(
        figure(data),
        path,
        f"makeroom bench fleet: {data['scenario']}",
        "fleet-",
        lambda svg: f"{lead}{svg}{table_html(data)}",
    )
