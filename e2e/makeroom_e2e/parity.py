"""Fidelity, measured: each seed under each strategy in the simulator and on the real components.

`python -m makeroom_e2e parity` (and tests/e2e/test_parity.py) run a case in both worlds and reduce
each to the same outcome columns: running pods per workload and group, pods removed (preempted,
evicted, relocated or drained), nodes added and removed per group, where the high-priority pod runs,
its time to Ready and the fewest Ready replicas of each workload. The real run uses the harness's
time scale; times are reported back in scenario seconds.

How long the real world is watched: until every scenario event is applied and nothing has changed
(nodes, pod placements, Ready pods) for long enough that the autoscaler could still have acted on
what is there: the scale-down's unneeded time and its delay after a scale-up, past the last change,
and every waiting pod older than the autoscaler's new-pod buffers. Capped by the scenario's duration.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from makeroom.cli.common import ExitStatus

from .cluster import GPU_RESOURCES, GROUP_LABEL, ControlPlane
from .makeroom_run import (
    Makeroom,
    Seed,
    installed_chart,
    leftovers,
    makeroom_command,
    prepared_seed,
    run_args,
    seed_file,
)
from .scenario import STRATEGIES, LoadedScenario, Scenario, read_scenario

SEEDS: tuple[Seed, ...] = (1, 2, 3, 4)
# seed-1 and seed-2 with zone spread and hostname anti-affinity on iris-classifier (issue 19).
CONSTRAINED_SEEDS: tuple[Seed, ...] = ("constrained-seed-1", "constrained-seed-2")
# Room kept ahead of demand (issue 24): seed-1 with the default target, and the burst seed.
HEADROOM_CASES: tuple[tuple[Seed, str], ...] = ((1, "headroom"), ("headroom-seed-5", "headroom"))
MAKEROOM_RUNS = ("evict", "migrate", "headroom")
"""The strategies that need `makeroom run` (and kube-scheduler's preemption off, as the simulator)."""
TIME_SCALE = 0.1
# The cluster-autoscaler's own real-time constants (core/static_autoscaler.go): it waits until the
# oldest pod it would help is 2 s old, 30 s when one asks for a GPU. Not flags: not scaled.
NEW_POD_BUFFER_S = 2.0
NEW_GPU_POD_BUFFER_S = 30.0


def seed_name(seed: Seed) -> str:
    """seed-<n> for a numbered seed, else the constrained seed's own name."""
    return f"seed-{seed}" if isinstance(seed, int) else seed


# Columns that must be equal in both worlds; the others are reported.
OUTCOME = ("placements", "evictions", "nodes_added", "nodes_removed", "high_priority_node_group", "min_ready")


@dataclass
class Outcome:
    """One world's end of one case, in the columns of the parity table."""

    placements: dict[str, dict[str, int]]  # workload -> group -> running pods
    evictions: int
    nodes_added: dict[str, int]
    nodes_removed: dict[str, int]
    high_priority: str | None  # the workload with the highest priority
    high_priority_node_group: str | None  # group of the node it runs on at the end (None: not running)
    time_to_ready_s: float | None  # scenario seconds, of the high-priority workload
    min_ready: dict[str, int | None]
    extra: dict[str, Any] = field(default_factory=dict)

    def outcome(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in OUTCOME}


@dataclass
class Case:
    seed: Seed
    strategy: str
    simulator: Outcome
    real: Outcome
    real_seconds: float

    def differences(self) -> dict[str, tuple[Any, Any]]:
        sim, real = self.simulator.outcome(), self.real.outcome()
        return {k: (sim[k], real[k]) for k in OUTCOME if sim[k] != real[k]}


# ------------------------------------------------------------------------------------------ simulator
def simulate(path: Path, strategy: str) -> dict[str, Any]:
    r = subprocess.run(
        [*makeroom_command(), "simulate", str(path), "--strategy", strategy, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if r.returncode not in (ExitStatus.OK, ExitStatus.PENDING):  # PENDING: a pod waits at the end
        raise RuntimeError(f"makeroom simulate {path} --strategy {strategy} failed:\n{r.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(r.stdout)
    return result


def _high_priority(sc: Scenario) -> str | None:
    """The workload the scenario makes room for: the highest priority, if it is above the others."""
    ws = sorted(sc.workloads, key=lambda w: -w.priority)
    if len(ws) < 2 or ws[0].priority == ws[1].priority:
        return None
    return ws[0].name


def sim_outcome(sc: Scenario, d: dict[str, Any]) -> Outcome:
    hp = _high_priority(sc)
    placements: dict[str, dict[str, int]] = {}
    for p in d["pods"]:
        if p.get("phase") == "Running" and p.get("group"):
            w = placements.setdefault(str(p["workload"]), {})
            w[str(p["group"])] = w.get(str(p["group"]), 0) + 1
    hp_groups = [p["group"] for p in d["pods"] if p["workload"] == hp and p.get("phase") == "Running"]
    return Outcome(
        placements=placements,
        evictions=int(d["evictions"]),
        nodes_added={g: int(v["nodes_added"]) for g, v in d["node_groups"].items()},
        nodes_removed={g: int(v["nodes_removed"]) for g, v in d["node_groups"].items()},
        high_priority=hp,
        high_priority_node_group=hp_groups[0] if len(hp_groups) == 1 else None,
        time_to_ready_s=d["workloads"][hp]["time_to_ready_s"] if hp else None,
        min_ready={w: v["min_ready"] for w, v in d["workloads"].items()},
        extra={"last_event_s": d["events"][-1]["t"] if d["events"] else 0.0},
    )


# ------------------------------------------------------------------------------------------ real world
def _ready(pod: Any) -> bool:
    return pod.metadata.deletion_timestamp is None and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions or []
    )


def _requests_gpu(pod: Any) -> bool:
    return any(r in (c.resources.requests or {}) for c in pod.spec.containers for r in GPU_RESOURCES)


@dataclass
class Watcher:
    """Polls the real world (every 0.2 s) for what the parity table needs over time: the fewest Ready
    replicas of each workload after it first had all it wanted, when the high-priority workload got
    Ready, every pod ever seen on a node, and when anything last changed."""

    ls: LoadedScenario
    raised_at: dict[str, float]  # workload -> scenario time of the last event that raised its replicas
    full_at: dict[str, float] = field(default_factory=dict)
    low: dict[str, int] = field(default_factory=dict)
    peak: dict[str, int] = field(default_factory=dict)  # group -> most nodes at once
    last_change: float = 0.0  # real monotonic time
    last_change_wall: float = 0.0  # the same instant, wall clock (the autoscaler's status uses it)
    _signature: Any = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Watcher:
        self.last_change = time.monotonic()
        self.last_change_wall = time.time()
        self._thread = threading.Thread(target=self._run, name="parity-watcher", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                self.sample()
            self._stop.wait(0.2)

    def sample(self) -> None:
        ls = self.ls
        pods = ls.pods()
        node_objects = ls.cp.nodes()
        nodes = sorted(n.metadata.name for n in node_objects)
        per_group: dict[str, int] = {}
        for node in node_objects:
            g = (node.metadata.labels or {}).get(GROUP_LABEL)
            if g:
                per_group[g] = per_group.get(g, 0) + 1
        for g, count in per_group.items():
            self.peak[g] = max(self.peak.get(g, 0), count)
        now = ls.scenario_time()
        names = [w.name for w in ls.scenario.workloads]
        desired: dict[str, int] = {}
        for name in names:
            with contextlib.suppress(Exception):
                dep = ls.cp.apps.read_namespaced_deployment(_slug(name), ls.namespace)
                desired[name] = int(dep.spec.replicas)
        by_slug = {_slug(name): name for name in names}
        ready: dict[str, int] = dict.fromkeys(names, 0)
        for p in pods:
            owner = by_slug.get(str((p.metadata.labels or {}).get("makeroom.io/workload")))
            if owner is not None and _ready(p):
                ready[owner] += 1
        for name, n in ready.items():
            want = desired.get(name, 0)
            if want == 0:
                continue
            if name not in self.full_at and n >= want and now >= self.raised_at.get(name, 0.0):
                self.full_at[name] = now
            if name in self.full_at:
                self.low[name] = min(self.low.get(name, n), n)
        sig = (nodes, sorted((p.metadata.name, p.spec.node_name, p.status.phase, _ready(p)) for p in pods))
        if sig != self._signature:
            self._signature = sig
            self.last_change = time.monotonic()
            self.last_change_wall = time.time()


def _slug(s: str) -> str:
    from .scenario import _slug as slug

    return slug(s)


def raised_at(sc: Scenario) -> dict[str, float]:
    """Per workload, the scenario time of the last event that raised its replicas (0: from t=0)."""
    out: dict[str, float] = {}
    replicas = {w.name: w.replicas for w in sc.workloads}
    for ev in sc.events:
        if ev.kind == "scale":
            w, n = str(ev.body["workload"]), int(ev.body["replicas"])
            if n > replicas.get(w, 0):
                out[w] = ev.at_s
            replicas[w] = n
        elif ev.kind == "deploy":
            out[str(ev.body["name"])] = ev.at_s
    return out


def removed_pods(ls: LoadedScenario) -> set[str]:
    """Pods removed by preemption, eviction (makeroom's or the autoscaler's drain) or relocation
    (makeroom marks each victim with a Moving event; under migrate its ReplicaSet deletes it)."""
    names = ls.evicted_pods()
    moving = {e.involved_object.name for e in ls.cp.events(ls.namespace, reason="Moving")}
    alive = {p.metadata.name for p in ls.pods() if p.metadata.deletion_timestamp is None}
    return names | (moving - alive)


def real_outcome(ls: LoadedScenario, watcher: Watcher) -> Outcome:
    sc = ls.scenario
    hp = _high_priority(sc)
    summary = ls.summary()
    placements: dict[str, dict[str, int]] = {}
    for p in summary["pods"]:
        if p["phase"] == "Running" and p["group"]:
            w = placements.setdefault(str(p["workload"]), {})
            w[str(p["group"])] = w.get(str(p["group"]), 0) + 1
    current = {g: set(ls.cp.node_names(g)) for g in (x.name for x in sc.node_groups)}
    hp_pods = [p for p in summary["pods"] if p["workload"] == hp and p["phase"] == "Running"]
    hp_groups = [p["group"] for p in hp_pods]
    ttr = None
    if hp and hp in watcher.full_at:
        ttr = round(watcher.full_at[hp] - watcher.raised_at.get(hp, 0.0), 1)
    return Outcome(
        placements=placements,
        evictions=len(removed_pods(ls)),
        nodes_added=ls.nodes_added(),
        nodes_removed={g: len(ls.seen_nodes.get(g, set()) - current[g]) for g in current},
        high_priority=hp,
        high_priority_node_group=hp_groups[0] if len(hp_groups) == 1 else None,
        time_to_ready_s=ttr,
        min_ready={w.name: watcher.low.get(w.name) for w in sc.workloads},
        extra={
            "watched_scenario_s": round(ls.scenario_time(), 1),
            "high_priority_node": hp_pods[0]["node"] if len(hp_pods) == 1 else None,
            "peak_nodes": dict(watcher.peak),
            "pending_at_end": summary["pending_at_end"],
            "running_nodes": {
                w.name: sorted(
                    p["node"] for p in summary["pods"] if p["workload"] == w.name and p["phase"] == "Running"
                )
                for w in sc.workloads
            },
            "ready_at_end": {w: v["ready_at_end"] for w, v in summary["workloads"].items()},
        },
    )


def final_replicas(sc: Scenario) -> dict[str, int]:
    """Deployment name -> the replicas the scenario wants at its end (what makeroom must give back)."""
    out = {_slug(w.name): w.replicas for w in sc.workloads}
    for ev in sc.events:
        if ev.kind == "scale":
            out[_slug(str(ev.body["workload"]))] = int(ev.body["replicas"])
    return out


def no_scale_down_candidates_since(cp: ControlPlane, wall: float) -> bool:
    """The autoscaler's own status, written after `wall`: no node is a scale-down candidate."""
    with contextlib.suppress(Exception):
        cm = cp.core.read_namespaced_config_map("cluster-autoscaler-status", "kube-system")
        status = yaml.safe_load(cm.data["status"])
        down = status["clusterWide"]["scaleDown"]
        probed = datetime.fromisoformat(str(down["lastProbeTime"]).replace("Z", "+00:00")).timestamp()
        return bool(down.get("status") == "NoCandidates" and probed > wall)
    return False


def settled(ls: LoadedScenario, watcher: Watcher, sim_last_s: float) -> bool:
    """Nothing more can happen: events applied, past the simulator's last event, every waiting pod
    old enough that the autoscaler has had its chance at it, and quiet since the last change for as
    long as the autoscaler's scale-down needs (unneeded time or delay after a scale-up, plus its
    recheck of a node found unremovable, plus a few loops). That wait is
    cut short only when no node was added and the autoscaler's status, written well after the last
    change, says it has no scale-down candidate."""
    if not ls.events_done():
        return False
    s = ls.cp.autoscaler_settings
    now = time.monotonic()
    if ls.scenario_time() < sim_last_s + 30:
        return False
    scans = 3 * s.scan_interval_s
    if now - watcher.last_change < scans:
        return False
    # The autoscaler rechecks a node it found unremovable only after --unremovable-node-recheck-timeout,
    # and acts in the loop after the unneeded time ends: both come on top.
    full = (
        max(s.scale_down_unneeded_time_s, s.scale_down_delay_after_add_s)
        + s.unremovable_node_recheck_timeout_s
        + 2 * scans
        + 5.0
    )
    if now - watcher.last_change < full:
        if any(ls.nodes_added().values()):
            return False
        if not no_scale_down_candidates_since(ls.cp, watcher.last_change_wall + 2 * s.scan_interval_s):
            return False
    for p in ls.pods():
        if p.metadata.deletion_timestamp is not None:
            return False  # still terminating: it will go
        if p.spec.node_name:
            if not _ready(p):
                return False  # bound and starting: it will be Ready (a change the watch may not see yet)
            continue
        if p.status.nominated_node_name:
            continue
        age = time.time() - p.metadata.creation_timestamp.timestamp()
        buffer = NEW_GPU_POD_BUFFER_S if _requests_gpu(p) else NEW_POD_BUFFER_S
        if age < buffer + 3 * s.scan_interval_s:
            return False
    return True


def scaled_run_args(scale: float) -> list[str]:
    """makeroom's timers in the harness's time: its defaults times the scale (docs/controller.md)."""
    return [
        f"--timeout={900 * scale:.3f}",
        f"--cooldown={600 * scale:.3f}",
        f"--consolidation-window={600 * scale:.3f}",
        f"--consolidation-wait={1800 * scale:.3f}",
        f"--headroom-cooldown={1800 * scale:.3f}",
    ]


def headroom_args(path: Path, namespace: str) -> list[str]:
    """The scenario's headroom knobs as `makeroom run` flags: each target of a workload (named in the
    scenario's namespace here) or a PriorityClass, the price, the hourly moves, the CPU buffer."""
    data = yaml.safe_load(path.read_text()) or {}
    h = ((data.get("controller") or {}).get("headroom")) or {}
    out: list[str] = []
    for t in h.get("targets") or []:
        whom = t.get("for") or {}
        if "workload" in whom:
            out.append(f"--headroom-target={t['group']}:{t['count']}:workload={namespace}/{whom['workload']}")
        elif "priority_class" in whom:
            out.append(f"--headroom-target={t['group']}:{t['count']}:priority-class={whom['priority_class']}")
        else:
            raise ValueError(f"{path}: a headroom target of given requests has no run flag: {t}")
    if "max_price_per_hour" in h:
        out.append(f"--headroom-max-price={h['max_price_per_hour']}")
    if "max_moves_per_hour" in h:
        out.append(f"--headroom-max-moves-per-hour={h['max_moves_per_hour']}")
    if "cpu_buffer" in h:
        out.append(f"--headroom-cpu-buffer={h['cpu_buffer']}")
    return out


@contextlib.contextmanager
def makeroom_for(
    cp: ControlPlane, strategy: str, groups: Path, tmp: Path, scale: float, expander: str = "least-waste"
) -> Iterator[Callable[..., Makeroom | None]]:
    """For evict and migrate, the chart installed and a function that starts `makeroom run` as its
    ServiceAccount (told the autoscaler's expander, its timers scaled); call it once the scenario is
    loaded, so that makeroom never sees the harness's initial placement. For none and preemption the
    function starts nothing."""
    if strategy not in MAKEROOM_RUNS:
        yield lambda *_: None
        return
    started: list[Makeroom] = []

    def launch(*more: str) -> Makeroom:
        args = run_args(
            cp,
            inst,
            groups,
            strategy=strategy,
            identity="parity",
            interval=2 * scale,
            extra=(f"--autoscaler-expander={expander}", *more),
        )
        started.append(Makeroom([*args, *scaled_run_args(scale)], tmp / f"makeroom-{strategy}.log").start())
        return started[-1]

    with installed_chart(cp) as inst:
        try:
            yield launch
        finally:
            for mr in started:
                mr.stop()


def run_case(cp: ControlPlane, seed: Seed, strategy: str, tmp: Path, scale: float = TIME_SCALE) -> Case:
    """Seed `seed` under `strategy` in both worlds."""
    tmp.mkdir(parents=True, exist_ok=True)
    prepared, groups = prepared_seed(seed, tmp)
    # evict and migrate: kube-scheduler's preemption off, as the simulator runs them (makeroom moves
    # the pods); none and preemption: the seed as it is.
    scenario = prepared if strategy in MAKEROOM_RUNS else seed_file(seed)
    sc = read_scenario(scenario)
    sim = sim_outcome(sc, simulate(scenario, strategy))
    t0 = time.monotonic()
    expander = str(sc.autoscaler.get("expander", "least-waste"))
    with makeroom_for(cp, strategy, groups, tmp, scale, expander) as launch:
        ls = cp.load_scenario(scenario, strategy=strategy, time_scale=scale, start=False)
        mr = launch(*(headroom_args(scenario, ls.namespace) if strategy == "headroom" else ()))
        if (started := mr) is not None:
            # The simulator's controller runs from t=0: the scenario's clock (its events) starts once
            # makeroom acts, not while it is still starting (seconds of real time, a minute of
            # scenario time at 0.1: seed-1's GPU replica came before headroom's first round).
            cp.wait_for(
                lambda: bool(started.messages("acting")) or not started.alive(), 60, "makeroom acting"
            )
        ls.start()
        watcher = Watcher(ls, raised_at(sc)).start()
        try:
            ls.wait_events_applied()
            # The autoscaler's fixed real-time waits stretch the run in scenario time (e2e/README.md):
            # watched for up to twice the scenario's duration.
            is_settled = True
            try:
                cp.wait_for(
                    lambda: settled(ls, watcher, float(sim.extra["last_event_s"])),
                    2 * sc.duration_s * scale + 60,
                    f"{seed_name(seed)} {strategy} settled",
                )
            except TimeoutError:
                is_settled = False
            watcher.sample()
            real = real_outcome(ls, watcher)
            real.extra["settled"] = is_settled
            if mr is not None:
                real.extra["makeroom"] = {
                    "alive": mr.alive(),
                    "relocations_started": len(mr.messages("relocation started")),
                    "relocations_done": len(mr.messages("relocation done")),
                    "forbidden": [d for d in mr.lines() if "403" in str(d.get("error", ""))][:3],
                    "leftovers": leftovers(cp, ls.namespace, final_replicas(sc)),
                }
        finally:
            watcher.stop()
            ls.stop()
    return Case(seed, strategy, sim, real, round(time.monotonic() - t0, 1))


# ------------------------------------------------------------------------------------------ the table
def _fmt_placements(p: dict[str, dict[str, int]]) -> str:
    return "; ".join(
        f"{w.split('-')[0]} " + " ".join(f"{g}:{n}" for g, n in sorted(gs.items()))
        for w, gs in sorted(p.items())
    )


def _fmt_groups(d: dict[str, int]) -> str:
    return " ".join(f"{g}:{n}" for g, n in d.items())


def _fmt_low(d: dict[str, int | None]) -> str:
    return " ".join(f"{w.split('-')[0]}:{'-' if n is None else n}" for w, n in d.items())


def table(cases: list[Case]) -> str:
    head = (
        "| seed | strategy | world | running pods per group | removed | nodes added | nodes removed "
        "| high-priority pod on | its time to Ready (s) | fewest Ready | same outcome |"
    )
    lines = [head, "|" + " --- |" * 11]
    for c in cases:
        same = "yes" if not c.differences() else "NO: " + ", ".join(c.differences())
        for world, o in (("sim", c.simulator), ("real", c.real)):
            ttr = "-" if o.time_to_ready_s is None else f"{o.time_to_ready_s:g}"
            lines.append(
                f"| {c.seed} | {c.strategy} | {world} | {_fmt_placements(o.placements)} | {o.evictions} "
                f"| {_fmt_groups(o.nodes_added)} | {_fmt_groups(o.nodes_removed)} "
                f"| {o.high_priority_node_group or '-'} | {ttr} | {_fmt_low(o.min_ready)} "
                f"| {same if world == 'sim' else ''} |"
            )
    return "\n".join(lines)


def to_json(cases: list[Case]) -> list[dict[str, Any]]:
    return [
        {
            "seed": c.seed,
            "strategy": c.strategy,
            "simulator": asdict(c.simulator),
            "real": asdict(c.real),
            "real_seconds": c.real_seconds,
            "differences": {k: list(v) for k, v in c.differences().items()},
        }
        for c in cases
    ]


def cases_from_json(rows: list[dict[str, Any]]) -> list[Case]:
    """Cases back from `to_json` (parity.json, or the rows the parity test keeps in the cache)."""
    return [
        Case(r["seed"], r["strategy"], Outcome(**r["simulator"]), Outcome(**r["real"]), r["real_seconds"])
        for r in rows
    ]


def table_from_folder(folder: Path) -> str:
    """The table of every case kept in `folder` (`*.json`, each a `to_json` list), in seed and
    strategy order."""
    cases = [c for f in sorted(folder.glob("*.json")) for c in cases_from_json(json.loads(f.read_text()))]
    order = {s: i for i, s in enumerate(STRATEGIES)}
    return table(
        sorted(cases, key=lambda c: (isinstance(c.seed, str), str(c.seed), order.get(c.strategy, 9)))
    )


def run_all(
    cp: ControlPlane,
    out: Path,
    seeds: tuple[Seed, ...] = SEEDS,
    strategies: tuple[str, ...] = STRATEGIES,
    scale: float = TIME_SCALE,
) -> list[Case]:
    """Every case, one after the other, on one control plane; writes parity.md and parity.json."""
    cases = []
    for seed in seeds:
        for strategy in strategies:
            cp.configure_autoscaler(None)
            cp.delete_e2e_objects()
            t = time.monotonic()
            case = run_case(cp, seed, strategy, out / f"{seed_name(seed)}-{strategy}", scale)
            cases.append(case)
            diff = case.differences()
            print(
                f"{seed_name(seed)} {strategy}: {'same' if not diff else 'DIFFERENT ' + str(diff)} "
                f"({time.monotonic() - t:.0f} s)",
                flush=True,
            )
            (out / "parity.md").write_text(table(cases) + "\n", encoding="utf-8")
            (out / "parity.json").write_text(json.dumps(to_json(cases), indent=1), encoding="utf-8")
    cp.configure_autoscaler(None)
    cp.delete_e2e_objects()
    return cases
