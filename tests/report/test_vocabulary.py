"""One vocabulary, and numbers that agree (issue 25): "evicted" counts Evictions only, migrate's victims
are "removed after its replacement was Ready", the differences shown are those of the figures shown, and
every picture says who won, its node groups stacked in one order."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

import makeroom.examples
from makeroom.cli.wiring import simulate
from makeroom.controller import Strategy
from makeroom.controller.config import CURES
from makeroom.report import render_comparison, render_run
from makeroom.report.figure import Palette, Section, style
from makeroom.report.impact import rank_groups
from makeroom.report.series import RunView
from makeroom.report.units import money, money_change, money_parts, shown
from makeroom.report.verdict import verdict
from makeroom.scenario import load_scenario
from makeroom.sim import Result
from makeroom.sim.recorder import Removal

EXAMPLES = Path(makeroom.examples.__file__).parent


def run(seed: str, strategy: Strategy) -> Result:
    """A run as the command line makes it (the scenario's controller settings)."""
    return simulate(load_scenario(EXAMPLES / f"{seed}.yaml"), strategy.value)


@pytest.fixture(scope="module")
def seed1() -> dict[Strategy, Result]:
    return {s: run("seed-1-relocate", s) for s in CURES}


def test_each_strategy_removes_pods_its_own_way(seed1: dict[Strategy, Result]) -> None:
    iris = {s: r.workloads["iris-classifier"] for s, r in seed1.items()}
    assert iris[Strategy.PREEMPTION].removed[Removal.PREEMPTED] == 3
    assert iris[Strategy.EVICT].removed[Removal.EVICTED] == 3
    # migrate makes no Eviction: its victims leave by scale-down once their replacements are Ready
    assert iris[Strategy.MIGRATE].removed == {Removal.EVICTED: 0, Removal.PREEMPTED: 0, Removal.REPLACED: 3}
    for r in seed1.values():
        data = r.to_json()
        # spec v1's keys keep their meaning (every pod removed); the new ones split them by how
        assert data["evictions"] == sum(data["removed"].values())
        for w in data["workloads"].values():
            assert w["evicted"] == sum(w["removed"].values())


def test_differences_are_those_of_the_figures_shown() -> None:
    # $0.2857 shows as $0.29 and $0.2333 as $0.23: the difference shown is +$0.06, never +$0.05
    assert (money(0.2857), money(0.2333), money_change(0.2857, 0.2333)) == ("$0.29", "$0.23", "+$0.06")
    assert money_change(0.23, 0.2349) == "±$0"
    for parts in ([0.056667, 0.176667], [0.0049, 0.0049, 0.0049], [1.234, 2.345, 0.011], [0.0, 0.5]):
        total = round(sum(parts), 6)
        figures = money_parts(parts, total)
        assert sum(Decimal(f.lstrip("$")) for f in figures) == shown(total), (parts, figures)
        unit = Decimal("0.01") if total >= 0.01 else Decimal("0.0001")
        assert all(
            abs(Decimal(f.lstrip("$")) - Decimal(repr(p))) < unit for f, p in zip(figures, parts, strict=True)
        )


def test_every_picture_says_who_won(tmp_path: Path, seed1: dict[Strategy, Result]) -> None:
    results = list(seed1.values())
    svg = render_comparison(results, tmp_path / "c.svg").read_text()
    best = verdict(results).conclusions()[0]
    assert best.startswith("best: migrate") and best.split(" · ")[0] in svg
    one = render_run(seed1[Strategy.EVICT], tmp_path / "one.svg").read_text()
    assert "evict: text-generator Ready after" in one
    png = render_comparison(results, tmp_path / "c.png").read_bytes()
    assert png.startswith(b"\x89PNG")


def test_node_groups_are_stacked_in_one_order_everywhere() -> None:
    """Seed 2 bills most node-hours on cpu, seed 3 on gpu: still, the same group is at the bottom."""
    with style():
        views = {
            seed: [RunView.of(run(seed, s)) for s in (Strategy.NONE, Strategy.MIGRATE)]
            for seed in ("seed-2-wait-for-cpu-node", "seed-3-no-needless-gpu-node")
        }
        palette = Palette.of([v for vs in views.values() for v in vs])
        orders = [Section.of(vs, palette).groups for vs in views.values()]
        ranked = [rank_groups([v.result for v in vs]) for vs in views.values()]
    assert ranked[0] != ranked[1]  # the case of the demo picture: node-hours rank them apart
    assert orders[0] == orders[1] == sorted(orders[0])
