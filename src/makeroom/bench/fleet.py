"""``makeroom bench fleet``: a whole trace replayed under each strategy, the same seeds and the same
demand for all, with 95% confidence intervals over the seeds.

A seed draws each node's provisioning delay (80-120 s, plus the GPU-ready delay on a GPU node) and the
autoscaler's tie-breaking. The strategies ("contenders") are what a platform engineer would run
instead of makeroom, each configured as its users would (docs/benchmarks.md).
"""

from __future__ import annotations

import copy
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, as_completed
from dataclasses import dataclass
from typing import Any

import numpy as np

from makeroom.bench import forked
from makeroom.bench.fleet_demand import Demand
from makeroom.bench.fleet_watch import Watch
from makeroom.controller import Strategy
from makeroom.model import NodeGroup
from makeroom.scenario.load import Scenario, parse_scenario
from makeroom.sim.autoscaler import Autoscaler
from makeroom.sim.descheduler import Descheduler
from makeroom.sim.runs import build

PROVISION_S = (80.0, 120.0)
GPU_READY_S = 60.0  # drivers and the device plugin after the node joins (the GPU operator's start)
BALLOON = "balloon"
BALLOON_PRIORITY = -1  # below every workload, above the autoscaler's expendable cutoff (-10)
OVER_S = 60.0
CDF_POINTS = 101
MAX_BALLOON_NODES = 16
# Student's t, two-sided 95%, by degrees of freedom (1-30); beyond, the normal 1.96.
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
       2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
       2.052, 2.048, 2.045, 2.042)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Contender:
    name: str
    strategy: Strategy  # whether the scheduler preempts, whether makeroom's controller runs
    balloon_nodes: int = 0
    preemption_delay: float = 0.0
    descheduler: bool = False


BASE = (
    Contender(Strategy.NONE.value, Strategy.NONE),
    Contender(Strategy.PREEMPTION.value, Strategy.PREEMPTION),
    Contender("delay-30s", Strategy.PREEMPTION, preemption_delay=30.0),
    Contender("delay-120s", Strategy.PREEMPTION, preemption_delay=120.0),
    Contender("descheduler", Strategy.NONE, descheduler=True),
    Contender(Strategy.EVICT.value, Strategy.EVICT),
    Contender(Strategy.MIGRATE.value, Strategy.MIGRATE),
    Contender(Strategy.HEADROOM.value, Strategy.HEADROOM),  # migrate + room kept ahead (docs/headroom.md)
)
MAKEROOM = Strategy.EVICT.value  # the makeroom run the balloons are sized against


def balloon(name: str, k: int) -> Contender:
    return Contender(name, Strategy.PREEMPTION, balloon_nodes=k)


# --- one run ---------------------------------------------------------------------------------------


def with_balloons(demand: Demand, k: int) -> dict[str, Any]:
    """The demand plus k balloon pods, each the room of a whole node of the first GPU group: low
    priority placeholders that any pod preempts (a CapacityBuffer of k nodes does the same), started
    on k more nodes of that group and bought again by the autoscaler when preempted."""
    data = copy.deepcopy(demand.scenario)
    if k == 0:
        return data
    group = next(g for g in data["node_groups"] if g["name"] == demand.gpu_group_names[0])
    requests = {r: q for r, q in group["capacity"].items() if r in ("cpu", "memory") or "gpu" in r}
    tolerations = [{"operator": "Exists"}]
    spec = {
        "name": BALLOON,
        "replicas": k,
        "priority": BALLOON_PRIORITY,
        "preemption_policy": "Never",
        "requests": requests,
        "node_selector": dict(group.get("labels", {})),
        "tolerations": tolerations,
        "startup_time": "1s",
        "termination_grace": "0s",
        "placement": {group["name"]: k},
    }
    group["initial"] += k
    group["max"] += k
    data["workloads"].insert(0, spec)  # first, so the loader gives each an empty node of its own
    return data


