"""Which workloads and node groups matter most in some runs: those a summary names one by one, the
rest being told together as "others"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from makeroom.sim.recorder import Removal
from makeroom.sim.results import Result

UNAVAILABLE = "unavailable replica·s"
"""The one name of a workload's shortfall integrated over time (``unavailable_replica_seconds``) in
every table, verdict, picture and page (docs/report.md)."""

REMOVALS = {
    Removal.EVICTED: "evicted",
    Removal.PREEMPTED: "preempted",
    Removal.REPLACED: "removed after its replacement was Ready",
}
"""How pods were removed, as every table and picture names it; ``evicted`` counts Evictions only."""


def shown_removals(counts: Sequence[Mapping[Removal, int]]) -> list[Removal]:
    """The kinds of removal a table gives a row: evictions always; preemptions and replacements only
    when some run had one."""
    return [h for h in Removal if h is Removal.EVICTED or any(c.get(h, 0) for c in counts)]


def removals_text(removed: Mapping[Removal, int]) -> str:
    """``3 evicted``, ``1 evicted · 3 preempted``: the removals that happened, for a picture's line."""
    return " · ".join(f"{n} {REMOVALS[h]}" for h in Removal if (n := removed.get(h, 0)))


TOP_WORKLOADS = 8
"""Workloads named one by one in a legend or a summary table; the others are grouped."""
TOP_GROUPS = 8


def rank_workloads(results: Sequence[Result]) -> list[str]:
    """Every workload, most affected first: the most unavailable replica-seconds in any run, then the
    most pods removed, then the highest priority, then by name (so the order never depends on chance).
    """
    worst: dict[str, tuple[float, int, int]] = {}
    for r in results:
        for name, w in r.workloads.items():
            short, evicted, prio = worst.get(name, (0.0, 0, w.priority))
            worst[name] = (max(short, w.unavailable_replica_seconds), max(evicted, w.evicted), prio)
    return sorted(worst, key=lambda n: (-worst[n][0], -worst[n][1], -worst[n][2], n))


def rank_groups(results: Sequence[Result]) -> list[str]:
    """Every node group, the most node-hours in any run first, then by name."""
    hours: dict[str, float] = {}
    for r in results:
        for name, g in r.node_groups.items():
            hours[name] = max(hours.get(name, 0.0), g.node_hours)
    return sorted(hours, key=lambda n: (-hours[n], n))


def split(ranked: Sequence[str], top: int) -> tuple[list[str], list[str]]:
    """The first ``top`` names and the others; all of them when only one would be left over (a row
    "others (1)" says less than the name)."""
    if len(ranked) <= top + 1:
        return list(ranked), []
    return list(ranked[:top]), list(ranked[top:])
