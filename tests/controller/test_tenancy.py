"""Nothing a tenant writes steers makeroom, and makeroom acts only inside the scope an admin gives it:
the attacks of issue 11 on the controller and the fake port (the same attacks run on the real control
plane in tests/e2e/test_tenancy.py)."""

from __future__ import annotations

import json

import pytest

from makeroom.controller import ConsolidationConfig, Controller, ControllerConfig, Reason, Strategy
from makeroom.controller.records import Phase, RecordKind, Relocation, Surge, Victim
from makeroom.controller.scope import Scope, Selector, SelectorError, Side
from makeroom.controller.validate import Refusal
from makeroom.model import SCALE_UP_DELAY, VICTIM_OF, Workload
from tests.builders.port import FakeCluster
from tests.builders.state import CPU_NODE, GPU_NODE, StateBuilder

WEB = {"cpu": "400m", "memory": "1Gi"}
LLM = {"cpu": "3", "memory": "12Gi", "nvidia.com/gpu": "1"}
OFF = ConsolidationConfig(enabled=False)
EVICT = ControllerConfig(strategy=Strategy.EVICT, consolidation=OFF)
MIGRATE = ControllerConfig(strategy=Strategy.MIGRATE, consolidation=OFF)
PENDING = "team-b/llm-0"


def two_teams(victim_priority: int = 100, **pending: object) -> tuple[StateBuilder, FakeCluster]:
    """team-a's web replicas fill half of the CPU node and of the GPU node; team-b's llm waits for the
    GPU (seed-1 with two tenants)."""
    b = StateBuilder([StateBuilder.group("cpu", CPU_NODE, max=2), StateBuilder.group("gpu", GPU_NODE)])
    b.node("cpu")
    b.node("gpu")
    b.fill("web", WEB, victim_priority, "cpu-0", 5, namespace="team-a")
    b.fill("web", WEB, victim_priority, "gpu-0", 5, namespace="team-a")
    spec = b.state.pods["team-a/web-0"].spec
    b.state.workloads["team-a/web"] = Workload("web", spec, 10, namespace="team-a")
    llm = b.pod("llm", LLM, 1000, namespace="team-b", **pending)  # type: ignore[arg-type]
    llm.unschedulable_since = 0.0
    return b, FakeCluster(b.state, time=10.0)


def touched_team_a(port: FakeCluster) -> list[tuple[str, str]]:
    return [(verb, target) for verb, target in port.calls if target.startswith("team-a/")]


def refusals(port: FakeCluster) -> list[str]:
    return [m for _, _, reason, m in port.events if reason is Reason.ROLLED_BACK]


# --- whom room is made for, whose pods move ------------------------------------------------------------
def test_by_default_room_is_made_across_namespaces_for_a_higher_priority_pod() -> None:
    _, port = two_teams()
    assert Controller(port, port, EVICT).tick().started == ["llm-0"]
    assert ("evict", "team-a/web-5") in port.calls


@pytest.mark.parametrize(
    "scope",
    [
        Scope(room_for=Side.of(["team-a"])),
        Scope(room_for=Side.of(selector="tier=gold")),
        Scope(room_for=Side.of(priority_classes=["api-critical"])),
        Scope(move=Side.of(["team-b"])),
        Scope(move=Side.of(selector="team=b")),
        Scope(move=Side.of(priority_classes=["batch"])),
    ],
    ids=["for-names", "for-selector", "for-class", "move-names", "move-selector", "move-class"],
)
def test_nothing_moves_outside_the_scope(scope: Scope) -> None:
    _, port = two_teams(priority_class="tenant-high")
    port.labels = {"team-a": {"team": "a"}, "team-b": {"team": "b", "tier": "silver"}}
    controller = Controller(port, port, EVICT, scope)
    assert controller.tick().started == []
    assert port.calls == [] and controller.preview(port.state).moves == ()