def provision_draw(seed: int, gpu_groups: Sequence[str]) -> Callable[[NodeGroup], float]:
    rng = random.Random(f"provision-{seed}")
    gpus = frozenset(gpu_groups)

    def draw(group: NodeGroup) -> float:
        return rng.uniform(*PROVISION_S) + (GPU_READY_S if group.name in gpus else 0.0)

    return draw


def run_one(
    scenario: Scenario,
    demand: Demand,
    contender: Contender,
    seed: int,
    progress: Callable[[float], None] | None,
) -> dict[str, Any]:
    sim = build(
        scenario,
        contender.strategy,
        seed,
        preemption_delay=contender.preemption_delay,
        quiet=True,
        keep_events=False,
        keep_samples=False,
    )
    sim.world.provision_time = provision_draw(seed, demand.gpu_group_names)
    if isinstance(sim.autoscaler, Autoscaler):
        sim.autoscaler.sleep_when_idle()
    if contender.descheduler:
        Descheduler(sim.world).start()
    ignore = frozenset({BALLOON}) if contender.balloon_nodes else frozenset()
    watch = Watch(sim, ignore)
    start = time.perf_counter()
    result = sim.run(progress=progress)
    wall = time.perf_counter() - start
    moved = [w for n, w in result.workloads.items() if w.evicted and n not in ignore]
    groups = {
        name: {"node_hours": g.node_hours, "cost": g.cost, "nodes_added": g.nodes_added}
        for name, g in result.node_groups.items()
    }
    prices = {g.name: g.price_per_hour for g in scenario.groups}
    waits = np.asarray(watch.gpu_waits)
    gpu_created = max(1, watch.gpu_pods_created)
    return {
        "contender": contender.name,
        "seed": seed,
        "wall_s": round(wall, 3),
        "events": result.events_processed,
        "events_per_s": round(result.events_processed / wall) if wall > 0 else None,
        **{f"gpu_wait_{k}_s": v for k, v in watch.wait_quantiles().items()},
        "gpu_wait_over_60s_share": float((waits > OVER_S).mean()) if len(waits) else None,
        "gpu_never_placed_share": (watch.gpu_removed_unbound + watch.gpu_pending_at_end) / gpu_created,
        "gpu_pending_at_end": watch.gpu_pending_at_end,
        "gpu_utilisation": watch.gpu_utilisation,
        "cost": round(sum(g.cost for g in result.node_groups.values()), 2),
        "node_hours": round(sum(g.node_hours for g in result.node_groups.values()), 3),
        "groups": groups,
        "prices": prices,
        "scale_ups": watch.scale_ups,
        "needless_nodes": watch.needless,
        "evictions": sum(w.evicted for n, w in result.workloads.items() if n not in ignore),
        "moved_unavailable_replica_s": round(sum(w.unavailable_replica_seconds for w in moved), 1),
        "pods_created": watch.pods_created,
        "pods_bound": watch.bound,
        "pods_removed_unbound": watch.removed_unbound,
        "pods_pending_at_end": watch.pending_at_end,
        "demand": watch.demand_fingerprint,
        "gpu_wait_cdf": _cdf(waits),
    }


def _cdf(waits: np.ndarray[Any, Any]) -> list[float]:
    if not len(waits):
        return []
    return [round(float(v), 2) for v in np.percentile(waits, np.linspace(0, 100, CDF_POINTS))]


# --- the benchmark ---------------------------------------------------------------------------------

SUMMARY = (
    "gpu_wait_p50_s",
    "gpu_wait_p90_s",
    "gpu_wait_p99_s",
    "gpu_wait_over_60s_share",
    "gpu_never_placed_share",
    "gpu_utilisation",
    "cost",
    "node_hours",
    "scale_ups",
    "needless_nodes",
    "evictions",
    "moved_unavailable_replica_s",
    "wall_s",
)


