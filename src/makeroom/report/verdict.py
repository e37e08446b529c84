"""Who wins a comparison, and at what price.

The goals are those of the design, in order: every pod placed by the end; the workloads whose pods
were moved (relocated, preempted, evicted) lose no capacity; the least money; the highest-priority
workloads Ready soonest. Strategies are ranked on them in that order; the fastest one is named too
when it is not the best, with the price it paid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from makeroom.controller import Strategy
from makeroom.report.units import count, duration, money, money_change, shown
from makeroom.sim.results import Result

GOALS = (
    "every pod placed",
    "no unavailable replica·s in the moved workloads",
    "the lowest cost",
    "the highest-priority workload Ready soonest",
)


@dataclass(frozen=True, slots=True)
class Dip:
    workload: str
    lowest: int
    desired: int


@dataclass(frozen=True, slots=True)
class Standing:
    """One strategy's outcome, measured against the goals."""

    strategy: Strategy
    pending: int
    top_ready_s: float | None
    """The slowest time to Ready among the highest-priority workloads; None when one never was."""
    lost_replica_s: float
    """Unavailable replica-seconds of the workloads that had pods moved."""
    dips: tuple[Dip, ...]
    evictions: int
    nodes_bought: int
    cost: float
    none_cost: float | None
    """What strategy none cost in the same comparison, the baseline of ``against_none``."""
    duration_s: float = 0.0

    def key(self) -> tuple[int, float, float, float]:
        """Lower is better, goal by goal."""
        ready = float("inf") if self.top_ready_s is None else self.top_ready_s
        return (self.pending, round(self.lost_replica_s, 3), round(self.cost, 6), ready)

    def lost(self) -> str:
        """``0 unavailable replica·s``, or ``60 unavailable replica·s (iris-classifier down to 7/10)``."""
        lost = f"{self.lost_replica_s:,.0f} unavailable replica·s"
        worst = ", ".join(f"{d.workload} down to {d.lowest}/{d.desired}" for d in self.dips[:2])
        more = f" and {len(self.dips) - 2} more" if len(self.dips) > 2 else ""
        return f"{lost} ({worst}{more})" if worst else lost

    @property
    def loses(self) -> bool:
        return self.lost_replica_s > 0 or bool(self.dips)

    def ready(self, top_label: str) -> str:
        if self.top_ready_s is None:
            return f"{top_label} never Ready"
        if self.top_ready_s == 0:
            return f"{top_label} Ready throughout"
        return f"{top_label} Ready after {duration(self.top_ready_s)}"

    def against_none(self) -> str:
        """``+$0.06``: the difference of the two figures shown; empty for none itself."""
        if self.none_cost is None or self.strategy is Strategy.NONE:
            return ""
        return money_change(self.cost, self.none_cost)

    def summary(self, top_label: str) -> str:
        """What the strategy achieved, goal by goal, in one line."""
        parts = [self.ready(top_label)]
        if self.pending:
            parts.append(f"{count(self.pending, 'pod')} pending at the end")
        parts.append(self.lost())
        parts.append(f"{count(self.nodes_bought, 'node')} bought")
        price = f"{money(self.cost)} over the simulated {duration(self.duration_s)}"
        if self.against_none():
            price += f" ({self.against_none()} against none)"
        parts.append(price)
        return " · ".join(parts)