def test_system_namespaces_are_out_of_scope_by_default() -> None:
    side = Side()
    b, _ = two_teams()
    kube = b.pod("coredns", WEB, 0, "cpu-0", namespace="kube-system")
    seen = {ns: {"kubernetes.io/metadata.name": ns} for ns in ("kube-system", "team-a")}
    assert side.refuses(kube, seen) is not None
    assert side.refuses(b.state.pods["team-a/web-0"], seen) is None


def test_a_namespace_not_seen_yet_is_out_of_scope_until_seen() -> None:
    """Judged by its name alone, a namespace the cache has not read yet passed every `notin`
    selector, before the labels that keep it out were known (issue 20)."""
    side = Side.of(selector="tier notin (untrusted)")
    b, _ = two_teams()
    web = b.state.pods["team-a/web-0"]
    assert side.refuses(web, {}) == "namespace team-a is not known yet"
    assert side.refuses(web, {"team-a": {"tier": "untrusted"}}) is not None
    assert side.refuses(web, {"team-a": {"tier": "gold"}}) is None
    assert Side.of(selector="").refuses(web, {}) is None  # the admin's "everything" stays everything


def test_selectors_read_as_kubectl_writes_them() -> None:
    s = Selector.parse("team in (a, b),tier!=bronze, gpu ,!legacy,env=prod")
    assert s.matches({"team": "a", "gpu": "", "env": "prod"})
    assert not s.matches({"team": "c", "gpu": "", "env": "prod"})
    assert not s.matches({"team": "a", "gpu": "", "env": "prod", "legacy": "1"})
    assert not s.matches({"team": "a", "env": "prod"})  # gpu must exist
    assert Selector.parse("").matches({}) and Selector.parse("a notin (x)").matches({})
    for broken in ("team in ()", "a==b==c", "(", "a in (b"):
        with pytest.raises(SelectorError):
            Selector.parse(broken)


# --- records ------------------------------------------------------------------------------------------
def forged(port: FakeCluster, **changes: object) -> Relocation:
    """A record as a compromised or mistaken writer of makeroom's store might leave it: team-b's llm
    asks for team-a's web replicas, with a surge of 500."""
    record = Relocation(
        pod=PENDING,
        strategy=Strategy.MIGRATE,
        node="gpu-0",
        started=0.0,
        deadline=1e12,
        victims=[Victim("team-a/web-5", "team-a/web", "gpu-0")],
        since=0.0,
        surge={"team-a/web": Surge(by=500, base=10, need_ready=11)},
    )
    for key, value in changes.items():
        setattr(record, key, value)
    port.save_record(record)
    port.calls.clear()
    return record


@pytest.mark.parametrize(
    ("victim_priority", "changes", "refusal"),
    [
        (100, {}, Refusal.OVER_BUDGET),  # 500 replicas for one victim
        (1_000_000, {"surge": {}}, Refusal.NOT_LOWER_PRIORITY),
        (
            100,
            {"victims": [Victim("team-a/web-5", "team-a/other", "gpu-0")], "surge": {}},
            Refusal.OWNER_CHANGED,
        ),
        (
            100,
            {"victims": [Victim("team-a/web-0", "team-a/web", "cpu-0")], "surge": {}},
            Refusal.OWNER_CHANGED,
        ),
        (
            100,
            {
                "victims": [Victim(f"team-a/web-{i}", "team-a/web", "gpu-0") for i in range(5, 10)] * 5,
                "surge": {},
            },
            Refusal.OVER_BUDGET,
        ),
    ],
    ids=["surge-500", "higher-priority", "other-workload", "other-node", "too-many"],
)
def test_a_record_the_cluster_does_not_bear_out_is_refused_and_rolled_back(
    victim_priority: int, changes: dict[str, object], refusal: Refusal
) -> None:
    _, port = two_teams(victim_priority)
    forged(port, **changes)
    Controller(port, port, MIGRATE).tick()
    assert not [c for c in port.calls if c[0] in ("evict", "scale", "nominate")], port.calls
    assert port.record(RecordKind.RELOCATION, PENDING) is None
    (message,) = refusals(port)
    assert f"({refusal.value})" in message