def interval(values: Sequence[float | None]) -> dict[str, float | None]:
    """Mean and the half-width of its 95% confidence interval (Student's t over the seeds)."""
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return {"mean": None, "ci95": None, "n": 0}
    mean = statistics.fmean(xs)
    if len(xs) < 2:
        return {"mean": mean, "ci95": None, "n": len(xs)}
    t = T95[len(xs) - 2] if len(xs) - 1 <= len(T95) else 1.96
    return {"mean": mean, "ci95": t * statistics.stdev(xs) / math.sqrt(len(xs)), "n": len(xs)}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {key: interval([r[key] for r in runs]) for key in SUMMARY}
    out["groups"] = {
        g: {k: interval([r["groups"][g][k] for r in runs]) for k in ("node_hours", "cost", "nodes_added")}
        for g in runs[0]["groups"]
    }
    return out


Tracker = Callable[[str, float, str], Callable[[float], None]]  # label, horizon, unit: an update


Checkpoint = Callable[[dict[str, Any]], None]  # the result so far, after each finished run


@dataclass
class Fleet:
    demand: Demand
    seeds: Sequence[int]
    track: Tracker | None = None
    balloon_nodes: Sequence[int] | None = None  # None: sized against makeroom's cost and p99
    jobs: int = 1  # processes; each run is one seed of one strategy, the same result on any number
    checkpoint: Checkpoint | None = None

    def __post_init__(self) -> None:
        self.scenarios: dict[int, Scenario] = {}
        self.sizing: dict[str, int | None] = {}
        self._executor: Executor | None = None
        self._elapsed = 0.0
        self._started = time.perf_counter()
        self._done: dict[tuple[str, int], dict[str, Any]] = {}
        """Every run kept, by (strategy, seed): this command's and those it resumed."""
        self._elapsed_before = 0.0
        self._contenders: list[Contender] = []

    @property
    def runs(self) -> dict[str, list[dict[str, Any]]]:
        """The runs kept, by strategy (in the order run, then those only resumed), in seed order:
        every checkpoint holds all of them, so a command stopped twice loses none it was given."""
        order = {c.name: i for i, c in enumerate(self._contenders)}
        names = sorted({name for name, _ in self._done}, key=lambda n: (order.get(n, len(order)), n))
        return {n: [self._done[n, seed] for seed in self.seeds if (n, seed) in self._done] for n in names}

    def resume(self, runs: Sequence[dict[str, Any]], elapsed: float) -> None:
        """Runs of an earlier command on this demand, stopped halfway (``to_resume``): a (strategy,
        seed) among them is kept as it is instead of replayed (replays are deterministic)."""
        self._done.update({(str(r["contender"]), int(r["seed"])): r for r in runs})
        self._elapsed_before = elapsed

    def scenario(self, k: int) -> Scenario:
        if k not in self.scenarios:
            self.scenarios[k] = parse_scenario(with_balloons(self.demand, k), self.demand.scenario["name"])
        return self.scenarios[k]

    def run(self, contender: Contender) -> list[dict[str, Any]]:
        self._run([contender])
        return self.runs[contender.name]

    def _run(self, contenders: Sequence[Contender]) -> None:
        self._contenders += [c for c in contenders if c not in self._contenders]
        todo = [(c, seed) for c in contenders for seed in self.seeds if (c.name, seed) not in self._done]
        if self._executor is None:
            for c, seed in todo:
                scenario = self.scenario(c.balloon_nodes)
                progress = (
                    self.track(f"{c.name} seed {seed}", scenario.spec.duration, "min") if self.track else None
                )
                self._finished(run_one(scenario, self.demand, c, seed, progress))
        elif todo:
            futures = [self._executor.submit(forked.call, _run_in_worker, task) for task in todo]
            label = f"{', '.join(c.name for c in contenders)}: {len(todo)} runs on {self.jobs} processes"
            done = self.track(label, len(todo), " runs") if self.track else None
            for n, future in enumerate(as_completed(futures), 1):
                self._finished(future.result())
                if done is not None:
                    done(n)

    def _finished(self, run: dict[str, Any]) -> None:
        """A run is kept, and the result so far handed to the checkpoint: a long command stopped
        halfway loses only the runs under way."""
        self._done[(str(run["contender"]), int(run["seed"]))] = run
        if self.checkpoint is not None:
            self._elapsed = self._elapsed_before + time.perf_counter() - self._started
            self.checkpoint({**self.result(), "complete": False})

    def run_all(self, contenders: Sequence[Contender]) -> dict[str, Any]:
        self._started = time.perf_counter()
        with forked.pool(self, self.jobs) as executor:
            self._executor = executor
            try:
                self._run(contenders)
                self._balloons(contenders)
            finally:
                self._executor = None
        self._elapsed = self._elapsed_before + time.perf_counter() - self._started
        return {**self.result(), "complete": True}

    def _balloons(self, contenders: Sequence[Contender]) -> None:
        """Balloons of k GPU nodes: the k given, or the k whose cost is makeroom's (its dollars beyond
        preemption's, in GPU node-hours) and the smallest power of two whose p99 wait is makeroom's."""
        if self.balloon_nodes is not None:
            for k in self.balloon_nodes:
                self.run(balloon(f"balloon-{k}", k))
            return
        ref = self.runs.get(MAKEROOM)
        base = self.runs.get(Strategy.PREEMPTION.value)
        if ref is None or base is None:
            return
        price = self.scenario(0).groups[self._gpu_index()].price_per_hour
        hours = self.scenario(0).spec.duration / 3600
        extra = statistics.fmean(r["cost"] for r in ref) - statistics.fmean(r["cost"] for r in base)
        k_cost = max(1, round(extra / (price * hours))) if price > 0 else 1
        self.sizing["k_cost"] = k_cost
        self.run(balloon(f"balloon-{k_cost}", k_cost))
        target = statistics.fmean(_p99(r) for r in ref)
        k = 1
        while k <= MAX_BALLOON_NODES:
            runs = self.run(balloon(f"balloon-{k}", k))  # replays only the seeds not kept
            if statistics.fmean(_p99(r) for r in runs) <= target:
                self.sizing["k_p99"] = k
                return
            k *= 2
        self.sizing["k_p99"] = None  # not reached within MAX_BALLOON_NODES

    def _gpu_index(self) -> int:
        names = [g.name for g in self.scenario(0).spec.node_groups]
        return names.index(self.demand.gpu_group_names[0])

    def result(self) -> dict[str, Any]:
        from makeroom.bench.sim import machine

        return _result(
            self.runs,
            machine=machine(),
            elapsed=self._elapsed,
            jobs=self.jobs,
            trace=self.demand.trace,
            scenario=self.demand.scenario["name"],
            duration=self.scenario(0).spec.duration,
            seeds=list(self.seeds),
            sizing=self.sizing,
        )


