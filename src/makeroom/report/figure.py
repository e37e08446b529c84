"""Timeline figures: one column per run; rows of nodes, replicas per workload, pending pods and events.

Built on ``matplotlib.figure.Figure`` with an Agg canvas attached explicitly: pyplot is never imported,
so no display is needed and no global figure state is touched.
"""

from __future__ import annotations

import textwrap
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure, SubFigure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from makeroom.report.events import Mark, label_of, row_order, style_of
from makeroom.report.impact import (
    TOP_GROUPS,
    TOP_WORKLOADS,
    UNAVAILABLE,
    rank_groups,
    rank_workloads,
    removals_text,
    split,
)
from makeroom.report.series import IntArray, RunView
from makeroom.report.units import count, money
from makeroom.report.units import duration as _duration
from makeroom.report.verdict import verdict
from makeroom.sim.results import Result

# Node groups and workloads take colours from two different families, so a group is never mistaken for
# a workload; each keeps its colour in every panel and every column of a figure.
GROUP_COLORS = ("#4e79a7", "#76b7b2", "#9c755f", "#86bcb6", "#2f4b7c", "#a0cbe8", "#79706e", "#d4a6c8")
WORKLOAD_COLORS = ("#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#edc948", "#ff9da7", "#8cd17d", "#b6992d")
NEUTRAL = "#3b3b3b"
PENDING_COLOR = "#6b6b6b"

# Beyond this many workloads, they share one replicas panel instead of one panel each.
MAX_WORKLOAD_ROWS = 12

# Sizes in inches. The layout is computed from them directly (no layout engine): fast and stable.
COLUMN_W = 4.2
COLUMN_GAP = 0.3
LEFT_W = 1.45  # row labels and tick labels
RIGHT_W = 2.35  # legends
TITLE_H = 0.66
VERDICT_LINE_H = 0.2  # each line of the verdict under the title
VERDICT_PT = 9.5
CHARS_PER_INCH = 12.5  # of DejaVu Sans at VERDICT_PT, with room to spare: where the verdict wraps
SUBTITLE_H = 0.36  # without the scenario's title: the strategy's name only
OTHERS_COLOR = "#b5b5b5"
XLABEL_H = 0.5
ROW_GAP = 0.2
NODES_H = 1.6
WORKLOAD_H = 1.2  # each workload panel, up to 4 of them; smaller when there are more
WORKLOAD_MIN_H = 0.8
SHARED_WORKLOADS_H = 2.0
PENDING_H = 0.85
EVENT_ROW_H = 0.22

# Runs longer than this get a time axis in hours instead of minutes.
HOURS_AFTER_S = 6 * 3600.0
DPI = 110

TIMES = "\u00d7"
MINUS = "\u2212"

RC: dict[str, Any] = {
    # DejaVu Sans ships with matplotlib, so PNGs look the same everywhere; SVG text names the fallbacks.
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Verdana", "Arial", "sans-serif"],
    "font.size": 9.5,
    "axes.titlesize": 10.5,
    "axes.labelsize": 9.5,
    "xtick.labelsize": 8.5,
    "ytick.labelsize": 8.5,
    "legend.fontsize": 8.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": "#888888",
    "axes.linewidth": 0.8,
    "hatch.linewidth": 0.7,
    "svg.hashsalt": "makeroom-report",  # stable ids, so the same input gives the same SVG bytes
    "svg.fonttype": "none",  # text stays text: small, searchable SVG
    "path.simplify": True,
}


@contextmanager
def style() -> Iterator[None]:
    # matplotlib types rc keys as a Literal union; RC's keys are checked by matplotlib at run time.
    with mpl.rc_context(cast(Any, RC)):
        yield


def _stable(names: Sequence[str], colors: Sequence[str]) -> dict[str, str]:
    """A colour per name that depends on the name, not on its company: each name has a preferred
    colour (from a checksum of the name), and only when an earlier name (by priority) holds it does it
    take the next free one. Past the palette's size, names share colours."""
    taken: dict[str, str] = {}
    used: set[int] = set()
    for name in dict.fromkeys(names):
        slot = zlib.crc32(name.encode("utf-8")) % len(colors)
        if len(used) < len(colors):
            while slot in used:
                slot = (slot + 1) % len(colors)
        used.add(slot)
        taken[name] = colors[slot]
    return taken