def test_a_record_for_a_pod_out_of_scope_is_refused() -> None:
    _, port = two_teams()
    forged(port, surge={})
    Controller(port, port, MIGRATE, Scope(room_for=Side.of(["team-a"]))).tick()
    (message,) = refusals(port)
    assert "(out-of-scope)" in message and touched_team_a(port) == []


def test_a_stuck_relocation_does_not_stop_planning_for_the_rest_of_the_cluster() -> None:
    b, port = two_teams()
    b.node("gpu", name="gpu-1")
    b.fill("batch", WEB, 10, "gpu-1", 5, namespace="team-c")
    stuck = b.pod("stuck", LLM, 1000, namespace="team-d")
    stuck.unschedulable_since = 0.0
    port.save_record(  # a relocation under way that will never see its pod bound
        Relocation(
            pod=stuck.key,
            strategy=Strategy.EVICT,
            node="gpu-1",
            started=0.0,
            deadline=1e12,
            victims=[Victim(f"team-c/batch-{i}", "team-c/batch", "gpu-1") for i in range(5)],
            since=0.0,
        )
    )
    report = Controller(port, port, EVICT).tick()
    assert report.started == ["llm-0"]  # planned while the other relocation runs
    assert port.record(RecordKind.RELOCATION, PENDING) is not None
    moved = {target for verb, target in port.calls if verb == "evict"}
    assert moved >= {"team-a/web-5"} and not moved & {f"team-c/batch-{i}" for i in range(5, 10)}


def test_moves_in_flight_count_against_the_bound_across_relocations() -> None:
    for allowed, started in ((6, []), (7, ["llm-0"])):  # 4 in flight + the 3 llm needs
        b, port = two_teams()
        other = b.pod("other", {"cpu": "3", "memory": "1Gi"}, 500, namespace="team-z")
        other.unschedulable_since = 0.0
        port.save_record(
            Relocation(
                pod=other.key,
                strategy=Strategy.EVICT,
                node="cpu-0",
                started=10.0,  # now, after the pods were made (pods made since it started cool down)
                deadline=1e12,
                victims=[Victim(f"team-a/web-{i}", "team-a/web", "cpu-0") for i in range(4)],
            )
        )
        config = ControllerConfig(strategy=Strategy.EVICT, consolidation=OFF, max_moves_in_flight=allowed)
        assert Controller(port, port, config).tick().started == started, allowed
        assert port.record(RecordKind.RELOCATION, other.key) is not None  # still under way


# --- owners, replicas, destinations -------------------------------------------------------------------
def test_migrate_scales_only_a_deployment_that_controls_its_victims_by_owner_reference() -> None:
    _, port = two_teams()
    for i in range(5, 10):
        port.owners[f"team-a/web-{i}"] = "team-a/web-other"  # a ReplicaSet named alike, of another owner
    controller = Controller(port, port, MIGRATE)
    assert controller.tick().started == ["llm-0"]
    record = port.record(RecordKind.RELOCATION, PENDING)
    assert record is not None and record.surge == {}  # moved within their budget, as under evict
    port.time += 2 * MIGRATE.interval
    controller.tick()
    assert not [c for c in port.calls if c[0] == "scale"]
    assert ("evict", "team-a/web-5") in port.calls


def test_a_surge_is_refused_when_an_hpa_took_the_replicas_since() -> None:
    b, port = two_teams()
    controller = Controller(port, port, MIGRATE)
    controller.tick()
    assert ("scale", "team-a/web") in port.calls
    b.state.workloads["team-a/web"].replicas = 10  # the HPA set them back, and owns them now
    b.state.workloads["team-a/web"].replicas_owner = "HorizontalPodAutoscaler/web"
    port.calls.clear()
    port.time += 10
    controller.tick()
    assert ("scale", "team-a/web") not in port.calls
    (message,) = refusals(port)
    assert "(replicas-owned)" in message


