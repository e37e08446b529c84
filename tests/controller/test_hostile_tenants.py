"""Issue 20: what a tenant with only the `admin` role on its own namespace could do to makeroom without
forging anything, each on the controller and the fake port (the API-side ones run on the real control
plane in tests/e2e/test_tenancy.py).

Each test builds the attack and asserts that it no longer works; the comment above it says what it
achieved before."""

from __future__ import annotations

from dataclasses import replace

import pytest

from makeroom.controller import ConsolidationConfig, Controller, ControllerConfig, Reason, Strategy
from makeroom.controller.core import ORPHANS_PER_TICK
from makeroom.controller.port import EvictionRefusedError
from makeroom.controller.records import RecordKind
from makeroom.controller.relocator import ROOM_UNUSED, STUCK_TERMINATING
from makeroom.controller.scope import Scope, Side
from makeroom.model import VICTIM_OF, DisruptionBudget, OwnerKind, Workload
from tests.builders.port import FakeCluster
from tests.builders.state import CPU_NODE, GPU_NODE, StateBuilder
from tests.controller.test_tenancy import EVICT, LLM, PENDING, WEB, two_teams


def marked(b: StateBuilder, namespace: str, count: int) -> None:
    """Pods of a tenant's own, each annotated `makeroom.io/victim-of` with no record behind it."""
    for i in range(count):
        b.pod(f"spam{i}", {"cpu": "1m"}, 0, "cpu-0", namespace=namespace, annotations={VICTIM_OF: "x"})


