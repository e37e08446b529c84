"""The picture of ``makeroom bench fgd``: unallocated GPUs against the arrived workload (the paper's
Fig. 9a) and fragmented GPUs (its Fig. 7b), each policy solid without makeroom and dashed with it,
means over the seeds. From the benchmark's JSON alone; an Agg canvas, no pyplot (as figure.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from makeroom.report.fleet import COLORS, DPI
from makeroom.report.html import save_figure

ZOOM = 70  # the unallocated-GPU panel starts at this % arrived: the tail, where the policies part


def figure(data: dict[str, Any]) -> Figure:
    fig = Figure(figsize=(12, 4.8), dpi=DPI)
    FigureCanvasAgg(fig)
    unalloc, frag = fig.subplots(1, 2)
    x = data["arrived_pct"]
    for i, (name, cmp) in enumerate(data["policies"].items()):
        color = COLORS[i % len(COLORS)]
        for variant, style, label in (("without", "-", name), ("with", "--", f"{name} + makeroom")):
            s = cmp[variant]
            unalloc.plot(x, s["curve_unallocated_gpus"], style, color=color, lw=1.5, label=label)
            frag.plot(x, s["curve_fragmented_gpus"], style, color=color, lw=1.5, label=label)
    gpus = data["gpus"]
    for ax, what in ((unalloc, "unallocated GPUs"), (frag, "fragmented GPUs (the paper's measure)")):
        ax.set_xlabel("arrived workload (% of the cluster's GPUs)")
        ax.set_ylabel(what)
        ax.grid(alpha=0.3)
        ax.set_xlim(0, max(x))
    start = min(ZOOM, max(x))
    unalloc.set_xlim(start, max(x))
    tail = [
        v
        for cmp in data["policies"].values()
        for variant in ("without", "with")
        for v, at in zip(cmp[variant]["curve_unallocated_gpus"], x, strict=True)
        if at >= start
    ]
    if tail:
        unalloc.set_ylim(0, max(tail) * 1.05)
    unalloc.set_title(f"unallocated GPUs, from {start}% arrived (mean over seeds)")
    frag.set_title("fragmented GPUs (mean over seeds)")
    unalloc.legend(fontsize=8, loc="lower left")
    fig.suptitle(
        f"{Path(data['source']).name} · {data['nodes']} nodes, {gpus} GPUs · "
        f"seeds {data['seeds'][0]}-{data['seeds'][-1]}"
        + ("" if data.get("scores", "exact") == "exact" else f" · {data['scores']} scores")
        + ("" if data.get("node_order", "trace") == "trace" else f" · ties to a {data['node_order']} order"),
        fontsize=11,
    )
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.12, top=0.86, wspace=0.25)
    return fig


def render(data: dict[str, Any], path: Path) -> Path:
    return save_figure(figure(data), path, "makeroom bench fgd: openb, the FGD paper's protocol", "fgd-")
