"""Step series of one run, taken from its samples and thinned for drawing without losing extremes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from makeroom.report.events import Mark, aggregate
from makeroom.sim.recorder import Sample
from makeroom.sim.results import Result

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Buckets of consecutive changes per series when a run has too many changes to draw each one: a column
# of a figure is about 460 pixels wide, so this keeps every peak and dip at screen resolution.
DRAW_BINS = 500


def keep_indices(columns: Sequence[IntArray], n: int, bins: int = DRAW_BINS) -> IntArray:
    """Indices of the samples to draw so that steps-post lines keep their shape.

    Samples that change nothing are dropped (the drawing is then exact). If more than ``4 * bins``
    changes remain, the run is cut into ``bins`` equal runs of changes and, in each, the first, the
    last, and for every column the sample with its lowest and its highest value are kept, so peaks and
    dips stay visible.
    """
    if n <= 2:
        return np.arange(n, dtype=np.int64)
    changed = np.zeros(n, dtype=bool)
    changed[0] = changed[-1] = True
    for col in columns:
        changed[1:] |= col[1:] != col[:-1]
    idx = np.flatnonzero(changed).astype(np.int64)
    if len(idx) <= 4 * bins:
        return idx
    bucket = (np.arange(len(idx), dtype=np.int64) * bins) // len(idx)
    edge = bucket[1:] != bucket[:-1]
    keep = np.zeros(len(idx), dtype=bool)
    keep[0] = keep[-1] = True
    keep[1:] |= edge  # first of each bucket
    keep[:-1] |= edge  # last of each bucket
    for col in columns:
        order = np.lexsort((col[idx], bucket))
        ordered = bucket[order]
        starts = np.ones(len(order), dtype=bool)
        starts[1:] = ordered[1:] != ordered[:-1]
        ends = np.ones(len(order), dtype=bool)
        ends[:-1] = ordered[1:] != ordered[:-1]
        keep[order[starts]] = True
        keep[order[ends]] = True
    return idx[keep]


def _column(samples: Sequence[Sample], attr: str, key: str) -> IntArray:
    return np.fromiter((getattr(s, attr).get(key, 0) for s in samples), dtype=np.int64, count=len(samples))


@dataclass(frozen=True, slots=True)
class RunView:
    """What the picture of one run needs: its step series, event marks and summary data."""

    scenario: str
    strategy: str
    duration_s: float
    groups: list[str]
    workloads: list[str]
    priority: dict[str, int]
    t_s: FloatArray  # sample times
    nodes: dict[str, IntArray]  # billed, including provisioning
    ready_nodes: dict[str, IntArray]
    ready: dict[str, IntArray]
    desired: dict[str, IntArray]
    pending: IntArray
    marks: list[Mark]
    result: Result

    @property
    def has_samples(self) -> bool:
        return len(self.t_s) > 0

    def thin(self, columns: Sequence[IntArray], bins: int = DRAW_BINS) -> tuple[FloatArray, list[IntArray]]:
        """The times and values to draw of some series that share a panel (see keep_indices)."""
        keep = keep_indices(columns, len(self.t_s), bins)
        return self.t_s[keep], [c[keep] for c in columns]

    @staticmethod
    def of(result: Result) -> RunView:
        samples = result.samples
        group_names = dict.fromkeys(result.node_groups)
        wl_names = dict.fromkeys(result.workloads)
        for s in samples:  # groups or workloads that the samples know and the summary does not
            group_names.update(dict.fromkeys(s.nodes))
            wl_names.update(dict.fromkeys(s.desired))
        groups = list(group_names)
        names = list(wl_names)
        priority = {w: result.workloads[w].priority if w in result.workloads else 0 for w in names}
        first = {w: i for i, w in enumerate(names)}
        workloads = sorted(names, key=lambda w: (-priority[w], first[w]))
        duration = result.duration_s

        nodes = {g: _column(samples, "nodes", g) for g in groups}
        ready_nodes = {g: _column(samples, "ready_nodes", g) for g in groups}
        ready = {w: _column(samples, "ready", w) for w in workloads}
        desired = {w: _column(samples, "desired", w) for w in workloads}
        pending = np.fromiter((s.pending for s in samples), dtype=np.int64, count=len(samples))
        t = np.fromiter((s.t for s in samples), dtype=np.float64, count=len(samples))

        return RunView(
            scenario=result.scenario,
            strategy=str(result.strategy),
            duration_s=duration,
            groups=groups,
            workloads=workloads,
            priority=priority,
            t_s=t,
            nodes=nodes,
            ready_nodes=ready_nodes,
            ready=ready,
            desired=desired,
            pending=pending,
            marks=aggregate(result.events, duration, set(workloads), set(groups)),
            result=result,
        )
