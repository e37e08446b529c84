"""makeroom bench fleet on a synthetic trace in the shape of alibaba-dlrm-v2025.csv: the invariants of
every run (each pod placed or counted as never placed, dollars = node-hours x prices, one demand for
every strategy), the strategies' own rules, and the command's manners."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from makeroom.bench.fleet import BASE, Contender, Fleet, run_one, with_balloons
from makeroom.bench.fleet_demand import CAP_RESOURCE, dlrm_demand
from makeroom.cli.wiring import bundled_scenarios
from makeroom.controller import Controller, Strategy
from makeroom.controller.steps import TickReport
from makeroom.model import AutoscalerKind
from makeroom.planner import consolidate as consolidate_module
from makeroom.scenario import load_scenario
from makeroom.scenario.load import parse_scenario
from makeroom.sim.autoscaler import Autoscaler
from makeroom.sim.clock import Phase
from makeroom.sim.runs import QUIET_TICK, build, work_under_way
from makeroom.sim.simulation import Simulation
from tests.conftest import cli
from tests.trace.test_dlrm import HEADER


def row(n: int, role: str, app: str, created: str = "", deleted: str = "", cap: int = -1) -> str:
    cpu, mem, gpu = ("64", "320.0", "0") if role == "CN" else ("8", "40.0", "1")
    return (
        f"instance_{n},{role},{app},{cpu},{cpu},{gpu},{gpu},1,1,{mem},{mem},100.0,100.0,{cap},"
        f"{created},{created},{deleted}"
    )


# Two hours: app_0's GPU replicas grow from 2 to 8 at 20 minutes (at most 4 on a node); app_1's CPU
# replicas grow from 3 to 5 at 5 minutes, before it, so that some may take a GPU node's free cores.
ROWS = [
    *(row(i, "HN", "app_0", deleted="3000", cap=4) for i in range(2)),
    *(row(2 + i, "HN", "app_0", created="1200", deleted="3000", cap=4) for i in range(6)),
    *(row(10 + i, "CN", "app_1", deleted="3300") for i in range(3)),
    *(row(13 + i, "CN", "app_1", created="300", deleted="3300") for i in range(2)),
    row(20, "CN", "app_2", deleted="7200"),
]


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text("\n".join([HEADER, *ROWS]) + "\n")
    return path


def test_every_run_keeps_the_invariants(trace: Path) -> None:
    demand = dlrm_demand(trace, 1.0)
    data = Fleet(demand, [1, 2], balloon_nodes=[1]).run_all(BASE)  # every strategy, makeroom's too
    assert set(data["contenders"]) == {c.name for c in BASE} | {"balloon-1"}
    assert data["same_demand"]
    for runs in data["runs"].values():
        assert len(runs) == 2
        for run in runs:
            assert run["pods_created"] > 0
            placed_or_not = run["pods_bound"] + run["pods_removed_unbound"] + run["pods_pending_at_end"]
            assert placed_or_not == run["pods_created"]
            for group, g in run["groups"].items():
                assert g["cost"] == pytest.approx(g["node_hours"] * run["prices"][group], rel=1e-6, abs=1e-6)
            assert run["cost"] == pytest.approx(sum(g["cost"] for g in run["groups"].values()), abs=0.01)
    summary = data["contenders"]["none"]["gpu_wait_p99_s"]
    assert summary["n"] == 2


def test_a_balloon_is_no_part_of_the_demand(trace: Path) -> None:
    demand = dlrm_demand(trace, 1.0)
    plain = parse_scenario(with_balloons(demand, 0), "t")
    padded = parse_scenario(with_balloons(demand, 2), "t")
    balloon = Contender("balloon-2", Strategy.PREEMPTION, balloon_nodes=2)
    none = run_one(plain, demand, BASE[0], 1, None)
    run = run_one(padded, demand, balloon, 1, None)
    assert run["demand"] == none["demand"]
    # the balloons' GPUs are paid for but not counted as used
    assert run["gpu_utilisation"] < none["gpu_utilisation"]
    gpu = next(g for g in padded.spec.node_groups if g.name == "gpu")
    assert gpu.initial == next(g for g in plain.spec.node_groups if g.name == "gpu").initial + 2
    assert run["cost"] > none["cost"]


def test_sleeping_through_idle_scans_changes_nothing(trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    demand = dlrm_demand(trace, 1.0)
    scenario = parse_scenario(with_balloons(demand, 0), "t")
    slept = run_one(scenario, demand, BASE[1], 3, None)
    monkeypatch.setattr(Autoscaler, "sleep_when_idle", lambda self: None)
    awake = run_one(scenario, demand, BASE[1], 3, None)
    assert awake["events"] > slept["events"]
    for key in ("wall_s", "events", "events_per_s"):
        del slept[key], awake[key]
    assert slept == awake


def test_max_instance_per_node_is_a_per_node_count(trace: Path) -> None:
    demand = dlrm_demand(trace, 1.0)
    hn = next(w for w in demand.scenario["workloads"] if w["name"] == "app-0-hn")
    assert hn["requests"][CAP_RESOURCE + "app-0-hn"] == "1"
    for g in demand.scenario["node_groups"]:
        assert g["capacity"][CAP_RESOURCE + "app-0-hn"] == "4"
    cn = next(w for w in demand.scenario["workloads"] if w["name"] == "app-1-cn")
    assert not any(r.startswith(CAP_RESOURCE) for r in cn["requests"])  # no cap: nothing added
    scenario = parse_scenario(demand.scenario, "t")
    sim = build(scenario, Strategy.NONE, 1)
    sim.run(until=2500.0)  # all 8 GPU replicas wanted, before they go at 3000
    per_node: dict[str, int] = {}
    for pod in sim.world.state.pods.values():
        if pod.workload == "app-0-hn" and pod.node is not None:
            per_node[pod.node] = per_node.get(pod.node, 0) + 1
    assert sum(per_node.values()) == 8
    assert max(per_node.values()) <= 4


def test_runs_on_two_processes_give_what_one_process_gives(trace: Path) -> None:
    """Each seed of each strategy runs in a forked worker; the balloon is sized from their results."""
    demand = dlrm_demand(trace, 1.0)
    chosen = [c for c in BASE if c.name in ("none", "preemption", "evict")]
    timing = {"wall_s", "events_per_s"}

    def outcome(jobs: int) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
        data = Fleet(demand, [1, 2, 3], jobs=jobs).run_all(chosen)
        assert data["jobs"] == jobs
        runs = {
            name: [{k: v for k, v in r.items() if k not in timing} for r in rs]
            for name, rs in data["runs"].items()
        }
        return data["balloon_sizing"], runs

    sizing, runs = outcome(1)
    assert "balloon-1" in runs  # sized after evict and preemption, in the pool too
    assert [r["seed"] for r in runs["evict"]] == [1, 2, 3]
    assert outcome(2) == (sizing, runs)


def test_the_command_prints_json_and_refuses_bad_options(trace: Path, tmp_path: Path) -> None:
    report = tmp_path / "fleet.html"
    args = ("bench", "fleet", "dlrm", trace, "--scale", "1", "--seeds", "2", "--strategies", "none")
    result = cli(*args, "--balloons", "1", "--first-seed", "3", "-o", "json", "--report", report)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["seeds"] == [3, 4]
    assert set(data["contenders"]) == {"none", "balloon-1"}
    assert "<svg" in report.read_text()
    for bad in (("--strategies", "nope"), ("--balloons", "x"), ("--scale", "0"), ("--jobs", "0")):
        refused = cli(*args[:-2], *bad)
        assert refused.exit_code == 2, refused.output
        assert "Traceback" not in refused.output
    assert cli("bench", "fleet", "alibaba", trace).exit_code == 2


def test_the_table_says_where_the_picture_and_the_json_went_and_the_data_does_not(
    trace: Path, tmp_path: Path
) -> None:
    report, written = tmp_path / "fleet.html", tmp_path / "fleet.json"
    args = ("bench", "fleet", "dlrm", trace, "--scale", "1", "--seeds", "1", "--strategies", "none")
    shown = cli(*args, "--report", report, "--write", written)
    assert shown.exit_code == 0, shown.output
    said = "".join(shown.stdout.split())  # a long path breaks anywhere at the terminal's width
    assert f"report:{report}" in said and f"JSON:{written}" in said
    data = cli(*args, "--report", report, "-o", "json")
    assert data.exit_code == 0, data.output
    assert "report:" not in data.stdout
    assert json.loads(data.stdout)["seeds"] == [1]


@pytest.mark.parametrize("strategy", [Strategy.EVICT, Strategy.MIGRATE])
def test_quiet_ticks_change_nothing_while_pods_wait_or_makeroom_acts(strategy: Strategy) -> None:
    """The seed scenarios are busy from start to end: with ``quiet`` every tick is still taken."""
    for path in bundled_scenarios():
        scenario = load_scenario(path)
        if scenario.autoscaler is not AutoscalerKind.CLUSTER_AUTOSCALER:
            continue
        quiet = build(scenario, strategy, 1, quiet=True).run().to_json()
        every = build(scenario, strategy, 1).run().to_json()
        assert quiet == every, path.name


class EveryInstant:
    """The oracle of ``QuietTicks``: the same rule checked on every instant of the grid."""

    def __init__(self, sim: Simulation, controller: Controller, interval: float) -> None:
        self.world, self.controller = sim.world, controller
        self.last_at, self.last_generation = -QUIET_TICK, -1
        sim.every(interval, Phase.CONTROLLER, self.tick)

    def tick(self) -> None:
        world = self.world
        changed = world.state.generation != self.last_generation
        if work_under_way(world) or changed or world.now - self.last_at >= QUIET_TICK:
            self.controller.tick()
            self.last_at, self.last_generation = world.now, world.state.generation


TICK = Controller.tick


def ticks_and_result(
    trace: Path, strategy: Strategy, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[tuple[float, list[str], list[str]]], dict[str, Any]]:
    """Each controller tick's instant and what it started, and the run's result (its cost aside)."""
    demand = dlrm_demand(trace, 1.0)
    ticks: list[tuple[float, list[str], list[str]]] = []

    def recorded(self: Controller) -> TickReport:
        report = TICK(self)
        ticks.append((self.steps.clock.now(), report.started, report.consolidating))
        return report

    monkeypatch.setattr(Controller, "tick", recorded)
    contender = next(c for c in BASE if c.strategy is strategy)
    run = run_one(parse_scenario(with_balloons(demand, 0), "t"), demand, contender, 1, None)
    for key in ("wall_s", "events", "events_per_s"):
        del run[key]
    return ticks, run


@pytest.mark.parametrize("strategy", [Strategy.EVICT, Strategy.MIGRATE])
def test_the_sleeping_controller_ticks_when_a_check_on_every_instant_would(
    trace: Path, strategy: Strategy, monkeypatch: pytest.MonkeyPatch
) -> None:
    asleep = ticks_and_result(trace, strategy, monkeypatch)
    monkeypatch.setattr("makeroom.sim.runs.QuietTicks", EveryInstant)
    every = ticks_and_result(trace, strategy, monkeypatch)
    assert asleep == every
    instants = [t for t, _, _ in every[0]]
    assert any(b - a == 2.0 for a, b in itertools.pairwise(instants))  # busy stretches, every interval
    assert any(b - a >= QUIET_TICK for a, b in itertools.pairwise(instants))  # and quiet ones
    assert any(consolidating for _, _, consolidating in every[0])  # makeroom acted in the window


def test_a_headroom_run_sleeps_while_its_room_is_kept(trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A headroom target's ``KeptRoom`` record lives as long as the target: it reports, it is no work
    under way, so the controller still sleeps through quiet stretches (were it counted, a month's
    replay would tick every 2 s: 1.3 million ticks)."""
    asleep = ticks_and_result(trace, Strategy.HEADROOM, monkeypatch)
    monkeypatch.setattr("makeroom.sim.runs.QuietTicks", EveryInstant)
    every = ticks_and_result(trace, Strategy.HEADROOM, monkeypatch)
    assert asleep == every
    instants = [t for t, _, _ in every[0]]
    assert any(b - a >= QUIET_TICK for a, b in itertools.pairwise(instants))
    assert len(instants) < 7200 / 2.0 / 2  # most of the two hours asleep