class Palette:
    """Colours by name: node groups from one family, workloads (highest priority first) from another;
    the same name keeps its colour across runs, scenarios and reports (see ``_stable``). Names told as
    "others" are grey."""

    def __init__(self, groups: Sequence[str], workloads: Sequence[str]) -> None:
        # Groups are few and their colours must differ: given in order of name, so the same groups get
        # the same colours in every report.
        self.colors: dict[str, str] = {
            g: GROUP_COLORS[i % len(GROUP_COLORS)] for i, g in enumerate(sorted(dict.fromkeys(groups)))
        }
        for w, c in _stable(workloads, WORKLOAD_COLORS).items():
            self.colors.setdefault(w, c)

    @staticmethod
    def of(runs: Sequence[RunView]) -> Palette:
        results = [r.result for r in runs]
        groups, _ = split(rank_groups(results), TOP_GROUPS)
        shown, _ = split(rank_workloads(results), TOP_WORKLOADS)
        top = set(shown)
        return Palette(groups, [w for w in _by_priority(runs) if w in top])

    def __getitem__(self, key: str | None) -> str:
        return NEUTRAL if key is None else self.colors.get(key, NEUTRAL)


def _by_priority(runs: Sequence[RunView]) -> list[str]:
    """The workloads of some runs, highest priority first, then in order of appearance."""
    prio: dict[str, int] = {}
    for r in runs:
        for w in r.workloads:
            prio.setdefault(w, r.priority.get(w, 0))
    seen = list(dict.fromkeys(w for r in runs for w in r.workloads))
    order = {w: i for i, w in enumerate(seen)}
    return sorted(seen, key=lambda w: (-prio[w], order[w]))


@dataclass(frozen=True, slots=True)
class Row:
    kind: str  # nodes | workload | workloads | pending | events
    height: float
    workload: str | None = None


@dataclass(frozen=True, slots=True)
class Section:
    """One scenario: its runs side by side, with the rows, lanes and colours they share."""

    runs: list[RunView]
    groups: list[str]  # drawn one by one, the most node-hours first
    workloads: list[str]  # every workload, highest priority first
    kinds: list[str]  # the rows of the events panel
    rows: list[Row]
    palette: Palette
    unit_s: float  # seconds per unit of the time axis: 60 (minutes), or 3600 (hours) for long runs
    other_groups: list[str] = field(default_factory=list)  # stacked as one grey band
    shown_workloads: list[str] = field(default_factory=list)  # named in a shared panel
    other_workloads: list[str] = field(default_factory=list)  # summed as one grey line there
    peers: list[RunView] = field(default_factory=list)  # the runs whose y-axes this one shares
    title: bool = True  # the scenario's name above the block (a page with its own headings: no)
    verdict: list[str] = field(default_factory=list)  # who won, under the title (wrapped lines)

    @staticmethod
    def of(
        runs: Sequence[RunView],
        palette: Palette | None = None,
        peers: Sequence[RunView] | None = None,
        title: bool = True,
    ) -> Section:
        """The section of some runs; pass one palette to several sections to keep their colours alike,
        and ``peers`` (a superset of ``runs``) to give sections drawn apart the same y-axes, rows and
        legends."""
        everyone = list(peers) if peers is not None else list(runs)
        results = [r.result for r in everyone]
        known = set(g for r in everyone for g in r.groups)
        ranked_groups = [g for g in rank_groups(results) if g in known]
        ranked_groups += [
            g for g in dict.fromkeys(g for r in everyone for g in r.groups) if g not in ranked_groups
        ]
        groups, other_groups = split(ranked_groups, TOP_GROUPS)
        # Stacked in one order in every panel, scenario and report (the palette's, by name): the band
        # at the bottom is the same group wherever one looks.
        groups = sorted(groups)
        workloads = _by_priority(everyone)
        ranked = [w for w in rank_workloads(results) if w in set(workloads)]
        ranked += [w for w in workloads if w not in ranked]
        shown, others = split(ranked, TOP_WORKLOADS)
        shown = [w for w in workloads if w in set(shown)]
        kinds = row_order(m.kind for r in everyone for m in r.marks)
        rows = [Row("nodes", NODES_H)]
        if len(workloads) <= MAX_WORKLOAD_ROWS:
            h = max(WORKLOAD_MIN_H, WORKLOAD_H * min(1.0, 4 / max(len(workloads), 1)))
            rows += [Row("workload", h, w) for w in workloads]
        else:
            rows.append(Row("workloads", SHARED_WORKLOADS_H))
        rows.append(Row("pending", PENDING_H))
        if kinds:
            rows.append(Row("events", EVENT_ROW_H * len(kinds) + 0.2))
        longest = max((r.duration_s for r in everyone), default=0.0)
        unit = 3600.0 if longest > HOURS_AFTER_S else 60.0
        palette = palette or Palette(groups, shown)
        width = LEFT_W + COLUMN_W * len(runs) + COLUMN_GAP * (len(runs) - 1) + RIGHT_W
        said = _verdict_lines([r.result for r in runs], width) if title else []
        return Section(
            list(runs),
            groups,
            workloads,
            kinds,
            rows,
            palette,
            unit,
            other_groups,
            shown,
            others,
            everyone,
            title,
            said,
        )

    @property
    def head(self) -> float:
        """The height above the plots: the title and the verdict's lines, or the strategy's name."""
        return (TITLE_H + VERDICT_LINE_H * len(self.verdict)) if self.title else SUBTITLE_H

    @property
    def height(self) -> float:
        return self.head + XLABEL_H + sum(r.height for r in self.rows) + ROW_GAP * (len(self.rows) - 1)

    @property
    def plot_width(self) -> float:
        """Width of the columns and the gaps between them."""
        return COLUMN_W * len(self.runs) + COLUMN_GAP * (len(self.runs) - 1)

    @property
    def width(self) -> float:
        return LEFT_W + self.plot_width + RIGHT_W


