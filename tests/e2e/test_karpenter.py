"""The judge for the simulated Karpenter: real Karpenter v1.14.1 (its KWOK provider, built from the
module by e2e/build-karpenter.sh) on the loopback control plane, with the Karpenter variants of the
seeds, alone (`none`) and next to `makeroom run` (the chart's RBAC, NodePools read-only), and the
Karpenter variant of the headroom burst seed under `headroom`. Each case compares what the real
components did with what `makeroom simulate` says: which NodeClaims Karpenter launched (pool and
instance type), where the text-generator ended, and the pools' nodes at the end."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from makeroom_e2e import ControlPlane, read_scenario
from makeroom_e2e import karpenter as kp
from makeroom_e2e.makeroom_run import Makeroom, ReadySampler, installed_chart, leftovers, run_args
from makeroom_e2e.parity import Watcher, headroom_args, raised_at, scaled_run_args
from makeroom_e2e.scenario import LoadedScenario
from tests.builders.scenario import EXAMPLES
from tests.conftest import cli_json

from makeroom.model.nodepool import NODEPOOL_LABEL
from makeroom.scenario import load_scenario

pytestmark = pytest.mark.e2e

TIME_SCALE = 0.2  # real seconds per scenario second: the text-generator comes 12 s after t=0


@pytest.fixture
def kcp(cp: ControlPlane) -> Iterator[ControlPlane]:
    if not kp.available(cp):
        pytest.fail(
            f"Karpenter missing in {cp.binaries.directory}: run `bash e2e/build-karpenter.sh` "
            "(or set MAKEROOM_E2E=0 to skip the end-to-end tests explicitly)",
            pytrace=False,
        )
    try:
        yield cp
    finally:
        kp.reset(cp)


def variant(n: int) -> Path:
    (path,) = EXAMPLES.glob(f"karpenter-seed-{n}-*.yaml")
    return path


def without_preemption(path: Path, tmp: Path) -> Path:
    """The scenario with kube-scheduler's preemption off, as the simulator runs evict and migrate."""
    data = yaml.safe_load(path.read_text())
    data["scheduler"] = {**(data.get("scheduler") or {}), "preemption": False}
    out = tmp / path.name
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def groups_file(path: Path, tmp: Path) -> Path:
    """What makeroom cannot read from a NodePool: its instance types with their prices, its floor."""
    sc = load_scenario(path)
    groups = []
    for g, spec in zip(sc.groups, sc.spec.node_groups, strict=True):
        types = [
            {
                "name": it.name,
                "capacity": {n: f"{it.capacity[n]}m" for n in it.capacity},
                "price_per_hour": it.price_per_hour,
            }
            for it in g.types()
        ]
        groups.append({"name": g.name, "min": spec.min, "instance_types": types})
    out = tmp / f"groups-{path.stem}.yaml"
    out.write_text(yaml.safe_dump({"groups": groups}))
    return out


def simulated(path: Path, strategy: str) -> dict[str, Any]:
    d = cli_json("simulate", path, "--strategy", strategy)
    launched: dict[str, list[str]] = {}
    for e in d["events"]:
        if e["kind"] == "scale_up":
            launched.setdefault(e["group"], []).append(e["instance_type"])
    return {
        "launched": {g: sorted(v) for g, v in launched.items()},
        "text_generator_ready": d["workloads"].get("text-generator", {}).get("ready_at_end"),
        "text_generator_nodes": [p["node"] for p in d["pods"] if p["workload"] == "text-generator"],
        "nodes_at_end": {g: v["nodes_at_end"] for g, v in d["node_groups"].items()},
        "iris_min_ready": d["workloads"].get("iris-classifier", {}).get("min_ready"),
        "iris_desired": d["workloads"].get("iris-classifier", {}).get("desired"),
    }


def real_nodes_at_end(cp: ControlPlane) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in cp.nodes():
        pool = (n.metadata.labels or {}).get(NODEPOOL_LABEL)
        if pool:
            out[pool] = out.get(pool, 0) + 1
    return out


def text_generator_nodes(cp: ControlPlane, ls: LoadedScenario) -> list[str]:
    return ready_nodes(cp, ls, "text-generator")


def ready_nodes(cp: ControlPlane, ls: LoadedScenario, workload: str) -> list[str]:
    """The hostnames (`<pool>-<n>`, the scenario's names) of the nodes the workload's Ready pods run on."""
    names = {n.metadata.name: (n.metadata.labels or {}).get("kubernetes.io/hostname") for n in cp.nodes()}
    return [str(names.get(p.spec.node_name)) for p in ls.ready_pods(workload)]