@pytest.mark.parametrize("strategy", [Strategy.EVICT, Strategy.MIGRATE])
def test_keeping_fruitless_consolidation_searches_changes_nothing(
    trace: Path, strategy: Strategy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller keeps a fruitless search's answer while its key holds, and the search rules out a
    node whose pod has nowhere cheaper to go before placing the others: without either, every round
    searches in full, and every decision is the same."""
    searches = {"count": 0}
    search = consolidate_module.consolidate

    def counted(*args: Any) -> Any:
        searches["count"] += 1
        return search(*args)

    monkeypatch.setattr("makeroom.controller.consolidator.consolidate", counted)
    kept = ticks_and_result(trace, strategy, monkeypatch)
    kept_searches = searches["count"]
    searches["count"] = 0
    monkeypatch.setattr("makeroom.controller.consolidator.answer_key", lambda *_: object())
    monkeypatch.setattr(consolidate_module, "_nowhere", lambda *_: False)
    full = ticks_and_result(trace, strategy, monkeypatch)
    assert kept == full
    assert searches["count"] > kept_searches  # the key did keep some


def test_results_split_by_seed_merge_into_what_one_run_gives(trace: Path) -> None:
    from makeroom.bench.fleet import merge

    demand = dlrm_demand(trace, 1.0)
    chosen = [c for c in BASE if c.name in ("none", "evict")]
    timing = {"wall_s", "events_per_s"}
    whole = Fleet(demand, [1, 2, 3]).run_all(chosen)
    merged = merge([Fleet(demand, [3]).run_all(chosen), Fleet(demand, [1, 2]).run_all(chosen)])
    assert merged["seeds"] == [1, 2, 3] and merged["merged_from"] == 2
    untimed = [
        {
            name: [{k: v for k, v in r.items() if k not in timing} for r in rs]
            for name, rs in d["runs"].items()
        }
        for d in (whole, merged)
    ]
    assert untimed[0] == untimed[1]  # the same runs, in seed order
    for name, summary in whole["contenders"].items():
        for key in ("gpu_wait_p99_s", "cost", "evictions", "needless_nodes"):
            assert merged["contenders"][name][key] == summary[key], (name, key)
    again = Fleet(demand, [3]).run_all(chosen[1:])  # the same run twice: kept once
    assert merge([merged, again])["runs"]["evict"] == merged["runs"]["evict"]
    again["runs"]["evict"][0]["evictions"] += 1
    with pytest.raises(ValueError, match="evict seed 3 is in two results with other outcomes"):
        merge([merged, again])
    with pytest.raises(ValueError, match="results differ in scenario"):  # another --scale
        merge([merged, Fleet(dlrm_demand(trace, 0.5), [4]).run_all(chosen)])
    forged = Fleet(demand, [4]).run_all(chosen)
    forged["runs"]["none"][0]["demand"] = "another trace file under the same name"
    with pytest.raises(ValueError, match="different demands"):
        merge([merged, forged])


def test_the_merge_command_writes_one_result_and_refuses_what_does_not_fit(
    trace: Path, tmp_path: Path
) -> None:
    parts = []
    for first in ("1", "2"):
        part = tmp_path / f"part-{first}.json"
        args = ("bench", "fleet", "dlrm", trace, "--scale", "1", "--seeds", "1", "--first-seed", first)
        assert cli(*args, "--strategies", "none", "--write", part, "-o", "json").exit_code == 0
        parts.append(part)
    report = tmp_path / "merged.html"
    out = tmp_path / "merged.json"
    done = cli("bench", "fleet-merge", *parts, "--write", out, "--report", report)
    assert done.exit_code == 0, done.output
    assert json.loads(out.read_text())["seeds"] == [1, 2]
    assert "<svg" in report.read_text()
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    forged = tmp_path / "forged.json"
    data = json.loads(parts[0].read_text())
    data["runs"]["none"][0]["cost"] *= 2
    forged.write_text(json.dumps(data))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"benchmark": "sim"}))
    for bad, says in (
        ((parts[0], forged), "none seed 1 is in two results with other outcomes"),
        ((parts[0], garbage), "garbage.json: expected the JSON"),
        ((parts[0], other), "other.json: /benchmark: expected a result of makeroom bench fleet"),
        ((parts[0], tmp_path / "missing.json"), "missing.json: cannot be read"),
    ):
        refused = cli("bench", "fleet-merge", *bad, "--write", tmp_path / "never.json")
        assert refused.exit_code == 2, refused.output
        assert says in refused.output and "Traceback" not in refused.output
        assert not (tmp_path / "never.json").exists()


def _seeds_of(path: Path) -> dict[str, list[int]]:
    return {name: [r["seed"] for r in rs] for name, rs in json.loads(path.read_text())["runs"].items()}


def test_a_stopped_command_keeps_its_finished_runs_and_resume_replays_only_the_others(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--write holds each run as it ends: Ctrl-C after three runs leaves them (exit 130, saying how to
    go on), and --resume replays only the others, to the result one uninterrupted command gives."""
    from makeroom.bench import fleet as fleet_module

    args = (
        "bench",
        "fleet",
        "dlrm",
        trace,
        "--scale",
        "1",
        "--seeds",
        "2",
        "--jobs",
        "1",
        "--strategies",
        "none,evict",
    )
    whole = tmp_path / "whole.json"
    assert cli(*args, "--write", whole, "-o", "json").exit_code == 0
    assert json.loads(whole.read_text())["complete"] is True

    real_run = fleet_module.run_one
    replayed: list[tuple[str, int]] = []

    def stops_after_three(*a: Any, **kw: Any) -> dict[str, Any]:
        if len(replayed) == 3:
            raise KeyboardInterrupt
        run = real_run(*a, **kw)
        replayed.append((run["contender"], run["seed"]))
        return run

    monkeypatch.setattr(fleet_module, "run_one", stops_after_three)
    out = tmp_path / "out.json"
    stopped = cli(*args, "--write", out)
    assert stopped.exit_code == 130, stopped.output
    assert f"stopped after 3 finished runs; they are in {out}" in stopped.stderr
    partial = json.loads(out.read_text())
    assert partial["complete"] is False and _seeds_of(out) == {"none": [1, 2], "evict": [1]}

    replayed.clear()
    resumed = cli(*args, "--write", out, "--resume", "-o", "json")
    assert resumed.exit_code == 0, resumed.output
    assert replayed == [("evict", 2)]  # the one run not kept
    untimed = [
        {name: [_untimed(r) for r in rs] for name, rs in json.loads(p.read_text())["runs"].items()}
        for p in (whole, out)
    ]
    assert untimed[0] == untimed[1]
    assert json.loads(out.read_text())["complete"] is True


def _untimed(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k not in ("wall_s", "events_per_s")}


def test_resume_refuses_a_file_it_would_lose_runs_of_and_output_that_cannot_be_written(
    trace: Path, tmp_path: Path
) -> None:
    base = ("bench", "fleet", "dlrm", trace, "--seeds", "1", "--jobs", "1", "--strategies", "none")
    out = tmp_path / "out.json"
    assert cli(*base, "--scale", "1", "--write", out, "-o", "json").exit_code == 0
    before = out.read_text()
    for extra, says in (
        (("--scale", "0.5"), f"{out}: /scenario: expected"),  # another demand
        (("--scale", "1", "--first-seed", "2"), f"{out}: /runs/none/0: none seed 1 is not a run of this"),
    ):
        refused = cli(*base, *extra, "--write", out, "--resume")
        assert refused.exit_code == 2, refused.output
        assert says in refused.stderr and "Traceback" not in refused.output
        assert out.read_text() == before  # nothing lost
    assert cli(*base, "--resume").exit_code == 2
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{")
    refused = cli(*base, "--write", garbage, "--resume")
    assert refused.exit_code == 2 and "garbage.json: expected the JSON" in refused.stderr
    for target, says in (
        (tmp_path / "missing" / "x.json", "expected an existing directory"),
        (tmp_path, "expected a file name, found a directory"),
    ):
        refused = cli(*base, "--write", target)
        assert refused.exit_code == 2, refused.output
        assert refused.stderr.startswith(f"makeroom: {target}: ") and says in refused.stderr
    refused = cli(*base, "--report", tmp_path / "fleet.svg")
    assert refused.exit_code == 2 and "expected a file name ending in .png or .html" in refused.stderr


def test_resume_keeps_the_balloons_sized_by_the_same_command(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from makeroom.bench import fleet as fleet_module

    args = ("bench", "fleet", "dlrm", trace, "--scale", "1", "--seeds", "1", "--jobs", "1", "--strategies")
    out = tmp_path / "out.json"
    assert cli(*args, "preemption,evict", "--write", out, "-o", "json").exit_code == 0
    sized = _seeds_of(out)
    assert any(name.startswith("balloon-") for name in sized), sized
    replayed: list[str] = []
    real_run = fleet_module.run_one

    def counted(*a: Any, **kw: Any) -> dict[str, Any]:
        replayed.append(a[2].name)
        return real_run(*a, **kw)

    monkeypatch.setattr(fleet_module, "run_one", counted)
    assert cli(*args, "preemption,evict", "--write", out, "--resume", "-o", "json").exit_code == 0
    assert replayed == [] and _seeds_of(out) == sized  # every run kept, the balloons' too
    refused = cli(*args, "preemption", "--write", out, "--resume")  # makes neither evict nor balloons
    assert refused.exit_code == 2 and "is not a run of this command" in refused.stderr


def test_a_balloon_kept_in_part_is_finished_and_never_lost_by_a_second_stop(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command stopped during its balloons (balloon-1's seed 2 under way, balloon-2 done): what it
    kept stays in the file through another stop, and --resume replays only the missing seed."""
    from makeroom.bench import fleet as fleet_module

    args: tuple[str | Path, ...] = ("bench", "fleet", "dlrm", trace, "--scale", "1", "--seeds", "2")
    args = (*args, "--jobs", "1", "--strategies", "none", "--balloons", "1,2")
    whole, out = tmp_path / "whole.json", tmp_path / "out.json"
    assert cli(*args, "--write", whole, "-o", "json").exit_code == 0
    data = json.loads(whole.read_text())
    assert _seeds_of(whole) == {"none": [1, 2], "balloon-1": [1, 2], "balloon-2": [1, 2]}
    data["runs"]["balloon-1"] = data["runs"]["balloon-1"][:1]
    out.write_text(json.dumps({**data, "complete": False}))
    real_run = fleet_module.run_one
    replayed: list[tuple[str, int]] = []

    def interrupted(*a: Any, **kw: Any) -> dict[str, Any]:
        raise KeyboardInterrupt

    monkeypatch.setattr(fleet_module, "run_one", interrupted)
    assert cli(*args, "--write", out, "--resume").exit_code == 130
    assert _seeds_of(out) == {"none": [1, 2], "balloon-1": [1], "balloon-2": [1, 2]}

    def counted(*a: Any, **kw: Any) -> dict[str, Any]:
        replayed.append((a[2].name, a[3]))
        return real_run(*a, **kw)

    monkeypatch.setattr(fleet_module, "run_one", counted)
    assert cli(*args, "--write", out, "--resume", "-o", "json").exit_code == 0
    assert replayed == [("balloon-1", 2)]
    assert _seeds_of(out) == _seeds_of(whole)


def test_a_terminals_ctrl_c_stops_every_worker_and_says_how_to_go_on(trace: Path, tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches the whole process group, the pool's workers too. They leave it to
    the command, which stops them and exits 130 with the runs kept (a worker that died of it broke the
    pool: a traceback, and no word of --resume)."""
    out = tmp_path / "out.json"
    proc = _long_fleet(trace, out)
    wait_for = _waiter(proc, out)
    wait_for(1)
    workers = [p for p in _group(proc.pid) if p != proc.pid]
    assert len(workers) == 2 and proc.poll() is None, (workers, proc.poll())
    for worker in workers:  # the signal reaches the workers first: they must not die of it
        os.kill(worker, signal.SIGINT)
    wait_for(_runs_kept(out) + 4)
    assert proc.poll() is None, proc.communicate()[1].decode()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    stderr = err.decode()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and f"; they are in {out}" in stderr
    assert json.loads(out.read_text())["complete"] is False
    left = [p for p in _group(proc.pid) if p != proc.pid]
    assert not left, f"workers left running: {left}"


def test_a_worker_killed_from_outside_ends_the_command_with_its_runs(trace: Path, tmp_path: Path) -> None:
    """A worker the kernel kills (out of memory) breaks the pool: one line that says so and how to go
    on, exit 1, the finished runs in the file; no traceback."""
    out = tmp_path / "out.json"
    proc = _long_fleet(trace, out)
    _waiter(proc, out)(1)
    workers = [p for p in _group(proc.pid) if p != proc.pid]
    assert workers and proc.poll() is None
    os.kill(workers[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    stderr = err.decode()
    assert proc.returncode == 1, stderr
    assert "a worker process was killed (out of memory?); stopped after" in stderr, stderr
    assert "Traceback" not in stderr and "--resume runs the others" in stderr
    assert _runs_kept(out) >= 1 and json.loads(out.read_text())["complete"] is False
    assert [p for p in _group(proc.pid) if p != proc.pid] == []


def _long_fleet(trace: Path, out: Path) -> subprocess.Popen[bytes]:
    """A command of many runs on two workers, in a process group of its own (a terminal's)."""
    command = [sys.executable, "-m", "makeroom", "bench", "fleet", "dlrm", str(trace), "--scale", "1"]
    command += ["--seeds", "1000", "--jobs", "2", "--strategies", "none", "--write", str(out)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _runs_kept(out: Path) -> int:
    return len(json.loads(out.read_text())["runs"]["none"]) if out.exists() else 0


def _waiter(proc: subprocess.Popen[bytes], out: Path) -> Callable[[int], None]:
    """Wait (two minutes at most) until ``out`` keeps that many runs, or the command ended."""

    def wait_for(runs: int) -> None:
        deadline = time.monotonic() + 120
        while _runs_kept(out) < runs and proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):  # a wait on the command, not a sleep
                proc.wait(timeout=0.05)

    return wait_for


def _group(pgid: int) -> list[int]:
    """The live (not zombie) processes of a process group."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(stat.parent.name))
    return found