def build_figure(sections: Sequence[Section]) -> Figure:
    """A figure with one block per section, stacked vertically."""
    width = max(s.width for s in sections)
    height = sum(s.height for s in sections)
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    if len(sections) == 1:
        _draw_section(fig, sections[0], width)
    else:
        subs = fig.subfigures(len(sections), 1, height_ratios=[s.height for s in sections])
        for i, (sub, section) in enumerate(
            zip(list(np.ravel(np.asarray(subs, dtype=object))), sections, strict=True)
        ):
            if i > 0:  # a rule between scenarios
                sub.add_artist(
                    Line2D([0.005, 0.995], [0.999, 0.999], transform=sub.transSubfigure, color="#bbbbbb")
                )
            _draw_section(sub, section, width)
    return fig


def _draw_section(fig: Figure | SubFigure, section: Section, width: float) -> None:
    runs = section.runs
    ncols = len(runs)
    height = section.height
    rows = section.rows
    axes = fig.subplots(
        len(rows),
        ncols,
        sharex=True,
        sharey="row",
        squeeze=False,
        gridspec_kw={
            "height_ratios": [r.height for r in rows],
            "left": LEFT_W / width,
            "right": (LEFT_W + section.plot_width) / width,
            "top": 1.0 - section.head / height,
            "bottom": XLABEL_H / height,
            "wspace": COLUMN_GAP / COLUMN_W,
            "hspace": ROW_GAP / (sum(r.height for r in rows) / len(rows)),
        },
    )
    scenarios = list(dict.fromkeys(r.scenario for r in runs))
    span = max(r.duration_s for r in section.peers) / section.unit_s
    if section.title:
        fig.suptitle(
            " · ".join(scenarios) + f"   ({_duration(max(r.duration_s for r in runs))} simulated)",
            fontsize=13,
            fontweight="bold",
            x=0.12 / width,
            y=1.0 - 0.1 / height,
            ha="left",
            va="top",
        )
    for i, line in enumerate(section.verdict):
        fig.text(
            0.12 / width,
            1.0 - (0.1 + 0.3 + VERDICT_LINE_H * i) / height,
            line,
            ha="left",
            va="top",
            fontsize=VERDICT_PT,
            fontweight="bold" if line.startswith("best") else "normal",
            color="#1b5e20" if line.startswith("best") else "#333333",
            parse_math=False,  # "$0.29 ... $0.06" is money, not TeX
        )
    for col, run in enumerate(runs):
        column = [axes[i][col] for i in range(len(section.rows))]
        title = run.strategy if len(scenarios) == 1 else f"{run.scenario}: {run.strategy}"
        column[0].set_title(title, loc="left", fontweight="bold", fontsize=12)
        column[0].set_title(_run_summary(run), loc="right", fontsize=8.5, color="#444444")
        for ax, row in zip(column, section.rows, strict=True):
            _frame(ax, row, span)
            if row.kind == "nodes":
                _draw_nodes(ax, run, section)
            elif row.kind == "workload" and row.workload is not None:
                w = row.workload
                _draw_workload(ax, run, w, section.palette[w], section.unit_s, annotate=True)
            elif row.kind == "workloads":
                for w in section.shown_workloads:
                    _draw_workload(ax, run, w, section.palette[w], section.unit_s, annotate=False)
                if section.other_workloads:
                    _draw_others(ax, run, section)
            elif row.kind == "pending":
                _draw_pending(ax, run, section.unit_s)
            elif row.kind == "events":
                _draw_events(ax, run, section)
        _draw_triggers(column, run, section.unit_s)
        column[-1].set_xlabel("time (hours)" if section.unit_s == 3600.0 else "time (minutes)")
    _set_limits(axes, section)
    _label_rows([axes[i][0] for i in range(len(section.rows))], section)
    _legends([axes[i][ncols - 1] for i in range(len(section.rows))], section)