def ended_cleanly(mr: Makeroom, code: int | None) -> None:
    """`makeroom run` exited 0 when stopped, and no request was refused for a permission the chart
    lacks."""
    print(mr.tail(15))
    assert code == 0, mr.tail()
    assert not [d for d in mr.lines() if "403" in str(d.get("error", ""))], "a permission the chart lacks"


def report(case: str, want: dict[str, Any], got: dict[str, Any]) -> None:
    print(json.dumps({"case": case, "simulator": want, "real": got}, indent=1))


# --- Karpenter's own choices ----------------------------------------------------------------------

CHOICE = """
version: 1
name: karpenter-choice
duration: 5m
autoscaler: {kind: karpenter}
node_groups:
  - name: cheap
    weight: 10
    max: 3
    instance_types:
      - {name: c-2x, capacity: {cpu: "2", memory: 8Gi}, price_per_hour: 0.05}
  - name: preferred
    weight: 50
    max: 3
    provision_time: 30s
    instance_types:
      - {name: p-8x, capacity: {cpu: "8", memory: 32Gi}, price_per_hour: 0.4}
      - {name: p-4x, capacity: {cpu: "4", memory: 16Gi}, price_per_hour: 0.2}
workloads:
  - {name: api, replicas: 0, requests: {cpu: "1", memory: 1Gi}}
events:
  - {at: 5s, scale: {workload: api, replicas: 3}}
"""


def test_karpenter_launches_the_cheapest_fitting_type_of_the_heaviest_pool(
    kcp: ControlPlane, tmp_path: Path
) -> None:
    scenario = tmp_path / "choice.yaml"
    scenario.write_text(CHOICE)
    want = simulated(scenario, "none")
    assert want["launched"] == {"preferred": ["p-4x"]}
    loaded = kp.load(kcp, scenario, strategy="none", time_scale=TIME_SCALE)
    try:
        kcp.wait_for(lambda: len(loaded.ls.ready_pods("api")) == 3, 90, "3 api pods Ready")
        got = {g: sorted(v) for g, v in loaded.claims.per_pool().items()}
    finally:
        loaded.stop()
    report("choice", want, {"launched": got})
    assert got == want["launched"]


# --- the seeds, Karpenter alone -----------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_seed_under_karpenter_alone_ends_as_the_simulator_says(kcp: ControlPlane, seed: int) -> None:
    path = variant(seed)
    want = simulated(path, "none")
    loaded = kp.load(kcp, path, strategy="none", time_scale=TIME_SCALE)
    ls = loaded.ls
    try:
        ls.wait_events_applied()
        if want["text_generator_ready"]:
            kcp.wait_for(lambda: bool(ls.ready_pods("text-generator")), 150, "text-generator Ready")
        else:
            # Nothing is to happen: give Karpenter a batch, its 10 s requeue and a disruption round.
            time.sleep(30)
        got = {
            "launched": {g: sorted(v) for g, v in loaded.claims.per_pool().items()},
            "text_generator_ready": len(ls.ready_pods("text-generator")),
            "nodes_at_end": real_nodes_at_end(kcp),
        }
    finally:
        loaded.stop()
    report(f"seed-{seed} none", want, got)
    assert got["launched"] == want["launched"]
    assert got["text_generator_ready"] == want["text_generator_ready"]
    assert got["nodes_at_end"] == {g: n for g, n in want["nodes_at_end"].items() if n}


# --- the seeds, makeroom next to Karpenter ------------------------------------------------------


def released(kcp: ControlPlane, ls: LoadedScenario, desired: dict[str, int]) -> bool:
    """Nothing of makeroom's left, but the reservation's toleration on the pod it held the room for:
    Kubernetes lets no toleration be removed from a pod (docs/kube.md)."""
    found = leftovers(kcp, ls.namespace, desired)
    return not [x for x in found if not x.endswith("toleration makeroom.io/reserved-for")]


