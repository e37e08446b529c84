"""Every command's tables read at 80 and at 120 columns: no line runs past the terminal, and no cell is
cut with an ellipsis, as long as each word fits on a line of its own (issue 25: `compare` on the
Karpenter seeds cut its headers to `none/kar…`, and at 80 columns every cell of a two-autoscaler
comparison to `no…`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.table import Table

from makeroom.cli import common
from makeroom.cli.bench_plan import plan_table
from makeroom.cli.fit import fit
from tests.builders.scenario import example
from tests.conftest import cli

WIDTHS = (80, 120)
ELLIPSIS = "…"


@pytest.fixture(params=WIDTHS, ids=[f"{w}-columns" for w in WIDTHS])
def width(request: pytest.FixtureRequest) -> Iterator[int]:
    """The terminal's width for one test (the console is made once, at import)."""
    before = common.console.width
    common.console.width = request.param
    yield request.param
    common.console.width = before


def assert_fits(text: str, width: int) -> None:
    assert ELLIPSIS not in text, text
    long = [line for line in text.splitlines() if cell_len(line) > width and "│" in line]
    assert not long, "\n".join(long)


COMMANDS = {
    "simulate": ("simulate", "seed-1", "--strategy", "migrate"),
    "simulate karpenter": ("simulate", "karpenter-seed-2", "--strategy", "migrate"),
    "simulate wide": ("simulate", "seed-4", "-o", "wide"),
    "compare": ("compare", "seed-2"),
    "compare karpenter": ("compare", "karpenter-seed-1"),
    "compare two autoscalers": ("compare", "seed-1", "--autoscalers", "cluster-autoscaler,karpenter"),
}


@pytest.mark.parametrize("case", list(COMMANDS))
def test_every_table_of_a_run_fits(case: str, width: int) -> None:
    command, seed, *rest = COMMANDS[case]
    result = cli(command, example(seed), *rest)
    assert result.exit_code in (0, 3), result.output
    assert_fits(result.stdout, width)
    if command == "compare":
        # a newcomer can read who won, the costs and the disruption without any cut cell
        assert "best: " in result.stdout and "cost over the simulated 20m00s" in " ".join(
            result.stdout.split()
        )


def test_demo_fits(width: int, tmp_path: Path) -> None:
    result = cli("demo", "--no-report")
    assert result.exit_code == 0, result.output
    assert_fits(result.stdout, width)


def test_bench_sim_fits(width: int) -> None:
    result = cli("bench", "sim", "--nodes", "10", "--pods", "1000", "--hours", "0.01")
    assert result.exit_code == 0, result.output
    assert_fits(result.stdout, width)


def test_bench_plan_table_fits(width: int) -> None:
    """The table of ``bench plan`` on a result of its shape (running the benchmark takes minutes)."""
    stats = {"p50": 12.345, "p99": 123.456}
    size = {
        "size": {"name": "5,000 nodes, 150,000 pods"},
        "build_s": 2.5,
        "plan_single_ms": stats,
        "waiting": {
            k: {"ms_per_pod_with_10": stats, "all_at_once": {"total_s": 2.75}}
            for k in ("default", "per_pod", "round")
        },
        "baseline_find_preemption_ms": stats,
        "peak_mib": 1234.0,
    }
    mid = {
        k: {"p50_s": 0.05, "max_s": 0.9, "equals_optimum": "58/60"}
        for k in ("default", "exact", "per_pod", "round")
    }
    table = plan_table({"sizes": [size, size], "midsize": {"clusters": 60, **mid}})
    with common.console.capture() as captured:
        for piece in fit(table, width):
            common.console.print(piece)
    assert_fits(captured.get(), width)
    assert captured.get().count("planner") == 2  # both per-pod columns, their headers whole


def test_a_table_too_wide_is_split_and_keeps_its_row_names() -> None:
    table = Table(title="t")
    table.add_column("row")
    for i in range(12):
        table.add_column(f"column number {i}", no_wrap=True)
    table.add_row("first row", *[f"value-{i:04d}" for i in range(12)])
    pieces = fit(table, 80)
    assert len(pieces) > 1
    assert all(p.columns[0].header == "row" for p in pieces)
    assert [c.header for p in pieces for c in p.columns[1:]] == [f"column number {i}" for i in range(12)]
    assert fit(table, 1000) == [table]  # a wide terminal: one table, as it was