def _result(
    runs: dict[str, list[dict[str, Any]]],
    *,
    machine: Any,
    elapsed: float,
    jobs: int,
    trace: str,
    scenario: str,
    duration: float,
    seeds: list[int],
    sizing: dict[str, int | None],
) -> dict[str, Any]:
    """The JSON of ``bench fleet`` (and of ``fleet-merge``): its shape in one place."""
    demands = {r["demand"] for rs in runs.values() for r in rs}
    return {
        "benchmark": "fleet",
        "machine": machine,
        "wall_s": round(sum(r["wall_s"] for rs in runs.values() for r in rs), 1),
        "elapsed_s": round(elapsed, 1),
        "jobs": jobs,
        "trace": trace,
        "scenario": scenario,
        "duration_s": duration,
        "seeds": seeds,
        "same_demand": len(demands) == 1,
        "balloon_sizing": sizing,
        "contenders": {name: summarize(rs) for name, rs in runs.items()},
        "runs": runs,
    }


def merge(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Results of one demand (one trace, scale and hours) over other seeds or strategies as one, the
    intervals computed again over every seed: runs split across processes, machines or days. A run
    (a strategy's seed) in several results is kept once if they agree on it, as a deterministic
    replay must. Raises ValueError when they do not fit."""
    if not results:
        raise ValueError("no result to merge")
    first = results[0]
    for n, other in enumerate(results):
        if other.get("benchmark") != "fleet":
            raise ValueError(f"result {n + 1} is not of makeroom bench fleet")
        for key in ("trace", "scenario", "duration_s"):
            if other[key] != first[key]:
                raise ValueError(f"results differ in {key}: {first[key]!r} and {other[key]!r}")
    by_seed: dict[str, dict[int, dict[str, Any]]] = {}
    for result in results:
        for name, rs in result["runs"].items():
            for run in rs:
                seen = by_seed.setdefault(name, {}).setdefault(int(run["seed"]), run)
                if _untimed(seen) != _untimed(run):  # a run is deterministic: the same twice, or a fault
                    raise ValueError(f"{name} seed {run['seed']} is in two results with other outcomes")
    runs = {name: [seeds[k] for k in sorted(seeds)] for name, seeds in by_seed.items()}
    demands = {r["demand"] for rs in runs.values() for r in rs}
    if len(demands) > 1:  # another --scale or --hours, or another trace file under the same name
        raise ValueError(f"the runs replayed {len(demands)} different demands (fingerprints differ)")
    order = [c.name for c in BASE]
    names = sorted(runs, key=lambda n: (order.index(n) if n in order else len(order), n))
    # a part's balloon was sized on that part's seeds: kept where no other part sized it otherwise
    sized = [(k, v) for r in results for k, v in r["balloon_sizing"].items()]
    sizing = {k: v for k, v in sized if all(w == v for j, w in sized if j == k)}
    merged = _result(
        {name: runs[name] for name in names},
        machine=first["machine"],
        elapsed=sum(float(r.get("elapsed_s", r["wall_s"])) for r in results),
        jobs=max(int(r.get("jobs", 1)) for r in results),
        trace=first["trace"],
        scenario=first["scenario"],
        duration=first["duration_s"],
        seeds=sorted({int(r["seed"]) for rs in runs.values() for r in rs}),
        sizing=sizing,
    )
    return {**merged, "complete": all(r.get("complete", True) for r in results), "merged_from": len(results)}


def makes_balloons(names: Sequence[str], sizes: Sequence[int] | None) -> bool:
    """Whether a command of these strategies and ``--balloons`` sizes runs balloons: the sizes given,
    or sized against makeroom's and preemption's runs (``Fleet._balloons``)."""
    return bool(sizes) or (sizes is None and {MAKEROOM, Strategy.PREEMPTION.value} <= set(names))


def to_resume(
    previous: dict[str, Any], fleet: Fleet, names: Sequence[str], balloons: bool
) -> list[dict[str, Any]]:
    """The runs of a stopped command's result (``--resume``) that this command keeps instead of
    replaying: the result must be of this demand (trace, --scale, --hours), and hold no run this
    command would not make (overwriting the file would lose it). Raises ValueError naming the key."""
    mine = fleet.result()
    for key in ("trace", "scenario", "duration_s"):
        if previous.get(key) != mine[key]:
            raise ValueError(
                f"/{key}: expected {mine[key]!r} (this command's demand), got {previous.get(key)!r}"
            )
    runs = previous.get("runs")
    if not isinstance(runs, dict):
        raise ValueError("/runs: expected the runs of each strategy")
    seeds = set(fleet.seeds)
    kept = []
    for name, rs in runs.items():
        ours = name in names or (balloons and name.startswith(f"{BALLOON}-"))
        for n, run in enumerate(rs):
            if not ours or run.get("seed") not in seeds or run.get("contender") != name:
                raise ValueError(
                    f"/runs/{name}/{n}: {name} seed {run.get('seed')} is not a run of this command: "
                    "merge the two with fleet-merge, or --write another file"
                )
            kept.append(run)
    return kept


def _untimed(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k not in ("wall_s", "events_per_s")}


def _run_in_worker(fleet: Fleet, task: tuple[Contender, int]) -> dict[str, Any]:
    contender, seed = task
    return run_one(fleet.scenario(contender.balloon_nodes), fleet.demand, contender, seed, None)


def _p99(run: dict[str, Any]) -> float:
    v = run["gpu_wait_p99_s"]
    return math.inf if v is None else float(v)
