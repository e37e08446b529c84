"""Faults on the real control plane (issue 12, item 6): `makeroom run` behind a proxy that answers
409, 429 and 500, slows requests down, loses answers and cuts watches in the middle of a relocation
(e2e/makeroom_e2e/faults.py); the kube-apiserver restarted mid-relocation; makeroom killed with
SIGTERM during a call, the call landing after it died. Each run ends as the simulator says the seed
ends (where text-generator runs, every workload's Ready replicas, the nodes added per group) with
nothing of makeroom left on the cluster: no annotation, toleration, taint, nomination, surged replica
or record.

Seed 1 makes room without a new node (no autoscaler runs); seed 2's moved replicas wait for the CPU
node the real cluster-autoscaler adds in the middle of the faults.
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from makeroom_e2e import ControlPlane
from makeroom_e2e.faults import FaultPlan, FaultProxy, described, restart_apiserver
from makeroom_e2e.makeroom_run import Installed, Makeroom, installed_chart, leftovers, prepared_seed, run_args
from tests.conftest import cli_json

pytestmark = pytest.mark.e2e
SCALE = 0.5  # iris replicas take 10 s to start, 15 s to go: faults land in the middle of each step


@dataclass(frozen=True)
class Outcome:
    """How the simulator ends a seed under a strategy: what a run on the real components must reach."""

    text_generator_on: list[str]
    ready: dict[str, int]
    desired: dict[str, int]
    nodes_added: dict[str, int]


def simulated(scenario: Path, strategy: str) -> Outcome:
    d = cli_json("simulate", scenario, "--strategy", strategy)
    return Outcome(
        text_generator_on=[p["node"] for p in d["pods"] if p["workload"] == "text-generator"],
        ready={name: w["ready_at_end"] for name, w in d["workloads"].items()},
        desired={name: w["desired"] for name, w in d["workloads"].items()},
        nodes_added={name: g["nodes_added"] for name, g in d["node_groups"].items()},
    )


def fault_args(
    cp: ControlPlane, inst: Installed, groups: Path, kubeconfig: Path, strategy: str, who: str
) -> list[str]:
    args = run_args(cp, inst, groups, strategy=strategy, identity=who, extra=("--cooldown", "10s"))
    at = args.index("--kubeconfig")
    args[at + 1] = str(kubeconfig)
    return args


def nominated(cp: ControlPlane, namespace: str) -> list[str]:
    return [
        f"pod {p.metadata.name}: nominated to {p.status.nominated_node_name}"
        for p in cp.core.list_namespaced_pod(namespace).items
        if p.status.nominated_node_name
    ]


def records(cp: ControlPlane, namespace: str) -> list[str]:
    from kubernetes import client

    custom: Any = client.CustomObjectsApi(cp.api)
    out = []
    for plural in ("relocations", "consolidations", "cooldowns", "keepings", "headrooms"):
        for obj in custom.list_namespaced_custom_object("makeroom.io", "v1alpha1", namespace, plural)[
            "items"
        ]:
            out.append(f"{plural}/{obj['metadata']['name']}")
    return out


def left_behind(cp: ControlPlane, inst: Installed, namespace: str, want: Outcome) -> list[str]:
    return [
        *leftovers(cp, namespace, want.desired),
        *nominated(cp, namespace),
        *records(cp, inst.namespace),
    ]


def as_simulated(ls: Any, want: Outcome) -> bool:
    tg = [p.spec.node_name for p in ls.ready_pods("text-generator")]
    ready = {name: len(ls.ready_pods(name)) for name in want.ready}
    return tg == want.text_generator_on and ready == want.ready and ls.nodes_added() == want.nodes_added


def converge(cp: ControlPlane, inst: Installed, ls: Any, want: Outcome, timeout: float = 240.0) -> None:
    cp.wait_for(lambda: as_simulated(ls, want), timeout, f"the simulator's outcome {want}")
    cp.wait_for(lambda: not left_behind(cp, inst, ls.namespace, want), 90, "nothing of makeroom left")


def report(name: str, **figures: Any) -> None:
    """One line of figures per run (docs/kube.md, "Faults on the real control plane", has them)."""
    print("fault-run " + json.dumps({"run": name, **figures}, sort_keys=True))


def check_simulator(scenario: Path, strategy: str, new_cpu_node: bool = False) -> Outcome:
    """What the run must end as: the simulator's outcome of the same file (text-generator on gpu-0,
    every replica Ready, a CPU node added for the moved replicas where the seed needs one)."""
    want = simulated(scenario, strategy)
    assert want.text_generator_on == ["gpu-0"] and want.ready == want.desired
    assert want.nodes_added == {"cpu": int(new_cpu_node), "gpu": 0}
    return want


@pytest.mark.parametrize(("seed", "strategy"), [(1, "migrate"), (1, "evict"), (2, "migrate")])
def test_a_relocation_converges_through_api_faults(
    cp: ControlPlane, tmp_path: Path, seed: int, strategy: str
) -> None:
    scenario, groups = prepared_seed(seed, tmp_path)
    want = check_simulator(scenario, strategy, new_cpu_node=seed == 2)
    plan = FaultPlan(seed=12)
    with installed_chart(cp) as inst, FaultProxy(cp, plan) as proxy:
        ls = cp.load_scenario(scenario, strategy=strategy, time_scale=SCALE, autoscaler=seed == 2)
        mr = Makeroom(
            fault_args(cp, inst, groups, proxy.kubeconfig(tmp_path / "kubeconfig"), strategy, "faulty"),
            tmp_path / "run.log",
        ).start()
        started = time.monotonic()
        try:
            cp.wait_for(lambda: bool(mr.messages("watch cache synced")), 60, "makeroom synced")
            plan.arm()  # from before the relocation starts until it is over
            ls.wait_events_applied()
            cp.wait_for(lambda: bool(mr.messages("relocation done")), 240, "the relocation done")
            plan.disarm()
            converge(cp, inst, ls, want)
            seconds = time.monotonic() - started
            assert mr.alive(), mr.tail()
        finally:
            plan.disarm()
            ls.stop()
            code = mr.stop()
    assert code == 0, mr.tail()
    injected = described(plan)
    report(
        f"api-faults-seed-{seed}-{strategy}",
        faults=injected,
        converged=True,
        leftovers=0,
        seconds=round(seconds),
    )
    for fault in ("409", "429", "500", "slow", "lost-answer", "dropped-watch", "read-500"):
        assert injected[fault] >= 1, (fault, injected)


def test_a_relocation_converges_across_an_apiserver_restart(cp: ControlPlane, tmp_path: Path) -> None:
    scenario, groups = prepared_seed(1, tmp_path)
    want = check_simulator(scenario, "migrate")
    with installed_chart(cp) as inst:
        ls = cp.load_scenario(scenario, strategy="migrate", time_scale=SCALE, autoscaler=False)
        mr = Makeroom(
            run_args(cp, inst, groups, strategy="migrate", identity="restart", extra=("--cooldown", "10s")),
            tmp_path / "run.log",
        ).start()
        try:
            cp.wait_for(lambda: bool(mr.messages("watch cache synced")), 60, "makeroom synced")
            ls.wait_events_applied()
            cp.wait_for(lambda: bool(mr.messages("relocation started")), 120, "a relocation under way")
            assert not mr.messages("relocation done")
            away = restart_apiserver(cp)  # mid-relocation: the surge's replacements are starting
            converge(cp, inst, ls, want)
            assert mr.alive(), mr.tail()
            errors = [d for d in mr.lines() if d.get("level") in ("warning", "error")]
        finally:
            ls.stop()
            code = mr.stop()
    assert code == 0, mr.tail()
    assert errors, "makeroom should have seen the API server go"
    seen = sorted({str(d.get("msg")) for d in errors})
    report(
        "apiserver-restart-migrate", apiserver_away_s=round(away, 1), converged=True, leftovers=0, seen=seen
    )


def test_makeroom_killed_during_a_call_converges_when_it_comes_back(cp: ControlPlane, tmp_path: Path) -> None:
    """SIGTERM while the surge's scale call is in flight; the call lands after makeroom has died; a
    fresh makeroom finds the record and finishes (or rolls back and starts again)."""
    scenario, groups = prepared_seed(1, tmp_path)
    want = check_simulator(scenario, "migrate")
    with installed_chart(cp) as inst, FaultProxy(cp) as proxy:
        kubeconfig = proxy.kubeconfig(tmp_path / "kubeconfig")
        hold = proxy.hold_next("PATCH", r"/deployments/iris-classifier/scale$")
        ls = cp.load_scenario(scenario, strategy="migrate", time_scale=SCALE, autoscaler=False)
        first = Makeroom(
            fault_args(cp, inst, groups, kubeconfig, "migrate", "first"), tmp_path / "first.log"
        ).start()
        second = Makeroom(
            fault_args(cp, inst, groups, kubeconfig, "migrate", "second"), tmp_path / "second.log"
        )
        try:
            ls.wait_events_applied()
            assert hold.holding.wait(120), first.tail()
            killed = time.monotonic()
            code = first.stop(signal.SIGTERM, timeout=30)  # killed during the call
            exited = time.monotonic() - killed
            hold.release.set()  # the call lands now, after makeroom has gone
            second.start()
            converge(cp, inst, ls, want)
            assert second.alive(), second.tail()
        finally:
            hold.release.set()
            ls.stop()
            second.stop()
            first.stop()
    assert code == 0, first.tail()
    assert first.messages("signal: stopping")
    assert second.messages("became the leader") and second.messages("action"), second.tail()
    # the call in flight was abandoned within the lease's renew deadline (the fence), not its 30 s
    assert exited < 10.0 + 5.0, exited
    report("sigterm-during-a-call-migrate", exited_s=round(exited, 1), converged=True, leftovers=0)
