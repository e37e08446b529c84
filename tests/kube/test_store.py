"""makeroom's records as Relocation and Consolidation resources in its own namespace, the owner check by
owner references, the namespaces' labels, and `makeroom cleanup`, against the in-memory API server."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from makeroom.controller import Strategy
from makeroom.controller.records import (
    Consolidation,
    Cooldown,
    Phase,
    RecordKind,
    Relocation,
    Surge,
    Victim,
)
from makeroom.kube import records as crs
from makeroom.kube.cache import Cache
from makeroom.kube.cleanup import CleanupError, CleanupOptions, clean_up
from makeroom.kube.client import Api, RateLimiter
from makeroom.kube.cluster import RESERVED_FOR, KubeCluster
from makeroom.kube.dryrun import DryRunCluster
from makeroom.snapshot import GroupConfig, GroupSpec
from tests.builders.kube import NS, node, pod, pod_path
from tests.kube.fake import FakeApiServer

GROUPS = GroupConfig((GroupSpec("cpu", 1, 2), GroupSpec("gpu", 1, 1)))
MINE = "makeroom"  # makeroom's own namespace
DEPLOYMENT = f"/apis/apps/v1/namespaces/{NS}/deployments/web"
RS = f"/apis/apps/v1/namespaces/{NS}/replicasets/web-h1"


def api_of(server: FakeApiServer) -> Api:
    return Api(server, RateLimiter(0, 1), sleep=lambda s: None)


def kube(server: FakeApiServer, **kw: Any) -> KubeCluster:
    api = api_of(server)
    cache = Cache(api, GROUPS)
    for inf in cache.informers.values():
        inf.relist()
    return KubeCluster(api, cache, records_namespace=MINE, **kw)


def relocation() -> Relocation:
    return Relocation(
        pod=f"{NS}/p",
        strategy=Strategy.MIGRATE,
        node="g1",
        started=1_767_225_600.25,
        deadline=1_767_226_500.25,
        victims=[Victim(f"{NS}/a", "apps/web", "g1")],
        since=1_767_225_600.25,
        surge={"apps/web": Surge(by=1, base=1, need_ready=1)},
        why="making room on g1 by moving 1 pod(s) with migrate: a",
    )


def cluster_objects() -> FakeApiServer:
    server = FakeApiServer()
    server.put("/api/v1/nodes/n1", node("n1"))
    server.put("/api/v1/nodes/g1", node("g1", "gpu"))
    server.put(pod_path("a"), pod("a", "g1"))
    server.put(pod_path("p"), pod("p", None, cpu="3", priority=100))
    server.put(
        DEPLOYMENT,
        {
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": NS, "uid": "d-uid"},
            "spec": {"replicas": 1},
        },
    )
    server.put(
        RS,
        {
            "kind": "ReplicaSet",
            "metadata": {
                "name": "web-h1",
                "namespace": NS,
                "uid": "rs",
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": "web",
                        "uid": "d-uid",
                        "controller": True,
                    }
                ],
            },
        },
    )
    server.put(
        f"/api/v1/namespaces/{NS}", {"kind": "Namespace", "metadata": {"name": NS, "labels": {"team": "a"}}}
    )
    return server


# --- the store -------------------------------------------------------------------------------------------
def test_a_record_is_a_resource_in_makeroom_s_namespace_and_reads_back() -> None:
    server = cluster_objects()
    kc = kube(server)
    record = relocation()
    kc.save_record(record)
    path = f"/apis/makeroom.io/v1alpha1/namespaces/{MINE}/relocations/{NS}.p"
    obj = server.objects[path]
    assert obj["kind"] == "Relocation" and obj["metadata"]["namespace"] == MINE
    assert (
        obj["spec"]["pod"] == f"{NS}/p" and obj["spec"]["moves"] == 1 and obj["status"]["phase"] == "holding"
    )
    assert obj["spec"]["startedAt"] == "2026-01-01T00:00:00.250000Z"
    assert obj["spec"]["surge"] == {"apps/web": {"by": 1, "base": 1, "needReady": 1}}
    (apply,) = [c for c in server.calls if c[0] == "PATCH" and c[1].startswith(path)]
    assert "fieldManager=makeroom" in apply[1] and "force=true" in apply[1]
    assert kc.records().relocations == {f"{NS}/p": record}
    record.phase = Phase.DRAINING
    kc.save_record(record)  # the same resource, replaced
    assert kc.records().relocations[f"{NS}/p"] == record
    kc.delete_record(RecordKind.RELOCATION, f"{NS}/p")
    kc.delete_record(RecordKind.RELOCATION, f"{NS}/p")  # gone already: no error
    assert kc.records().relocations == {} and path not in server.objects


def test_a_cooldown_is_a_resource_in_makeroom_s_namespace_and_reads_back() -> None:
    server = cluster_objects()
    kc = kube(server)
    cooldown = Cooldown(workload=f"{NS}/web", pods=[f"{NS}/web-7", f"{NS}/web-8"], until=1_767_226_200.5)
    kc.save_record(cooldown)
    path = f"/apis/makeroom.io/v1alpha1/namespaces/{MINE}/cooldowns/{NS}.web"
    obj = server.objects[path]
    assert obj["kind"] == "Cooldown" and obj["metadata"]["namespace"] == MINE
    assert obj["spec"] == {
        "workload": f"{NS}/web",
        "pods": [f"{NS}/web-7", f"{NS}/web-8"],
        "until": "2026-01-01T00:10:00.500000Z",
    }
    assert kc.records().cooldowns == {f"{NS}/web": cooldown}
    damaged = copy.deepcopy(obj)
    damaged["spec"]["pods"] = "web-7"
    server.put(path, damaged)
    assert kc.records().cooldowns == {f"{NS}/web": None}  # the controller removes it
    kc.delete_record(RecordKind.COOLDOWN, f"{NS}/web")
    assert kc.records().cooldowns == {} and path not in server.objects


def test_records_elsewhere_are_not_makeroom_s_and_damaged_ones_read_as_none() -> None:
    server = cluster_objects()
    kc = kube(server)
    tenant = crs.to_object(relocation(), NS)  # a tenant's copy in its own namespace
    server.put(f"/apis/makeroom.io/v1alpha1/namespaces/{NS}/relocations/{NS}.p", tenant)
    assert kc.records().relocations == {}
    damaged = copy.deepcopy(crs.to_object(relocation(), MINE))
    damaged["spec"]["startedAt"] = "yesterday"
    server.put(crs.path_of(MINE, RecordKind.RELOCATION, f"{NS}/p"), damaged)
    nameless = {"kind": "Consolidation", "metadata": {"name": "x"}, "spec": {"why": "no node"}}
    server.put(f"/apis/makeroom.io/v1alpha1/namespaces/{MINE}/consolidations/x", nameless)
    found = kc.records()
    assert found.relocations == {f"{NS}/p": None} and found.consolidations == {}


def test_consolidations_are_named_by_their_node_and_long_names_stay_valid() -> None:
    server = cluster_objects()
    kc = kube(server)
    kc.save_record(Consolidation(node="g1", started=0.0, deadline=1.0, victims=[], why="saves 0.360/h"))
    assert f"/apis/makeroom.io/v1alpha1/namespaces/{MINE}/consolidations/g1" in server.objects
    assert list(kc.records().consolidations) == ["g1"]
    long = crs.object_name(RecordKind.RELOCATION, "ns/" + "x" * 260)
    assert len(long) <= 253 and crs.object_name(RecordKind.RELOCATION, "ns/" + "y" * 260) != long


def test_cooldown_names_cannot_collide_across_namespaces() -> None:
    """A workload key leaves out ``default``: ``prod.api`` of default and ``api`` of prod were both
    ``prod.api``, and writing one erased the other (issue 20)."""
    server = cluster_objects()
    kc = kube(server)
    ours, theirs = (
        Cooldown(workload="prod.api", pods=["default/r1"], until=2e9),
        Cooldown(workload="prod/api", pods=["prod/r2"], until=2e9),
    )
    kc.save_record(ours)
    kc.save_record(theirs)
    assert kc.records().cooldowns == {"prod.api": ours, "prod/api": theirs}
    kc.delete_record(RecordKind.COOLDOWN, "prod/api")
    assert kc.records().cooldowns == {"prod.api": ours}


def test_a_record_under_an_older_name_is_still_deleted() -> None:
    server = cluster_objects()
    old = crs.to_object(Cooldown(workload="web", pods=[f"{NS}/a"], until=2e9), MINE)
    old["metadata"]["name"] = "web"  # how a default-namespace cooldown was named before
    server.put(f"{crs.collection(MINE, RecordKind.COOLDOWN)}/web", old)
    kc = kube(server)
    assert list(kc.records().cooldowns) == ["web"]
    kc.delete_record(RecordKind.COOLDOWN, "web")
    assert kc.records().cooldowns == {}


def test_a_dry_run_reads_the_records_and_writes_none() -> None:
    server = cluster_objects()
    dry = DryRunCluster(kube(server))
    dry.save_record(relocation())
    dry.delete_record(RecordKind.RELOCATION, f"{NS}/p")
    assert not [c for c in server.calls if c[0] in ("PATCH", "DELETE", "POST")]
    assert [w.verb for w in dry.would] == ["record", "forget"]


# --- owners and namespaces --------------------------------------------------------------------------------
def test_a_pod_s_deployment_is_found_by_owner_references_and_uids() -> None:
    server = cluster_objects()
    assert kube(server).deployment_of(f"{NS}/a") == "apps/web"
    assert kube(server).deployment_of(f"{NS}/missing") is None


@pytest.mark.parametrize(
    "change",
    ["rs-uid", "rs-bare", "rs-of-other-kind", "deployment-uid", "rs-gone", "pod-no-uid"],
)
def test_a_lookalike_name_is_no_deployment(change: str) -> None:
    server = cluster_objects()
    rs = server.objects[RS]
    if change == "rs-uid":  # the pod names a ReplicaSet web-h1 that was deleted and made again
        rs["metadata"]["uid"] = "another"
    elif change == "rs-bare":
        rs["metadata"]["ownerReferences"] = []
    elif change == "rs-of-other-kind":  # an Argo Rollout's ReplicaSet, say
        rs["metadata"]["ownerReferences"][0].update(kind="Rollout", apiVersion="argoproj.io/v1alpha1")
    elif change == "deployment-uid":  # a Deployment named web, but not the one that owns the ReplicaSet
        server.objects[DEPLOYMENT]["metadata"]["uid"] = "impostor"
    elif change == "rs-gone":
        del server.objects[RS]
    elif change == "pod-no-uid":
        server.objects[pod_path("a")]["metadata"]["ownerReferences"][0].pop("uid")
    assert kube(server).deployment_of(f"{NS}/a") is None


def test_namespaces_are_read_with_their_labels() -> None:
    assert kube(cluster_objects()).namespaces() == {NS: {"team": "a"}}


# --- cleanup ------------------------------------------------------------------------------------------------
def in_the_middle(server: FakeApiServer) -> None:
    """A migrate relocation half done: the record, the surge, the victim's mark, the hold on p, a
    consolidation taint with no record, and a reservation taint."""
    server.put(crs.path_of(MINE, RecordKind.RELOCATION, f"{NS}/p"), crs.to_object(relocation(), MINE))
    server.objects[DEPLOYMENT]["spec"]["replicas"] = 2
    server.objects[pod_path("a")]["metadata"]["annotations"] = {
        "makeroom.io/victim-of": f"{NS}/p",
        "controller.kubernetes.io/pod-deletion-cost": "-2147483647",
        "makeroom.io/prior-deletion-cost": "5",
        "keep": "me",
    }
    p = server.objects[pod_path("p")]
    p["metadata"]["annotations"] = {"cluster-autoscaler.kubernetes.io/pod-scale-up-delay": "900s"}
    p["status"]["nominatedNodeName"] = "g1"
    server.objects["/api/v1/nodes/n1"]["spec"]["taints"] = [
        {"key": "makeroom.io/consolidating", "effect": "NoSchedule"},
        {"key": "team", "value": "a", "effect": "NoSchedule"},
    ]
    server.objects["/api/v1/nodes/g1"]["spec"]["taints"] = [
        {"key": RESERVED_FOR, "value": "uid-gone", "effect": "NoSchedule"}
    ]


def makeroom_marks(server: FakeApiServer) -> list[str]:
    found = []
    for path, obj in server.objects.items():
        meta = obj.get("metadata") or {}
        for key, value in (meta.get("annotations") or {}).items():
            if key.startswith("makeroom.io/") or "scale-up-delay" in key or value == "-2147483647":
                found.append(f"{path}: {key}")
        for taint in (obj.get("spec") or {}).get("taints") or []:
            if taint["key"].startswith("makeroom.io/"):
                found.append(f"{path}: taint {taint['key']}")
        if "/makeroom.io/" in path or "/leases/" in path:
            found.append(path)
        if (obj.get("status") or {}).get("nominatedNodeName"):
            found.append(f"{path}: nominated")
    return found


def test_cleanup_undoes_a_relocation_half_done_and_leaves_nothing() -> None:
    server = cluster_objects()
    in_the_middle(server)
    assert len(makeroom_marks(server)) >= 6
    lines: list[str] = []
    opts = CleanupOptions(records_namespace=MINE, lease_namespace=MINE)
    result = clean_up(api_of(server), opts, lines.append, sleep=lambda s: None)
    assert makeroom_marks(server) == []
    assert server.objects[DEPLOYMENT]["spec"]["replicas"] == 1
    a = server.objects[pod_path("a")]["metadata"]["annotations"]
    assert a == {"keep": "me", "controller.kubernetes.io/pod-deletion-cost": "5"}
    assert server.objects["/api/v1/nodes/n1"]["spec"]["taints"] == [
        {"key": "team", "value": "a", "effect": "NoSchedule"}
    ]
    assert result.relocations == ["p"] and result.reservations == 1
    assert any("rolled back the relocation for p" in line for line in lines)
    again = clean_up(api_of(server), opts, sleep=lambda s: None)
    assert again.actions == 0 and again.passes == 1


def test_cleanup_stops_the_controller_first_and_waits_for_its_lease() -> None:
    server = cluster_objects()
    server.put(
        f"/apis/apps/v1/namespaces/{MINE}/deployments/mr-makeroom",
        {
            "kind": "Deployment",
            "metadata": {"name": "mr-makeroom", "namespace": MINE},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "makeroom"}}},
        },
    )
    lease = f"/apis/coordination.k8s.io/v1/namespaces/{MINE}/leases/makeroom"
    server.put(
        lease, {"kind": "Lease", "metadata": {"name": "makeroom"}, "spec": {"holderIdentity": "replica-a"}}
    )
    opts = CleanupOptions(records_namespace=MINE, lease_namespace=MINE, controller_deployment="mr-makeroom")
    with pytest.raises(CleanupError, match="still holds the Lease"):
        clean_up(api_of(server), CleanupOptions(records_namespace=MINE, lease_namespace=MINE, timeout=0.0))
    server.objects[lease]["spec"]["holderIdentity"] = ""  # the stopped replica gave it up
    clean_up(api_of(server), opts, sleep=lambda s: None)
    assert server.objects[f"/apis/apps/v1/namespaces/{MINE}/deployments/mr-makeroom"]["spec"]["replicas"] == 0
    assert lease not in server.objects


def test_a_dump_holds_the_planning_inputs() -> None:
    """`makeroom snapshot` and `plan --kubeconfig` read what planning reads: since issue 19 the
    namespaces too (their labels feed pod affinity's namespaceSelector), and the claims and volumes
    where the cluster serves them (this one has none)."""
    from makeroom.kube.dump import read_objects

    server = cluster_objects()
    for slim in (False, True):
        kinds = {o["kind"] for o in read_objects(api_of(server), slim=slim)}
        assert kinds == {"Node", "Pod", "Deployment", "Namespace"}, kinds


def test_without_the_crds_the_records_say_what_to_install() -> None:
    from makeroom.controller.port import ClusterError

    server = cluster_objects()
    kc = kube(server)
    real = server._serve

    def no_crds(method: str, p: str, query: Any, body: Any) -> tuple[int, Any]:
        if "/makeroom.io/" in p:
            return 404, {
                "kind": "Status",
                "code": 404,
                "message": "the server could not find the requested resource",
            }
        return real(method, p, query, body)

    server._serve = no_crds  # type: ignore[method-assign]
    with pytest.raises(ClusterError, match=r"install the chart's CRDs"):
        kc.records()


def test_cleanup_that_cannot_finish_says_so_in_one_line_and_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica that keeps its Lease: the command says what to do, exit status 1 (the cluster's
    failure, not the input's), no traceback."""
    import makeroom.cli.cleanup as command
    from tests.conftest import cli

    server = cluster_objects()
    lease = f"/apis/coordination.k8s.io/v1/namespaces/{MINE}/leases/makeroom"
    server.put(
        lease, {"kind": "Lease", "metadata": {"name": "makeroom"}, "spec": {"holderIdentity": "replica-a"}}
    )
    monkeypatch.setattr(command, "connect_or_exit", lambda *a, **k: (api_of(server), "the fake"))
    result = cli("cleanup", "--records-namespace", MINE, "--lease-namespace", MINE, "--timeout", "0")
    assert result.exit_code == 1
    assert result.stderr.startswith("makeroom: cleanup: a makeroom replica still holds the Lease"), (
        result.stderr
    )
    assert "Traceback" not in result.output


def test_headroom_s_records_are_resources_and_read_back() -> None:
    from makeroom.controller.records import Keeping, KeptRoom

    server = cluster_objects()
    kc = kube(server)
    keeping = Keeping(
        node="gpu-0",
        started=1_767_226_000.0,
        deadline=1_767_226_900.0,
        victims=[Victim(f"{NS}/web-1", f"{NS}/web", "gpu-0"), Victim(f"{NS}/web-2", f"{NS}/web", "gpu-1")],
        surge={f"{NS}/web": Surge(by=2, base=4, need_ready=6)},
        target="gpu.workload-model",
    )
    kept = KeptRoom(
        target="gpu.workload-model",
        group="gpu",
        whom="model",
        wanted=2,
        free=1,
        state="moving",
        moved=[(1_767_226_000.0, f"{NS}/web")],
    )
    kc.save_record(keeping)
    kc.save_record(kept)
    obj = server.objects[f"/apis/makeroom.io/v1alpha1/namespaces/{MINE}/headrooms/gpu.workload-model"]
    assert obj["kind"] == "Headroom" and obj["status"] == {"free": 1, "state": "moving", "why": ""}
    assert obj["spec"]["wanted"] == 2 and obj["spec"]["group"] == "gpu"  # the printer columns' fields
    found = kc.records()
    assert found.keepings == {"gpu.workload-model": keeping}
    assert found.headroom == {"gpu.workload-model": kept}
    damaged = copy.deepcopy(obj)
    damaged["status"]["free"] = -1
    server.put(f"/apis/makeroom.io/v1alpha1/namespaces/{MINE}/headrooms/gpu.workload-model", damaged)
    assert kc.records().headroom == {"gpu.workload-model": None}
    kc.delete_record(RecordKind.KEEPING, "gpu.workload-model")
    kc.delete_record(RecordKind.HEADROOM, "gpu.workload-model")
    assert kc.records().keepings == {} and kc.records().headroom == {}


def test_plan_on_the_live_cluster_leaves_out_a_pod_on_a_node_that_is_gone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`plan --kubeconfig` converts the cluster as the controller's cache does: a pod on a node that
    is gone is left out and said (a warning), not a refusal of the whole plan (exit 2)."""
    import makeroom.cli.run as run_module

    server = cluster_objects()
    server.put(pod_path("orphan"), pod("orphan", "gone-node"))
    monkeypatch.setattr(run_module, "connect_or_exit", lambda *_: (api_of(server), "the cluster"))
    groups = tmp_path / "groups.yaml"
    groups.write_text("groups:\n  - {name: cpu, min: 1, max: 2}\n  - {name: gpu, min: 1, max: 1}\n")
    state, _, origin, _ = run_module.live_state(tmp_path / "kubeconfig", None, groups)
    assert f"{NS}/orphan" not in state.pods and f"{NS}/a" in state.pods
    assert origin == "the cluster (2 nodes, 2 pods)"
    err = capsys.readouterr().err
    assert (
        f"makeroom: warning: left out of the plan: the cluster: Pod {NS}/orphan.spec.nodeName: bound" in err
    )