def _frame(ax: Axes, row: Row, span: float) -> None:
    ax.set_xlim(0.0, span if span > 0 else 1.0)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=8, steps=[1, 2, 2.5, 5, 10], integer=span >= 4))
    ax.grid(axis="x", color="#e6e6e6", linewidth=0.7, zorder=0)
    ax.set_axisbelow(True)
    if row.kind != "events":
        ax.yaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
        ax.grid(axis="y", color="#eeeeee", linewidth=0.7, zorder=0)


def _no_samples(ax: Axes) -> None:
    ax.text(
        0.5,
        0.5,
        "no samples recorded",
        transform=ax.transAxes,
        ha="center",
        va="center",
        color="#888888",
        fontsize=8.5,
    )


def _draw_nodes(ax: Axes, run: RunView, section: Section) -> None:
    if not run.has_samples:
        _no_samples(ax)
        return
    zero = np.zeros(len(run.t_s), dtype=np.int64)
    columns: list[IntArray] = []
    for g in section.groups:
        billed = run.nodes.get(g, zero)
        columns += [billed, np.minimum(run.ready_nodes.get(g, zero), billed)]
    if section.other_groups:
        columns.append(sum((run.nodes.get(g, zero) for g in section.other_groups), zero))
    t_s, thin = run.thin(columns)
    t = t_s / section.unit_s
    base = np.zeros(len(t), dtype=np.int64)
    for i, g in enumerate(section.groups):
        color = section.palette[g]
        billed, ready = thin[2 * i], thin[2 * i + 1]
        ax.fill_between(t, base, base + ready, step="post", color=color, alpha=0.9, linewidth=0)
        ax.fill_between(
            t,
            base + ready,
            base + billed,
            step="post",
            facecolor=_tint(color, 0.75),
            edgecolor=color,
            hatch="////",
            linewidth=0,
        )
        base = base + billed
    if section.other_groups:
        rest = thin[-1]
        ax.fill_between(t, base, base + rest, step="post", color=OTHERS_COLOR, alpha=0.9, linewidth=0)
        base = base + rest
    ax.step(t, base, where="post", color=NEUTRAL, linewidth=1.1)