@pytest.mark.parametrize(("seed", "strategy"), [(1, "migrate"), (2, "migrate"), (3, "migrate"), (3, "evict")])
def test_seed_with_makeroom_next_to_karpenter_ends_as_the_simulator_says(
    kcp: ControlPlane, tmp_path: Path, seed: int, strategy: str
) -> None:
    path = variant(seed)
    want = simulated(path, strategy)
    assert want["text_generator_nodes"] == ["gpu-0"]
    scenario = without_preemption(path, tmp_path)
    groups = groups_file(path, tmp_path)
    with installed_chart(kcp) as inst:
        mr = Makeroom(run_args(kcp, inst, groups, strategy=strategy, identity="solo"), tmp_path / "run.log")

        def start_makeroom(ls: LoadedScenario) -> None:
            mr.start()
            kcp.wait_for(lambda: bool(mr.messages("acting")), 60, "makeroom run acting")

        loaded = kp.load(kcp, scenario, strategy=strategy, time_scale=TIME_SCALE, before_clock=start_makeroom)
        ls = loaded.ls
        sampler = ReadySampler(ls, "iris-classifier")
        desired = want["iris_desired"]
        try:
            ls.wait_events_applied()
            kcp.wait_for(
                lambda: (
                    text_generator_nodes(kcp, ls) == ["gpu-0"]
                    and len(ls.ready_pods("iris-classifier")) == desired
                ),
                240,
                f"text-generator Ready on gpu-0 and {desired} iris Ready",
            )
            kcp.wait_for(
                lambda: released(kcp, ls, {"iris-classifier": desired, "text-generator": 1}),
                60,
                "makeroom's records and reservation released",
            )
            low = sampler.stop()
            launched = {g: sorted(v) for g, v in loaded.claims.per_pool().items()}
            got: dict[str, Any] = {
                "launched": launched,
                "text_generator_nodes": text_generator_nodes(kcp, ls),
                "nodes_at_end": real_nodes_at_end(kcp),
                "iris_min_ready": low,
            }
        finally:
            sampler.stop()
            loaded.stop()
            code = mr.stop()
        ended_cleanly(mr, code)
        assert mr.messages("relocation started") and mr.messages("relocation done"), mr.tail()
    report(f"seed-{seed} {strategy}", want, got)
    assert launched == want["launched"]
    assert "gpu" not in launched, "Karpenter launched a GPU NodeClaim that relocation made needless"
    assert got["nodes_at_end"] == {g: n for g, n in want["nodes_at_end"].items() if n}
    assert got["iris_min_ready"] is not None and got["iris_min_ready"] >= want["iris_min_ready"]


# --- seed 4: back to the preferred pool ------------------------------------------------------------


def test_seed4_karpenter_alone_keeps_the_gpu_node(kcp: ControlPlane) -> None:
    path = variant(4)
    want = simulated(path, "none")
    assert want["nodes_at_end"]["gpu"] == 1
    loaded = kp.load(kcp, path, strategy="none", time_scale=TIME_SCALE)
    try:
        time.sleep(45)  # several of Karpenter's disruption rounds (10 s) and validations (15 s)
        got = {"launched": loaded.claims.per_pool(), "nodes_at_end": real_nodes_at_end(kcp)}
    finally:
        loaded.stop()
    report("seed-4 none", want, got)
    assert got["launched"] == {}
    assert got["nodes_at_end"] == {"cpu": 1, "gpu": 1}


def test_seed4_makeroom_ends_with_the_preferred_pool(kcp: ControlPlane, tmp_path: Path) -> None:
    path = variant(4)
    want = simulated(path, "migrate")
    assert want["nodes_at_end"] == {"cpu": 2, "gpu": 0}
    scenario = without_preemption(path, tmp_path)
    groups = groups_file(path, tmp_path)
    with installed_chart(kcp) as inst:
        mr = Makeroom(run_args(kcp, inst, groups, strategy="migrate", identity="solo"), tmp_path / "run.log")

        def start_makeroom(ls: LoadedScenario) -> None:
            mr.start()
            kcp.wait_for(lambda: bool(mr.messages("acting")), 60, "makeroom run acting")

        loaded = kp.load(
            kcp, scenario, strategy="migrate", time_scale=TIME_SCALE, before_clock=start_makeroom
        )
        ls = loaded.ls
        sampler = ReadySampler(ls, "iris-classifier")
        wanted = {g: n for g, n in want["nodes_at_end"].items() if n}
        try:
            kcp.wait_for(
                lambda: real_nodes_at_end(kcp) == wanted and len(ls.ready_pods("iris-classifier")) == 15,
                300,
                "the GPU node removed by Karpenter, 15 iris Ready on the cpu pool",
            )
            low = sampler.stop()
            groups_of = {n.metadata.name: str(kp.group_of(n)) for n in kcp.nodes()}
            on = {groups_of.get(p.spec.node_name, "?") for p in ls.pods() if p.spec.node_name}
            got = {
                "launched": {g: sorted(v) for g, v in loaded.claims.per_pool().items()},
                "nodes_at_end": real_nodes_at_end(kcp),
                "iris_groups": sorted(on),
                "iris_min_ready": low,
            }
        finally:
            sampler.stop()
            loaded.stop()
            code = mr.stop()
        print(mr.tail(15))
        assert code == 0, mr.tail()
    report("seed-4 migrate", want, got)
    assert got["launched"] == want["launched"] == {"cpu": ["cpu-4x"]}
    assert got["iris_groups"] == ["cpu"]
    assert got["iris_min_ready"] is not None and got["iris_min_ready"] >= want["iris_min_ready"]


