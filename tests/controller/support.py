"""Running the controller on the simulated cluster, with a port that can kill it mid-relocation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from makeroom.controller import Controller, ControllerConfig, ObjectKind, Reason, Strategy
from makeroom.controller.records import RecordKind, Records, Stored
from makeroom.controller.scope import NamespaceLabels
from makeroom.model import DELETION_COST, SCALE_UP_DELAY, Resources, Taint, Toleration
from makeroom.model.state import ClusterState
from makeroom.scenario import Scenario
from makeroom.sim import Options, Result, Simulation
from makeroom.sim.clock import Phase
from makeroom.sim.port import SimCluster
from makeroom.sim.runs import build


class Crash(Exception):  # noqa: N818 - it is the event, not an error of the code under test
    """The controller process dies: raised instead of its Nth action."""


class CrashingPort:
    """The simulator's port, which dies at the Nth state-changing call (never performing it)."""

    def __init__(self, inner: SimCluster, crash_at: int | None, counter: list[int]) -> None:
        self.inner = inner
        self.crash_at = crash_at
        self.counter = counter

    def _step(self) -> None:
        self.counter[0] += 1
        if self.crash_at is not None and self.counter[0] == self.crash_at:
            raise Crash(f"killed before action {self.crash_at}")

    def now(self) -> float:
        return self.inner.now()

    def snapshot(self) -> ClusterState:
        return self.inner.snapshot()

    def namespaces(self) -> NamespaceLabels:
        return self.inner.namespaces()

    def deployment_of(self, pod: str) -> str | None:
        return self.inner.deployment_of(pod)

    def records(self) -> Records:
        return self.inner.records()

    def save_record(self, record: Stored) -> None:
        self._step()
        self.inner.save_record(record)

    def delete_record(self, kind: RecordKind, subject: str) -> None:
        self._step()
        self.inner.delete_record(kind, subject)

    def evict(self, pod: str) -> None:
        self._step()
        self.inner.evict(pod)

    def delete_pod(self, pod: str) -> None:
        self._step()
        self.inner.delete_pod(pod)

    def annotate_pod(self, pod: str, changes: Mapping[str, str | None]) -> None:
        self._step()
        self.inner.annotate_pod(pod, changes)

    def may_tidy(self, namespace: str) -> bool:
        return self.inner.may_tidy(namespace)

    def add_toleration(self, pod: str, toleration: Toleration) -> None:
        self._step()
        self.inner.add_toleration(pod, toleration)

    def taint_node(self, node: str, taint: Taint) -> None:
        self._step()
        self.inner.taint_node(node, taint)

    def untaint_node(self, node: str, key: str) -> None:
        self._step()
        self.inner.untaint_node(node, key)

    def nominate(self, pod: str, node: str | None) -> None:
        self._step()
        self.inner.nominate(pod, node)

    def scale(self, workload: str, replicas: int) -> None:
        self._step()
        self.inner.scale(workload, replicas)

    def keep_buffer(self, group: str, requests: Resources, replicas: int) -> None:
        self._step()
        self.inner.keep_buffer(group, requests, replicas)

    def emit_event(self, kind: ObjectKind, name: str, reason: Reason, message: str) -> None:
        self.inner.emit_event(kind, name, reason, message)


def run_with_crash(
    scenario: Scenario, strategy: Strategy, crash_at: int | None, config: ControllerConfig | None = None
) -> tuple[Simulation, Result, int]:
    """Run with the controller killed before its ``crash_at``-th action and a fresh one started
    on the next reconciliation; returns the simulation, its result and the actions counted."""
    sim = Simulation(scenario, Options(strategy=strategy))
    config = config or ControllerConfig(strategy=strategy)
    counter = [0]
    port = CrashingPort(SimCluster(sim.world), crash_at, counter)
    alive: list[Controller] = [Controller(port, port, config)]
    restarts = [0]

    def supervise() -> None:
        try:
            alive[0].tick()
        except Crash:
            restarts[0] += 1
            alive[0] = Controller(port, port, config)  # a new process: nothing kept in memory

    sim.every(config.interval, Phase.CONTROLLER, supervise)
    result = sim.run()
    assert crash_at is None or restarts[0] == (1 if counter[0] >= crash_at else 0)
    return sim, result, counter[0]


def leftovers(sim: Simulation, scenario: Scenario) -> list[str]:
    """Every trace of makeroom on the cluster's objects: annotations, taints, tolerations, scale."""
    found: list[str] = []
    state = sim.world.state
    for pod in state.pods.values():
        for key, value in pod.annotations.items():
            if (
                key.startswith("makeroom.io/")
                or key == SCALE_UP_DELAY
                or (key == DELETION_COST and value.startswith("-2147483647"))
            ):
                found.append(f"pod {pod.name}: annotation {key}")
        for tol in pod.spec.tolerations:
            if tol.key.startswith("makeroom.io/"):
                found.append(f"pod {pod.name}: toleration {tol.key}")
    for kind, subject in sim.world.custom:
        found.append(f"record {kind} {subject}")
    for node in state.nodes.values():
        for key in node.annotations:
            if key.startswith("makeroom.io/"):
                found.append(f"node {node.name}: annotation {key}")
        for taint in node.taints:
            if taint.key.startswith("makeroom.io/"):
                found.append(f"node {node.name}: taint {taint.key}")
    wanted = {w.name: w.replicas for w in scenario.workloads}
    for e in scenario.spec.events:
        if e.scale is not None:
            wanted[e.scale.workload] = e.scale.replicas
    for name, w in state.workloads.items():
        if any(k.startswith("makeroom.io/") for k in w.annotations):
            found.append(f"workload {name}: annotations {sorted(w.annotations)}")
        if w.replicas != wanted.get(name, w.replicas):
            found.append(f"workload {name}: replicas {w.replicas}, wanted {wanted[name]}")
    return found


def default_run(scenario: Scenario, strategy: Strategy) -> Result:
    return build(scenario, strategy).run()


def ready(result: Result, workload: str) -> Any:
    return result.data["workloads"][workload]["ready_at_end"]