def _draw_workload(ax: Axes, run: RunView, w: str, color: str, unit_s: float, *, annotate: bool) -> None:
    if not run.has_samples:
        _no_samples(ax)
        return
    zero = np.zeros(len(run.t_s), dtype=np.int64)
    t_s, (ready, desired) = run.thin([run.ready.get(w, zero), run.desired.get(w, zero)])
    t = t_s / unit_s
    ax.fill_between(t, ready, np.maximum(ready, desired), step="post", color=color, alpha=0.22, linewidth=0)
    ax.step(t, desired, where="post", color=color, linewidth=1.3, linestyle=(0, (4, 2.5)))
    ax.step(t, ready, where="post", color=color, linewidth=2.1)
    if annotate:
        ax.text(
            0.01,
            0.96,
            w,
            transform=ax.transAxes,
            ha="left",
            va="top",
            fontsize=9,
            fontweight="bold",
            color=_shade(color, 0.75),
        )
        # Above the panel, right-aligned: it can be long, and there it never covers the name or a line.
        ax.set_title(_workload_summary(run, w), loc="right", fontsize=8, pad=2.5, color="#333333")


def _draw_others(ax: Axes, run: RunView, section: Section) -> None:
    """The workloads not named in a shared panel, as one line: their Ready and desired replicas summed."""
    if not run.has_samples:
        return
    zero = np.zeros(len(run.t_s), dtype=np.int64)
    ready = sum((run.ready.get(w, zero) for w in section.other_workloads), zero)
    desired = sum((run.desired.get(w, zero) for w in section.other_workloads), zero)
    t_s, (r, d) = run.thin([ready, desired])
    t = t_s / section.unit_s
    ax.fill_between(t, r, np.maximum(r, d), step="post", color=OTHERS_COLOR, alpha=0.3, linewidth=0)
    ax.step(t, d, where="post", color=OTHERS_COLOR, linewidth=1.1, linestyle=(0, (4, 2.5)))
    ax.step(t, r, where="post", color=OTHERS_COLOR, linewidth=1.6)


def _draw_pending(ax: Axes, run: RunView, unit_s: float) -> None:
    if not run.has_samples:
        _no_samples(ax)
        return
    t_s, (pending,) = run.thin([run.pending])
    t = t_s / unit_s
    ax.fill_between(t, 0, pending, step="post", color=PENDING_COLOR, alpha=0.3, linewidth=0)
    ax.step(t, pending, where="post", color=PENDING_COLOR, linewidth=1.3)


EVENTS_NOTE = (
    "events: one row per kind\n"
    "colour: its node group or workload\n"
    f"{TIMES}n: n at once (scale-up: n nodes)\n"
    "dotted line: a scenario event"
)

# Markers drawn as lines only: they take the colour as edge and have no face.
_LINE_MARKERS = frozenset({"|", "_", "x", "+", "1", "2", "3", "4", "."})


def _draw_events(ax: Axes, run: RunView, section: Section) -> None:
    row_y = {kind: i for i, kind in enumerate(section.kinds)}
    by_kind: dict[str, list[Mark]] = {}
    for m in run.marks:
        if m.kind in row_y:
            by_kind.setdefault(m.kind, []).append(m)
    span = max(run.duration_s, 1.0)
    for kind, marks in by_kind.items():
        s = style_of(kind)
        assert s is not None
        xs = [m.t_s / section.unit_s for m in marks]
        ys = [row_y[kind]] * len(marks)
        colors = [section.palette[m.key] for m in marks]
        if s.marker in _LINE_MARKERS:
            ax.scatter(xs, ys, s=s.size, marker=s.marker, c=colors, linewidths=1.6, zorder=3, clip_on=False)
        elif s.filled:
            ax.scatter(
                xs,
                ys,
                s=s.size,
                marker=s.marker,
                c=colors,
                edgecolors="white" if len(marks) <= 100 else "none",  # rims would grey out a dense row
                linewidths=0.6,
                zorder=3,
                clip_on=False,
            )
        else:
            ax.scatter(
                xs,
                ys,
                s=s.size,
                marker=s.marker,
                facecolors="white",
                edgecolors=colors,
                linewidths=1.4,
                zorder=3,
                clip_on=False,
            )
        if not s.counted or len(marks) > 40:
            continue
        # Label a mark with its count unless a neighbour in its row is too close for the label.
        times = [m.t_s for m in marks]
        for i, m in enumerate(marks):
            near = (i > 0 and times[i] - times[i - 1] < 0.04 * span) or (
                i + 1 < len(marks) and times[i + 1] - times[i] < 0.04 * span
            )
            if m.count > 1 and not near:
                ax.annotate(
                    f"{TIMES}{m.count}",
                    (m.t_s / section.unit_s, row_y[kind]),
                    xytext=(6, 0),
                    textcoords="offset points",
                    fontsize=7.5,
                    color="#333333",
                    va="center",
                )