# --- headroom: room kept ahead of the burst, next to Karpenter (issue 24 item 5) -------------------

BURST = EXAMPLES / "karpenter-headroom-seed-5-gpu-burst.yaml"


def test_headroom_burst_next_to_karpenter_ends_as_the_simulator_says(
    kcp: ControlPlane, tmp_path: Path
) -> None:
    """`makeroom run --strategy headroom` (the chart's ServiceAccount, the seed's target as a
    --headroom-target flag, its timers scaled as in the parity cases) next to real Karpenter and
    kube-scheduler: the keeper moves one API replica off each GPU node onto the CPU node before the
    burst, so both text-model replicas bind at once and are Ready at the simulator's time (their
    startup) within 10%, as the parity table's headroom cases; no API replica lost, no NodeClaim
    launched (the gpu pool is at its limit, and nothing waits for a CPU node), no relocation."""
    want = cli_json("simulate", BURST, "--strategy", "headroom")
    sim_ready = want["workloads"]["text-model"]["time_to_ready_s"]
    sim_launched = [e for e in want["events"] if e["kind"] == "scale_up"]
    assert want["workloads"]["text-model"]["ready_at_end"] == 2 and sim_ready is not None
    assert want["workloads"]["api"]["min_ready"] == 8 and sim_launched == []
    (burst,) = [e.at_s for e in read_scenario(BURST).events]
    scenario = without_preemption(BURST, tmp_path)
    groups = groups_file(BURST, tmp_path)
    with installed_chart(kcp) as inst:
        started: list[Makeroom] = []

        def start_makeroom(ls: LoadedScenario) -> None:
            args = run_args(
                kcp,
                inst,
                groups,
                strategy="headroom",
                identity="solo",
                interval=2 * TIME_SCALE,
                extra=tuple(headroom_args(BURST, ls.namespace)),
            )
            started.append(Makeroom([*args, *scaled_run_args(TIME_SCALE)], tmp_path / "run.log").start())
            kcp.wait_for(lambda: bool(started[0].messages("acting")), 60, "makeroom run acting")

        loaded = kp.load(
            kcp, scenario, strategy="headroom", time_scale=TIME_SCALE, before_clock=start_makeroom
        )
        ls = loaded.ls
        (mr,) = started
        watcher = Watcher(ls, raised_at(ls.scenario)).start()
        try:
            # The keeper's move is done (its record deleted, "room kept") before the burst comes.
            kcp.wait_for(lambda: bool(mr.messages("room kept")), burst * TIME_SCALE + 30, "room kept")
            kept_at = ls.scenario_time()
            ls.wait_events_applied()
            kcp.wait_for(
                lambda: len(ls.ready_pods("text-model")) == 2 and len(ls.ready_pods("api")) == 8,
                120,
                "both text-model replicas and 8 api replicas Ready",
            )
            watcher.sample()
            real_ready = watcher.full_at["text-model"] - watcher.raised_at["text-model"]
            got: dict[str, Any] = {
                "room_kept_at_s": round(kept_at, 1),
                "text_model_ready_s": round(real_ready, 1),
                "launched": {g: sorted(v) for g, v in loaded.claims.per_pool().items()},
                "nodes_at_end": real_nodes_at_end(kcp),
                "text_model_nodes": ready_nodes(kcp, ls, "text-model"),
                "api_min_ready": watcher.low.get("api"),
                "leftovers": leftovers(kcp, ls.namespace, {"api": 8, "text-model": 2}),
            }
        finally:
            watcher.stop()
            loaded.stop()
            code = mr.stop()
        ended_cleanly(mr, code)
        assert mr.messages("keeping room"), "the keeper started no move: " + mr.tail()
        assert not mr.messages("relocation started"), "the cure made the room, not the keeper"
    report("karpenter-headroom-seed-5 headroom", {"time_to_ready_s": sim_ready, **want["node_groups"]}, got)
    assert got["room_kept_at_s"] < burst, "the keeper's move ended after the burst"
    assert abs(real_ready - sim_ready) <= 0.1 * sim_ready, got
    assert sorted(got["text_model_nodes"]) == ["gpu-0", "gpu-1"]
    assert got["launched"] == {}, "Karpenter launched a NodeClaim the kept room made needless"
    assert got["nodes_at_end"] == {
        g: v["nodes_at_end"] for g, v in want["node_groups"].items() if v["nodes_at_end"]
    }
    assert got["api_min_ready"] == want["workloads"]["api"]["min_ready"]
    # The room's PreferNoSchedule taint stays on the GPU nodes holding it, by design; nothing else.
    assert [x for x in got["leftovers"] if "makeroom.io/headroom" not in x] == [], got["leftovers"]
