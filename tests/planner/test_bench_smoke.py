"""`makeroom bench plan --quick` runs and reports every figure (numbers are never asserted)."""

from __future__ import annotations

from tests.conftest import cli_json as run_json


def test_bench_plan_quick_reports_every_figure() -> None:
    data = run_json("bench", "plan", "--quick")
    (row,) = data["sizes"]
    assert "error" not in row, row
    for key in ("build_s", "plan_single_ms", "plan_batches", "baseline_find_preemption_ms", "peak_mib"):
        assert key in row
    assert {"p50", "p99"} <= set(row["plan_single_ms"])
    assert row["outcomes_single"]["relocation"] > 0
