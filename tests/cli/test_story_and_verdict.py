"""What a user reads after `simulate` and `compare`: the timeline tells what makeroom and the autoscaler
did under the names of the Kubernetes Events, and `compare` ends with a verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from makeroom.cli.tables import timeline
from makeroom.controller import Reason, Strategy
from makeroom.controller.config import CURES
from makeroom.report.story import story
from makeroom.report.units import duration, money, money_diff, per_hour
from makeroom.report.verdict import verdict
from makeroom.scenario import load_scenario
from makeroom.sim import Result
from makeroom.sim.runs import simulate
from tests.conftest import cli, seed


def run(n: int, strategy: Strategy) -> Result:
    return simulate(load_scenario(seed(n)), strategy)


def timeline_of(output: str) -> list[str]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("what happened"))
    return lines[start + 1 :]


def test_units() -> None:
    assert [duration(x) for x in (0, 45, 112, 300, 3725, 90_000, None)] == [
        "0s",
        "45s",
        "1m52s",
        "5m00s",
        "1h02m",
        "1d01h",
        "never",
    ]
    assert (money(0.2867), money(0.004), per_hour(0.17)) == ("$0.29", "$0.004", "$0.17/h")
    assert (money_diff(0.054), money_diff(-0.117), money_diff(0.0)) == ("+$0.05", "\u2212$0.12", "±$0")


def test_migrate_timeline_tells_every_step_of_the_relocation() -> None:
    result = cli("simulate", seed(1), "--strategy", "migrate")
    assert result.exit_code == 0, result.output
    lines = timeline_of(result.stdout)
    expected = [
        ("1m00s", "scenario", "Scale", "deployment/text-generator: scaled to 1 replica"),
        ("1m00s", "scheduler", "FailedScheduling", "pod/text-generator-0: no node has room"),
        ("1m02s", "makeroom", "Relocating", "making room on gpu-0 by moving 3 pod(s) with migrate"),
        ("1m02s", "makeroom", "Moving", "moving off gpu-0 to make room for text-generator-0"),
        ("1m02s", "makeroom", "ScalingReplicaSet", "surge to 13 replicas"),
        ("1m02s", "scheduler", "Scheduled", "replacement, on cpu-0"),  # where the moved capacity went
        ("1m22s", "cluster", "Ready", "Ready on cpu-0"),
        ("1m22s", "makeroom", "ScalingReplicaSet", "back to 10 replicas"),
        ("1m54s", "makeroom", "RoomMade", "pod/text-generator-0: scheduled on gpu-0 after 52s"),
        ("2m52s", "cluster", "Ready", "pod/text-generator-0: Ready on gpu-0"),
    ]
    for stamp, who, reason, words in expected:
        assert any(line.split()[:3] == [stamp, who, reason] and words in line for line in lines), (
            f"{stamp} {who} {reason} {words!r} not in:\n" + "\n".join(lines)
        )


def test_migrate_never_says_a_replacement_replaces_a_removed_pod() -> None:
    """Under migrate the surge replicas start while the moved pods still run: nothing is removed yet."""
    migrate = timeline_of(cli("simulate", seed(2), "--strategy", "migrate").stdout)
    waits = [line for line in migrate if "FailedScheduling" in line and "replaces" in line]
    assert waits and all("replaces a moved pod, which stays until this one is Ready" in x for x in waits)
    assert not any("removed pod" in line for line in migrate)
    evict = timeline_of(cli("simulate", seed(2), "--strategy", "evict").stdout)
    assert any("FailedScheduling" in x and "it replaces a removed pod" in x for x in evict)


def test_the_autoscaler_says_for_whom_and_why() -> None:
    evict = timeline_of(cli("simulate", seed(4), "--strategy", "evict").stdout)
    (up,) = [line for line in evict if "TriggeredScaleUp" in line]
    assert "adds 1 cpu node for 5 pending pods (5 of them replacing moved pods)" in up
    assert any("Consolidating" in line and "saves $0.36/h" in line for line in evict)
    assert any("ScaleDown" in line and "node/gpu-0: empty" in line for line in evict)
    none = timeline_of(cli("simulate", seed(1), "--strategy", "none").stdout)
    assert any("NotTriggerScaleUp" in line and "no node group may grow" in line for line in none)


@pytest.mark.parametrize(
    ("n", "strategy"), [(1, Strategy.EVICT), (2, Strategy.MIGRATE), (4, Strategy.MIGRATE)]
)
def test_every_event_makeroom_writes_is_told_under_its_reason(n: int, strategy: Strategy) -> None:
    result = run(n, strategy)
    told = {(line.t, line.reason) for line in story(result)}
    written = [(e.t, e.get("reason")) for e in result.events if e.get("reason") in set(Reason)]
    assert written, "the run wrote no Event"
    assert [w for w in written if w not in told] == []


def test_a_long_timeline_is_cut_and_says_how_to_see_it_all() -> None:
    result = run(3, Strategy.NONE)
    lines = timeline(result, limit=5)
    assert len(lines) == 5 and lines[-1].startswith("... and") and "-o json" in lines[-1]
    assert len(timeline(result, limit=None)) == len(story(result))


def test_compare_ends_with_a_verdict() -> None:
    result = cli("compare", seed(1))
    assert result.exit_code == 0, result.output
    out = result.stdout
    flat = " ".join(out.split())  # the verdict's title wraps at the terminal's width
    assert (
        "verdict (goals in order: every pod placed; no unavailable replica·s in the moved workloads" in flat
    )
    assert (
        "best: migrate: text-generator Ready after 1m52s · 0 unavailable replica·s · 0 nodes bought · "
        "$0.23 over the simulated 20m00s"
    ) in out
    assert (
        "fastest: preemption readies text-generator 22s sooner, at the price of 60 unavailable replica·s "
        "(iris-classifier down to 7/10)"
    ) in out
    # the standings as a table, the best first: none never readies it and leaves a pod pending
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["migrate"], ["none"])]
    assert rows[0][:3] == ["migrate", "1m52s", "0"] and rows[-1][:3] == ["none", "never", "1"]


def test_verdict_prices_against_none_and_names_ties() -> None:
    results = [run(4, s) for s in CURES]
    found = verdict(results)
    assert found.best == (Strategy.EVICT, Strategy.MIGRATE)
    assert found.standing(Strategy.MIGRATE).nodes_bought == 1
    assert found.standing(Strategy.MIGRATE).none_cost == pytest.approx(results[0].cost)
    best = next(line for line in found.lines() if line.startswith("best:"))
    assert "evict and migrate (a tie on every goal)" in best and "(\u2212$0.12 against none)" in best


def test_the_verdict_ranks_capacity_before_speed() -> None:
    found = verdict([run(2, s) for s in CURES])
    assert found.best == (Strategy.MIGRATE,)
    assert found.fastest is Strategy.PREEMPTION
    assert (
        found.standing(Strategy.PREEMPTION).lost()
        == "630 unavailable replica·s (iris-classifier down to 12/15)"
    )


def many_workloads(tmp_path: Path, n: int) -> Path:
    workloads = "\n".join(
        f"  - {{name: app-{i:03d}, replicas: 1, priority: {100 + i}, requests: {{cpu: 100m, memory: 128Mi}}}}"
        for i in range(n)
    )
    path = tmp_path / "many.yaml"
    path.write_text(
        "version: 1\nname: many\nduration: 5m\nnode_groups:\n"
        "  - {name: cpu, capacity: {cpu: '64', memory: 256Gi, pods: 500}, min: 1, max: 1, initial: 1,"
        " price_per_hour: 1.0, provision_time: 1m}\n"
        f"workloads:\n{workloads}\n"
    )
    return path


def test_compare_on_many_workloads_summarises_unless_asked(tmp_path: Path) -> None:
    path = many_workloads(tmp_path, 200)
    summary = cli("compare", path, "--strategies", "none,migrate")
    assert summary.exit_code == 0, summary.output
    assert "others (192 workloads)" in summary.stdout
    assert "-o wide shows each" in summary.stdout
    assert len(summary.stdout.splitlines()) < 120
    wide = cli("compare", path, "--strategies", "none,migrate", "-o", "wide")
    assert all(f"app-{i:03d}" in wide.stdout for i in range(200))


def test_json_of_compare_is_unchanged_by_the_verdict() -> None:
    data = json.loads(cli("compare", seed(1), "-o", "json").stdout)
    assert set(data) == {"scenario", "strategies", "results"}