@dataclass(frozen=True, slots=True)
class Verdict:
    top: tuple[str, ...]
    """The highest-priority workloads."""
    standings: tuple[Standing, ...]
    best: tuple[Strategy, ...]
    """The strategies that meet the goals best (several when they tie on every goal)."""
    fastest: Strategy | None
    """The strategy that readies the highest-priority workloads soonest, when it is not a best one."""

    def standing(self, strategy: Strategy) -> Standing:
        return next(s for s in self.standings if s.strategy is strategy)

    @property
    def top_label(self) -> str:
        if len(self.top) == 1:
            return self.top[0]
        return f"{len(self.top)} top workloads"

    def ranked(self) -> list[Standing]:
        """The standings, the best first, then goal by goal."""
        return sorted(self.standings, key=lambda s: (s.strategy not in self.best, s.key()))

    def header(self) -> str:
        return (
            f"verdict (goals in order: {'; '.join(self.goals())}); "
            f"Ready after: until {self.top_label} {'was' if len(self.top) == 1 else 'were'} Ready; "
            f"costs over {self.window()}"
        )

    def columns(self) -> tuple[str, ...]:
        """The headers of ``rows``."""
        return (
            "strategy",
            "Ready after",
            "pods pending",
            "unavailable replica·s",
            "nodes bought",
            "cost",
            "against none",
        )

    def window(self) -> str:
        """``the simulated 20m00s``: what every cost covers."""
        return f"the simulated {duration(max((s.duration_s for s in self.standings), default=0.0))}"

    def rows(self) -> list[tuple[str, ...]]:
        """One row per strategy under ``columns`` (the best first): the verdict as a table."""
        out: list[tuple[str, ...]] = []
        for s in self.ranked():
            if s.top_ready_s is None:
                ready = "never"
            else:
                ready = "Ready throughout" if s.top_ready_s == 0 else duration(s.top_ready_s)
            worst = "; ".join(f"{d.workload} down to {d.lowest}/{d.desired}" for d in s.dips[:2])
            lost = f"{s.lost_replica_s:,.0f}" + (f" ({worst})" if worst else "")
            out.append(
                (
                    str(s.strategy),
                    ready,
                    str(s.pending),
                    lost,
                    str(s.nodes_bought),
                    money(s.cost),
                    s.against_none(),
                )
            )
        return out

    def lines(self) -> list[str]:
        """The verdict in words: the goals, one line per strategy (the best first), who wins and at
        what price, and the trade-off of the fastest when it is not the best."""
        if not self.best:
            return []
        width = max(len(str(s.strategy)) for s in self.standings)
        out = [self.header()]
        for s in self.ranked():
            out.append(f"  {s.strategy!s:<{width}}  {s.summary(self.top_label)}")
        return [*out, *self.conclusions()]

    def conclusions(self) -> list[str]:
        """Who wins and at what price, and the trade-off of the fastest when it is not the best."""
        if not self.best:
            return []
        first = self.standing(self.best[0])
        who = " and ".join(str(s) for s in self.best)
        tie = " (a tie on every goal)" if len(self.best) > 1 else ""
        out = [f"best: {who}{tie}: {first.summary(self.top_label)}"]
        if self.fastest is not None:
            fast = self.standing(self.fastest)
            assert fast.top_ready_s is not None
            gain = (
                f"{duration(first.top_ready_s - fast.top_ready_s)} sooner"
                if first.top_ready_s is not None
                else f"after {duration(fast.top_ready_s)}"
            )
            costs = []
            if fast.loses:
                costs.append(fast.lost())
            if shown(fast.cost) > shown(first.cost):
                costs.append(f"{money_change(fast.cost, first.cost)} more than {first.strategy}")
            if fast.pending > first.pending:
                costs.append(f"{count(fast.pending, 'pod')} left pending")
            price = ", at the price of " + " and ".join(costs) if costs else ""
            out.append(f"fastest: {self.fastest} readies {self.top_label} {gain}{price}")
        return out

    def goals(self) -> list[str]:
        return [*GOALS[:3], f"{self.top_label} Ready soonest"]


def _top(results: Sequence[Result]) -> tuple[str, ...]:
    prio: dict[str, int] = {}
    for r in results:
        for name, w in r.workloads.items():
            prio.setdefault(name, w.priority)
    if not prio:
        return ()
    high = max(prio.values())
    return tuple(name for name, p in prio.items() if p == high)


def standing(result: Result, top: Sequence[str], none: Result | None) -> Standing:
    times = [result.workloads[w].time_to_ready_s if w in result.workloads else None for w in top]
    moved = [(name, w) for name, w in result.workloads.items() if w.evicted > 0]
    dips = tuple(
        Dip(name, w.min_ready, w.desired)
        for name, w in moved
        if w.min_ready is not None and w.min_ready < w.desired
    )
    return Standing(
        strategy=result.strategy,
        pending=len(result.pending_at_end),
        top_ready_s=None
        if not times or any(t is None for t in times)
        else max(t for t in times if t is not None),
        lost_replica_s=sum(w.unavailable_replica_seconds for _, w in moved),
        dips=tuple(sorted(dips, key=lambda d: d.lowest / max(d.desired, 1))),
        evictions=result.evictions,
        nodes_bought=sum(g.nodes_added for g in result.node_groups.values()),
        cost=result.cost,
        none_cost=None if none is None else none.cost,
        duration_s=result.duration_s,
    )


def verdict(results: Sequence[Result]) -> Verdict:
    top = _top(results)
    none = next((r for r in results if r.strategy is Strategy.NONE), None)
    standings = tuple(standing(r, top, none) for r in results)
    if not standings:
        return Verdict(top, (), (), None)
    best_key = min(s.key() for s in standings)
    best = tuple(s.strategy for s in standings if s.key() == best_key)
    ready = [s for s in standings if s.top_ready_s is not None]
    fastest = min(ready, key=lambda s: (s.top_ready_s, s.key())) if ready else None
    best_ready = standings[[s.strategy for s in standings].index(best[0])].top_ready_s
    if fastest is not None and (
        fastest.strategy in best or (best_ready is not None and fastest.top_ready_s == best_ready)
    ):
        fastest = None
    return Verdict(top, standings, best, fastest.strategy if fastest else None)