def _draw_triggers(column: Sequence[Axes], run: RunView, unit_s: float) -> None:
    """Faint vertical lines through every panel at the scenario's own events (the causes)."""
    times = sorted({m.t_s for m in run.marks if (s := style_of(m.kind)) is not None and s.trigger})
    if len(times) > 40:
        return
    for ax in column:
        for t in times:
            ax.axvline(t / unit_s, color="#9a9a9a", linewidth=0.9, linestyle=(0, (1, 2)), zorder=1)


def _set_limits(axes: Any, section: Section) -> None:
    runs = section.peers
    for i, row in enumerate(section.rows):
        ax: Axes = axes[i][0]
        if row.kind == "nodes":
            top = max(
                (
                    int(np.vstack(list(r.nodes.values())).sum(axis=0).max())
                    for r in runs
                    if r.has_samples and r.groups
                ),
                default=1,
            )
            ax.set_ylim(0, max(top, 1) * 1.12 + 0.2)
        elif row.kind in ("workload", "workloads"):
            names = [row.workload] if row.workload is not None else section.shown_workloads
            others = [] if row.workload is not None else section.other_workloads
            summed = max(
                (
                    int(
                        max(
                            np.sum([r.ready[w] for w in others], axis=0).max(),
                            np.sum([r.desired[w] for w in others], axis=0).max(),
                        )
                    )
                    for r in runs
                    if r.has_samples and others and all(w in r.ready for w in others)
                ),
                default=0,
            )
            top = max(
                (
                    int(max(r.ready[w].max(), r.desired[w].max()))
                    for r in runs
                    if r.has_samples
                    for w in names
                    if w in r.ready
                ),
                default=1,
            )
            top = max(top, summed)
            ax.set_ylim(0, max(top, 1) * (1.3 if row.kind == "workload" else 1.12) + 0.2)
        elif row.kind == "pending":
            top = max((int(r.pending.max()) for r in runs if r.has_samples), default=0)
            ax.set_ylim(0, max(top, 1) * 1.15 + 0.1)
        elif row.kind == "events":
            n = len(section.kinds)
            ax.set_ylim(n - 0.5, -0.5)
            ax.set_yticks(range(n), [label_of(k) for k in section.kinds])
            lanes = [s.lane for k in section.kinds if (s := style_of(k)) is not None]
            for axr in axes[i]:
                axr.tick_params(axis="y", length=0)
                axr.spines["left"].set_visible(False)
                for y in range(n):
                    axr.axhline(y, color="#eeeeee", linewidth=0.8, zorder=0)
                    if y > 0 and lanes[y] != lanes[y - 1]:  # a line between the lanes
                        axr.axhline(y - 0.5, color="#c8c8c8", linewidth=0.8, zorder=0)


def _label_rows(first: Sequence[Axes], section: Section) -> None:
    for ax, row in zip(first, section.rows, strict=True):
        if row.kind == "nodes":
            ax.set_ylabel("nodes\n(stacked)")
        elif row.kind in ("workload", "workloads"):
            ax.set_ylabel("replicas")
        elif row.kind == "pending":
            ax.set_ylabel("pending\npods")


