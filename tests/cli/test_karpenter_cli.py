"""`makeroom compare --autoscalers` puts the cluster-autoscaler and Karpenter side by side on one
scenario; `simulate --autoscaler` runs a scenario under the other one."""

from __future__ import annotations

from pathlib import Path

from tests.builders.scenario import example
from tests.conftest import cli, cli_json


def test_compare_puts_both_autoscalers_side_by_side() -> None:
    data = cli_json(
        "compare",
        example("seed-3"),
        "--strategies",
        "none,migrate",
        "--autoscalers",
        "cluster-autoscaler,karpenter",
    )
    assert data["autoscalers"] == ["cluster-autoscaler", "karpenter"]
    assert data["strategies"] == ["none", "migrate"]
    assert list(data["results"]) == ["none", "migrate", "none/karpenter", "migrate/karpenter"]
    assert "autoscaler" not in data["results"]["none"]  # spec v1's run, as it always was
    assert data["results"]["none/karpenter"]["autoscaler"] == "karpenter"
    kinds = {e["kind"] for e in data["results"]["none/karpenter"]["events"]}
    assert "scale_up" in kinds


def test_compare_text_gives_a_verdict_per_autoscaler() -> None:
    result = cli(
        "compare",
        example("karpenter-seed-3"),
        "--strategies",
        "none,migrate",
        "--autoscalers",
        "karpenter,cluster-autoscaler",
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    # one table and one verdict per autoscaler, karpenter's first, its columns named by strategy alone
    flat = " ".join(out.split())  # titles wrap at the terminal's width
    first, second = (
        flat.find("side by side under karpenter"),
        flat.find("side by side under cluster-autoscaler"),
    )
    assert 0 <= first < second, out
    assert out.count("best: ") == 2 and "none/karpenter" not in out and "/karpen" not in out


def test_simulate_runs_a_scenario_under_the_other_autoscaler() -> None:
    data = cli_json("simulate", example("seed-3"), "--strategy", "none", "--autoscaler", "karpenter")
    assert data["autoscaler"] == "karpenter"
    back = cli_json(
        "simulate", example("karpenter-seed-3"), "--strategy", "none", "--autoscaler", "cluster-autoscaler"
    )
    assert "autoscaler" not in back


def test_an_unknown_autoscaler_is_refused() -> None:
    result = cli("compare", example("seed-1"), "--autoscalers", "karpenter,fargate")
    assert result.exit_code == 2
    assert (
        "makeroom: --autoscalers: expected one of cluster-autoscaler, karpenter, got 'fargate'"
        in result.stderr
    )


def test_one_picture_is_of_one_autoscaler(tmp_path: Path) -> None:
    result = cli(
        "compare",
        example("seed-1"),
        "--autoscalers",
        "cluster-autoscaler,karpenter",
        "--report",
        tmp_path / "x.png",
    )
    assert result.exit_code == 2
    assert "--report: expected one autoscaler" in result.stderr
    assert not (tmp_path / "x.png").exists()
