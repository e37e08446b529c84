"""`makeroom bench plan --quick` runs and reports every figure (numbers are never asserted)."""

from __future__ import annotations

from tests.conftest import cli
from tests.conftest import cli_json as run_json


def test_bench_plan_quick_reports_every_figure() -> None:
    data = run_json("bench", "plan", "--quick")
    (row,) = data["sizes"]
    assert "error" not in row, row
    for key in ("build_s", "plan_single_ms", "plan_batches", "baseline_find_preemption_ms", "peak_mib"):
        assert key in row
    assert {"p50", "p99"} <= set(row["plan_single_ms"])
    assert row["outcomes_single"]["relocation"] > 0
    for name in ("default", "per_pod"):  # the joint planner and today's per-pod one beside it
        waiting = row["waiting"][name]
        assert {"p50", "p99"} <= set(waiting["ms_per_pod_with_10"])
        assert waiting["all_at_once"]["pending"] == 20
    mid = data["midsize"]
    assert "error" not in mid, mid
    assert mid["clusters"] == 5
    for name in ("default", "exact", "per_pod"):
        assert {"p50_s", "p99_s", "max_s"} <= set(mid[name])
    assert mid["default"]["equals_optimum"] <= mid["clusters"]


def test_bench_plan_size_runs_only_the_sizes_named_without_the_mid_size_plans() -> None:
    data = run_json("bench", "plan", "--quick", "--size", "100 nodes")
    assert [row["size"]["name"] for row in data["sizes"]] == ["100 nodes, 3,000 pods"]
    assert data["midsize"] is None


def test_bench_plan_size_that_names_no_size_is_refused() -> None:
    result = cli("bench", "plan", "--quick", "--size", "9,999 nodes")
    assert result.exit_code == 2
    assert "no cluster size's name holds '9,999 nodes'" in result.output