def _legends(last: Sequence[Axes], section: Section) -> None:
    kw: dict[str, Any] = {
        "loc": "upper left",
        "bbox_to_anchor": (1.02, 1.0),
        "frameon": False,
        "borderaxespad": 0.0,
        "handlelength": 2.2,
    }
    first_workload = True
    for ax, row in zip(last, section.rows, strict=True):
        if row.kind == "nodes":
            handles: list[Any] = [Patch(facecolor=section.palette[g], label=g) for g in section.groups]
            if section.other_groups:
                handles.append(
                    Patch(facecolor=OTHERS_COLOR, label=f"others ({len(section.other_groups)} groups)")
                )
            handles.append(
                Patch(
                    facecolor="#dddddd",
                    edgecolor="#777777",
                    hatch="////",
                    label="provisioning\n(billed, not Ready)",
                )
            )
            handles.append(Line2D([], [], color=NEUTRAL, linewidth=1.1, label="total billed"))
            ax.legend(handles=handles, title="node group", **kw)
        elif row.kind in ("workload", "workloads") and first_workload:
            first_workload = False
            handles = []
            if row.kind == "workloads":
                handles += [
                    Line2D([], [], color=section.palette[w], linewidth=2.1, label=_short(w))
                    for w in section.shown_workloads
                ]
                if section.other_workloads:
                    n = len(section.other_workloads)
                    handles.append(
                        Line2D([], [], color=OTHERS_COLOR, linewidth=1.6, label=f"others ({n}, summed)")
                    )
            handles += [
                Line2D([], [], color=NEUTRAL, linewidth=2.1, label="Ready"),
                Line2D([], [], color=NEUTRAL, linewidth=1.3, linestyle=(0, (4, 2.5)), label="desired"),
                Patch(facecolor=NEUTRAL, alpha=0.22, label=f"{UNAVAILABLE}\n(the area short of desired)"),
            ]
            ax.legend(handles=handles, **kw)
        elif row.kind == "events":
            ax.text(
                1.03,
                1.0,
                EVENTS_NOTE,
                transform=ax.transAxes,
                ha="left",
                va="top",
                fontsize=8,
                color="#444444",
                linespacing=1.35,
            )


def _short(name: str, most: int = 24) -> str:
    """A legend entry that never runs off the figure."""
    return name if len(name) <= most else name[: most - 1] + "…"


def _tint(color: str, amount: float) -> tuple[float, float, float]:
    r, g, b = mpl.colors.to_rgb(color)
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)


def _shade(color: str, amount: float) -> tuple[float, float, float]:
    r, g, b = mpl.colors.to_rgb(color)
    return (r * amount, g * amount, b * amount)


def _verdict_lines(results: Sequence[Result], width: float) -> list[str]:
    """Who won and at what price (the verdict's conclusions), or one run's outcome, wrapped to the
    figure's width."""
    found = verdict(results)
    if len(results) > 1:
        said = found.conclusions()
    else:
        said = (
            [f"{results[0].label}: {found.standings[0].summary(found.top_label)}"] if found.standings else []
        )
    wrap = max(40, int((width - 0.3) * CHARS_PER_INCH))
    return [part for line in said for part in textwrap.wrap(line, wrap, subsequent_indent="    ")]


def _run_summary(run: RunView) -> str:
    result = run.result
    added = sum(g.nodes_added for g in result.node_groups.values())
    removed = sum(g.nodes_removed for g in result.node_groups.values())
    # How the pods went is told on each workload's panel; here only how many, to keep the line short.
    pods = count(sum(result.removed.values()), "pod") + " removed"
    return " · ".join([pods, f"nodes +{added}/{MINUS}{removed}", money(result.cost)])


def _workload_summary(run: RunView, w: str) -> str:
    wd = run.result.workloads.get(w)
    if wd is None:
        return ""
    parts: list[str] = []
    ttr = wd.time_to_ready_s
    desired = wd.desired
    if ttr is None:
        parts.append("never all Ready")
    elif ttr > 0:
        parts.append(f"all Ready after {_duration(ttr)}")
    low = wd.min_ready
    if low is not None and low < desired:
        parts.append(f"dipped to {low}/{desired}")
    short = wd.unavailable_replica_seconds
    if short > 0:
        parts.append(f"{short:,.0f} {UNAVAILABLE}")
    if wd.evicted:
        parts.append(removals_text(wd.removed))
    return " · ".join(parts) if parts else ("all Ready throughout" if desired else "")