# --- 1. bounded work per round, planning first -------------------------------------------------------
def test_thousands_of_forged_marks_neither_delay_room_making_nor_stall_the_round() -> None:
    """Before: every mark was removed inside the round and before planning (3,000 marks: 149 s a
    round, past the liveness limit)."""
    b, port = two_teams()
    marked(b, "team-x", 300)
    marked(b, "team-y", 2)
    controller = Controller(port, port, EVICT)
    report = controller.tick()
    assert report.started == ["llm-0"]
    first_cleanup = next(i for i, (verb, t) in enumerate(port.calls) if t.startswith("team-x/"))
    assert ("record", PENDING) in port.calls[:first_cleanup]  # the relocation came first
    cleaned = [t for verb, t in port.calls if verb == "annotate" and t.startswith(("team-x/", "team-y/"))]
    assert len(cleaned) == ORPHANS_PER_TICK
    assert {"team-y/spam0-0", "team-y/spam1-0"} <= set(cleaned)  # one tenant does not crowd out another
    for _ in range(300 // ORPHANS_PER_TICK + 1):
        port.time += 2.0
        controller.tick()
    assert not [p for p in port.state.pods.values() if VICTIM_OF in p.annotations and p.node == "cpu-0"]


# --- 2. only what the scheduler could place counts ----------------------------------------------------
def test_gated_pods_hold_no_room_and_get_none() -> None:
    """Before: 110 request-free gated pods at the pending pod's priority were counted as taking the
    room first, and makeroom refused everyone's relocations with `no-destination`."""
    b, port = two_teams()
    for _ in range(110):
        gated = b.pod("gated", {"cpu": "1m"}, 1000, namespace="team-x")
        gated.gated = True
        gated.unschedulable_since = 0.0
    report = Controller(port, port, EVICT).tick()
    assert report.started == ["llm-0"]
    assert not [c for c in port.calls if c[1].startswith("team-x/")]


def test_a_pod_the_scheduler_will_not_place_is_reported_once_and_moves_nobody_else() -> None:
    """Before: a high-priority pod that can never schedule where makeroom plans (required
    podAffinity, a hostPort clash) had pods evicted, timed out after 900 s, rolled back, and started
    again with new victims."""
    _, port = two_teams()
    controller = Controller(port, port, EVICT)
    assert controller.tick().started == ["llm-0"]
    evicted = {t for verb, t in port.calls if verb == "evict"}
    for key in evicted:  # gone; the scheduler still does not bind llm (a rule the plan does not see)
        port.state.remove_pod(port.state.pods[key])
    futile: list[str] = []
    for _ in range(int(3 * 3600 / 30)):
        port.time += 30.0
        futile += controller.tick().futile
    assert futile == [PENDING]
    assert {t for verb, t in port.calls if verb == "evict"} == evicted  # nobody else
    room_not_used = [e for e in port.events if e[2] is Reason.CANNOT_HELP]
    assert len(room_not_used) == 1 and room_not_used[0][1] == PENDING
    assert port.record(RecordKind.RELOCATION, PENDING) is None
    assert port.state.pods[PENDING].nominated_node is None


def test_futile_is_not_declared_before_the_scheduler_had_its_chance() -> None:
    _, port = two_teams()
    controller = Controller(port, port, EVICT)
    controller.tick()
    for key in [t for verb, t in port.calls if verb == "evict"]:
        port.state.remove_pod(port.state.pods[key])
    port.time += ROOM_UNUSED / 2
    assert controller.tick().futile == []
    assert port.record(RecordKind.RELOCATION, PENDING) is not None


def test_room_taken_by_others_is_no_reason_to_give_up_on_the_pod() -> None:
    b, port = two_teams()
    controller = Controller(port, port, EVICT)
    controller.tick()
    for key in [t for verb, t in port.calls if verb == "evict"]:
        port.state.remove_pod(port.state.pods[key])
    b.fill("squatter", {"cpu": "3", "memory": "12Gi"}, 0, "gpu-0", 1, namespace="team-x")
    port.time += ROOM_UNUSED + 1
    report = controller.tick()
    assert report.rolled_back == ["llm-0"] and report.futile == []
    assert not [e for e in port.events if e[2] is Reason.CANNOT_HELP]


# --- 3. victims that stall are detected fast -----------------------------------------------------------
class RefusingPort(FakeCluster):
    """The API server's 500 to the eviction of a pod under two PodDisruptionBudgets."""

    def evict(self, pod: str) -> None:
        self.calls.append(("evict", pod))
        raise EvictionRefusedError(f"{pod}: This pod has more than one PodDisruptionBudget")


def test_an_eviction_refused_for_several_budgets_ends_the_relocation_at_once() -> None:
    """Before: each eviction answered 500, was retried until the 900 s deadline, the pending pod held
    nominated and the autoscaler kept away meanwhile."""
    b, _ = two_teams()
    port = RefusingPort(b.state, time=10.0)
    report = Controller(port, port, EVICT).tick()
    assert report.started == ["llm-0"] and report.rolled_back == ["llm-0"]
    assert len([c for c in port.calls if c[0] == "evict"]) == 1  # no retry, nobody else
    (message,) = [m for _, _, r, m in port.events if r is Reason.ROLLED_BACK]
    assert "(eviction-refused)" in message
    assert port.state.pods[PENDING].nominated_node is None


def test_a_workload_under_two_budgets_is_never_chosen_to_evict() -> None:
    _, port = two_teams()
    for p in port.state.pods.values():
        p.ready = p.node is not None
    web = port.state.workloads["team-a/web"]
    web.pdb = DisruptionBudget(max_unavailable=5)
    web.more_pdbs = (DisruptionBudget(max_unavailable=5),)  # each allows plenty; together, nothing
    assert Controller(port, port, EVICT).tick().started == []
    web.more_pdbs = ()
    assert Controller(port, port, EVICT).tick().started == ["llm-0"]


def test_a_victim_terminating_past_its_grace_period_ends_the_relocation_and_frees_the_pod() -> None:
    """Before: a victim that never finished terminating (its own finalizer, a long grace period) kept
    the GPU pod nominated, and the autoscaler away from it, until the 900 s deadline."""
    _, port = two_teams()
    controller = Controller(port, port, EVICT)
    controller.tick()
    evicted = {t for verb, t in port.calls if verb == "evict"}
    for key in evicted:  # terminating, for ever
        port.state.pods[key].gone_by = port.time + 30.0
    port.time += 30.0 + STUCK_TERMINATING / 2
    assert controller.tick().rolled_back == []
    port.time += STUCK_TERMINATING
    report = controller.tick()
    assert report.rolled_back == ["llm-0"]
    (message,) = [m for _, _, r, m in port.events if r is Reason.ROLLED_BACK]
    assert "still terminating" in message
    pod = port.state.pods[PENDING]
    assert pod.nominated_node is None and "cluster-autoscaler.kubernetes.io/pod-scale-up-delay" not in (
        pod.annotations
    )
    assert {t for verb, t in port.calls if verb == "evict"} == evicted  # nobody else evicted


# --- 4. never lose work ---------------------------------------------------------------------------------
@pytest.mark.parametrize("owner", [OwnerKind.JOB, OwnerKind.NONE])
def test_job_and_bare_pods_move_only_where_the_admin_opts_in(owner: OwnerKind) -> None:
    """Before: a Job's pods were evicted (backoffLimit 0: the Job failed)."""
    _, port = two_teams()
    for p in port.state.pods.values():
        if p.namespace == "team-a":
            p.owner_kind = owner
    assert Controller(port, port, EVICT).tick().started == []
    opted = replace(EVICT, move_jobs_in=("team-a",))
    assert Controller(port, port, opted).tick().started == ["llm-0"]


def test_a_statefulset_pod_with_a_volume_claim_is_not_moved() -> None:
    """Before: a StatefulSet pod bound to a local PersistentVolume was evicted to where it could never
    run."""
    _, port = two_teams()
    for p in port.state.pods.values():
        if p.namespace == "team-a":
            p.owner_kind = OwnerKind.STATEFUL_SET
            p.spec = replace(p.spec, claims_volume=True)
    assert Controller(port, port, EVICT).tick().started == []
    for p in port.state.pods.values():
        p.spec = replace(p.spec, claims_volume=False)
    assert Controller(port, port, EVICT).tick().started == ["llm-0"]


# --- 5. scope is scope ----------------------------------------------------------------------------------
def consolidating_cluster() -> tuple[StateBuilder, FakeCluster]:
    """Two web replicas alone on a costly GPU node, room for them on the cheap CPU node."""
    b = StateBuilder(
        [
            StateBuilder.group("cpu", CPU_NODE, max=2, price=0.17),
            StateBuilder.group("gpu", GPU_NODE, max=2, price=0.53),
        ]
    )
    b.node("cpu")
    b.node("gpu")
    b.fill("web", WEB, 100, "gpu-0", 2, namespace="team-a")
    spec = b.state.pods["team-a/web-0"].spec
    b.state.workloads["team-a/web"] = Workload("web", spec, 2, namespace="team-a")
    return b, FakeCluster(b.state, time=10.0)


CONSOLIDATE = ControllerConfig(strategy=Strategy.MIGRATE, consolidation=ConsolidationConfig())


@pytest.mark.parametrize(
    ("namespace", "priority", "pauses"),
    [("team-b", 1000, True), ("kube-system", 0, False), ("team-b", -100, False)],
    ids=["in-scope", "out-of-scope", "expendable"],
)
def test_consolidation_gives_way_only_to_waiting_pods_makeroom_may_help(
    namespace: str, priority: int, pauses: bool
) -> None:
    """Before: one never-schedulable priority-0 pod in a namespace outside makeroom's scope halted
    consolidation cluster-wide."""
    b, port = consolidating_cluster()
    waiting = b.pod("never", {"cpu": "64"}, priority, namespace=namespace)
    waiting.unschedulable_since = 0.0
    report = Controller(port, port, CONSOLIDATE).tick()
    assert report.consolidating == ([] if pauses else ["gpu-0"])


def test_a_consolidation_under_way_is_not_stopped_by_a_pod_out_of_scope() -> None:
    b, port = consolidating_cluster()
    scope = Scope(room_for=Side.of(["team-a"]))
    controller = Controller(port, port, CONSOLIDATE, scope)
    assert controller.tick().consolidating == ["gpu-0"]
    waiting = b.pod("never", LLM, 1000, namespace="team-b")
    waiting.unschedulable_since = port.time
    port.time += 2.0
    assert controller.tick().consolidation_stopped == []
    assert port.record(RecordKind.CONSOLIDATION, "gpu-0") is not None