def test_a_surge_never_fights_a_change_of_the_replicas() -> None:
    b, port = two_teams()
    controller = Controller(port, port, MIGRATE)
    controller.tick()
    assert b.state.workloads["team-a/web"].replicas == 13
    b.state.workloads["team-a/web"].replicas = 5  # team-a scales its Deployment down meanwhile
    port.calls.clear()
    port.time += 10
    controller.tick()
    assert not [c for c in port.calls if c[0] == "scale"]
    assert b.state.workloads["team-a/web"].replicas == 5
    (message,) = refusals(port)
    assert "(replicas-changed)" in message


def test_an_eviction_with_nowhere_to_go_is_refused() -> None:
    b, port = two_teams()
    Controller(port, port, EVICT).tick()
    assert port.record(RecordKind.RELOCATION, PENDING) is not None
    for name in ("cpu-0",):  # the room elsewhere is gone, and no group may grow
        b.state.nodes[name].unschedulable = True
    b.state.nodes_changed()
    b.state.groups["cpu"] = StateBuilder.group("cpu", CPU_NODE, max=1)
    for p in list(b.state.pods.values()):
        p.terminating = False  # the fake evicts by marking; pretend the budget refused them all
    port.calls.clear()
    port.time += 10
    Controller(port, port, EVICT).tick()
    assert not [c for c in port.calls if c[0] == "evict"]
    (message,) = refusals(port)
    assert "(no-destination)" in message


# --- what a tenant writes ------------------------------------------------------------------------------
def test_annotations_a_tenant_writes_are_no_plan() -> None:
    """The forged records of issue 11, as a tenant could write them on its own objects: a relocation on
    its never-schedulable pod naming another namespace's pod, a surge on its Deployment, a victim mark."""
    old_format = json.dumps(
        {
            "strategy": "migrate",
            "node": "gpu-0",
            "started": 0,
            "deadline": 1e12,
            "victims": [{"pod": "team-a/web-5", "workload": "team-a/web", "node": "gpu-0"}],
            "surge": {"team-a/web": 500},
        }
    )
    never = {"nvidia.com/gpu": "64", "cpu": "1"}
    b, port = two_teams()
    del b.state.pods[PENDING]
    forger = b.pod(
        "forger", never, 1000, namespace="team-b", annotations={"makeroom.io/relocation": old_format}
    )
    forger.unschedulable_since = 0.0
    mine = b.pod("mine", WEB, 1, "cpu-0", namespace="team-b", annotations={VICTIM_OF: "team-a/web-5"})
    b.state.workloads["team-b/forger"] = Workload(
        "forger", forger.spec, 1, namespace="team-b", annotations={"makeroom.io/surge": '{"base":1,"by":500}'}
    )
    Controller(port, port, MIGRATE).tick()
    assert touched_team_a(port) == []
    assert not [c for c in port.calls if c[0] in ("scale", "evict", "nominate")]
    assert port.calls == [("annotate", mine.key)]  # its own mark, taken off its own pod
    assert VICTIM_OF not in mine.annotations and SCALE_UP_DELAY not in forger.annotations


def test_the_record_is_in_makeroom_s_store_never_on_the_pod() -> None:
    b, port = two_teams()
    Controller(port, port, MIGRATE).tick()
    record = port.record(RecordKind.RELOCATION, PENDING)
    assert isinstance(record, Relocation) and record.phase is Phase.HOLDING
    # 3 more Ready replicas than the 0 Ready besides the victims (the builder's pods are not Ready)
    assert record.surge == {"team-a/web": Surge(by=3, base=10, need_ready=3)}
    for pod in b.state.pods.values():
        assert not {k for k in pod.annotations if k.startswith("makeroom.io/")} - {
            VICTIM_OF,
            "makeroom.io/prior-deletion-cost",
        }
