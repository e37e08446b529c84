"""The Kubernetes adapter against an in-memory API server: retries, errors, rate limit, watches, the
cache, the Cluster port's verbs, nomination fallback, dry run, logs and the health endpoints."""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from makeroom.controller.port import ConflictError, EvictionBlockedError, NotFoundError
from makeroom.controller.reasons import ObjectKind, Reason
from makeroom.kube.cache import Cache, Informer, Resource
from makeroom.kube.client import Api, GoneError, KubeError, RateLimiter
from makeroom.kube.cluster import RESERVED_FOR, KubeCluster, Nomination, NotLeaderError
from makeroom.kube.dryrun import DryRunCluster
from makeroom.kube.logs import JsonFormatter
from makeroom.kube.metrics import HealthServer, Metrics
from makeroom.kube.options import NominationMode
from makeroom.kube.slim import Interner, is_unschedulable, slim_pod
from makeroom.model import Taint, TaintEffect, Toleration
from makeroom.snapshot import GroupConfig, GroupSpec, state_from_objects
from tests.builders.kube import NS, node, pod, pod_path
from tests.kube.fake import FakeApiServer, event_bytes


def make_api(server: FakeApiServer, **kwargs: Any) -> tuple[Api, list[float]]:
    sleeps: list[float] = []
    return Api(server, RateLimiter(0, 1), sleep=sleeps.append, **kwargs), sleeps


GROUPS = GroupConfig((GroupSpec("cpu", 1, 2), GroupSpec("gpu", 1, 1)))


# --- client ----------------------------------------------------------------------------------------
def test_transient_failures_are_retried_with_backoff() -> None:
    server = FakeApiServer()
    server.put("/api/v1/nodes/n1", node("n1"))
    server.fail_next = [503, 0, 500]
    api, sleeps = make_api(server)
    assert api.get("/api/v1/nodes/n1")["metadata"]["name"] == "n1"
    assert sleeps == [0.2, 0.4, 0.8]


def test_retries_give_up_with_a_cluster_error() -> None:
    server = FakeApiServer()
    server.fail_next = [503] * 10
    api, sleeps = make_api(server, retries=2)
    with pytest.raises(KubeError) as info:
        api.get("/api/v1/nodes/n1")
    assert info.value.status == 503 and len(sleeps) == 2


def test_statuses_map_to_port_errors_without_retry() -> None:
    server = FakeApiServer()
    api, sleeps = make_api(server)
    with pytest.raises(NotFoundError):
        api.get("/api/v1/nodes/missing")
    server.put("/api/v1/nodes/n1", node("n1"))
    with pytest.raises(ConflictError):
        api.patch("/api/v1/nodes/n1", {"metadata": {"resourceVersion": "1"}})
    assert sleeps == []


def test_rate_limiter_allows_a_burst_then_paces() -> None:
    now = [0.0]
    waited: list[float] = []

    def sleep(s: float) -> None:
        waited.append(s)
        now[0] += s

    limiter = RateLimiter(10.0, 3, clock=lambda: now[0], sleep=sleep)
    for _ in range(5):
        limiter.acquire()
    assert waited == pytest.approx([0.1, 0.1])


def test_list_pages_follow_continue() -> None:
    server = FakeApiServer()
    for i in range(7):
        server.put(f"/api/v1/nodes/n{i}", node(f"n{i}"))
    api, _ = make_api(server)
    pages = list(api.list_pages("/api/v1/nodes", page=3))
    assert [len(items) for items, _ in pages] == [3, 3, 1]
    assert len(api.list_all("/api/v1/nodes", page=2)["items"]) == 7


def test_watch_lines_split_across_chunks_and_gone() -> None:
    server = FakeApiServer()
    a, b = event_bytes("ADDED", node("a")), event_bytes("DELETED", node("b"))
    gone = json.dumps(
        {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    ).encode()
    server.watch_scripts["/api/v1/nodes"] = [(200, [a[:10], a[10:] + b[:5], b[5:]]), (200, [gone + b"\n"])]
    api, _ = make_api(server)
    events = list(api.watch("/api/v1/nodes", {"resourceVersion": "5"}))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("DELETED", "b"),
    ]
    with pytest.raises(GoneError):
        list(api.watch("/api/v1/nodes", {"resourceVersion": "5"}))


# --- slim objects and the cache --------------------------------------------------------------------
def test_slim_pods_plan_as_the_full_objects() -> None:
    objects = [
        node("n1"),
        node("g1", "gpu"),
        pod("a", "n1"),
        pod("b", "n1", priority=5),
        pod("p", None, cpu="3", priority=100),
    ]
    interner = Interner()
    slim = [o if o["kind"] == "Node" else slim_pod(o, interner) for o in objects]
    full = state_from_objects(objects, GROUPS)
    cut = state_from_objects([s for s in slim if s is not None], GROUPS)
    for key, p in full.pods.items():
        q = cut.pods[key]
        assert (p.spec, p.node, p.workload, p.created_at, p.unschedulable_since, p.annotations, p.labels) == (
            q.spec,
            q.node,
            q.workload,
            q.created_at,
            q.unschedulable_since,
            q.annotations,
            q.labels,
        )
    s = slim_pod(pod("a", "n1"), interner)
    assert s is not None and "managedFields" not in s["metadata"] and "env" not in s["spec"]["containers"][0]


def test_pods_of_one_template_share_their_parts() -> None:
    interner = Interner()
    a, b = slim_pod(pod("a", "n1"), interner), slim_pod(pod("b", "n2"), interner)
    assert a is not None and b is not None
    assert a["spec"]["containers"] is b["spec"]["containers"]
    assert a["metadata"]["labels"] is b["metadata"]["labels"]
    assert a["spec"]["nodeName"] != b["spec"]["nodeName"]


def test_finished_pods_are_left_out() -> None:
    done = pod("a", "n1")
    done["status"]["phase"] = "Succeeded"
    assert slim_pod(done, Interner()) is None


def test_informer_lists_watches_and_relists_on_gone() -> None:
    server = FakeApiServer()
    server.put("/api/v1/nodes/n1", node("n1"))
    api, _ = make_api(server)
    changes: list[tuple[str, bool, bool]] = []
    inf = Informer(
        api,
        Resource("Node", "/api/v1/nodes"),
        Interner(),
        lambda k, o, n: changes.append((k, o is None, n is None)),
    )
    gone = json.dumps({"type": "ERROR", "object": {"code": 410, "message": "expired"}}).encode() + b"\n"
    server.watch_scripts["/api/v1/nodes"] = [
        (
            200,
            [
                event_bytes(
                    "ADDED", {**node("n2"), "metadata": {**node("n2")["metadata"], "resourceVersion": "200"}}
                )
            ],
        ),
        (200, [gone]),
    ]

    def stop_after_relist(method: str, path: str) -> None:
        if inf.relists >= 2:
            inf.stopped.set()

    server.on_request = stop_after_relist
    inf.run()
    assert inf.relists == 2  # the first list, and the one after 410 Gone
    assert set(inf.store) == {"n1"}  # the relist replaced what the watch had added
    assert ("n2", True, False) in changes and ("n2", False, True) in changes


def test_cache_signals_a_pod_becoming_unschedulable_and_builds_state_once_per_change() -> None:
    server = FakeApiServer()
    server.put("/api/v1/nodes/n1", node("n1"))
    server.put("/api/v1/nodes/g1", node("g1", "gpu"))
    server.put(pod_path("a"), pod("a", "n1"))
    api, _ = make_api(server)
    cache = Cache(api, GROUPS)
    for inf in cache.informers.values():
        inf.relist()
    first = cache.state()
    assert cache.state() is first
    assert not cache.unschedulable.is_set()
    cache.informers["Pod"].apply({"type": "ADDED", "object": pod("p", None, cpu="3")})
    assert cache.unschedulable.is_set() and f"{NS}/p" in cache.unschedulable_at
    assert f"{NS}/p" in cache.state().pods and cache.state().pods[f"{NS}/p"].unschedulable_since is not None
    assert cache.builds == {"full": 1, "incremental": 1}
    assert is_unschedulable(cache.get("Pod", f"{NS}/p"))


def _view(state: Any) -> Any:
    pods = {
        k: (
            p.spec,
            p.node,
            p.nominated_node,
            p.unschedulable_since,
            p.ready,
            p.terminating,
            p.annotations,
            p.workload,
        )
        for k, p in state.pods.items()
    }
    workloads = {k: (w.replicas, w.annotations, w.pdb) for k, w in state.workloads.items()}
    used = {n: state.node_free(n) for n in state.nodes}
    nominated = {n: sorted(held) for n, held in state.nominated.items()}
    return pods, workloads, used, nominated


def test_pod_by_pod_updates_equal_a_full_build() -> None:
    server = FakeApiServer()
    for n in ("n1", "n2"):
        server.put(f"/api/v1/nodes/{n}", node(n))
    server.put("/api/v1/nodes/g1", node("g1", "gpu"))
    for i in range(4):
        server.put(pod_path(f"a{i}"), pod(f"a{i}", "n1"))
    api, _ = make_api(server)
    cache = Cache(api, GROUPS)
    for inf in cache.informers.values():
        inf.relist()
    cache.state()
    pods = cache.informers["Pod"]
    moved = pod("a1", "n2")
    moved["metadata"]["annotations"] = {"makeroom.io/victim-of": "x"}
    terminating = pod("a2", "n1")
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    nominated = pod("p", None, cpu="3", priority=100)
    nominated["status"]["nominatedNodeName"] = "n2"
    for event in (
        {"type": "ADDED", "object": pod("p", None, cpu="3", priority=100)},
        {"type": "MODIFIED", "object": nominated},
        {"type": "MODIFIED", "object": moved},
        {"type": "MODIFIED", "object": terminating},
        {"type": "DELETED", "object": pod("a3", "n1")},
        {"type": "ADDED", "object": pod("a4", "n2")},
    ):
        pods.apply(event)
        incremental = cache.state()
        full = state_from_objects(cache.objects(), GROUPS, None)
        assert _view(incremental) == _view(full), event["type"]
    assert cache.builds["full"] == 1 and cache.builds["incremental"] == 6
    cache.informers["Node"].apply(
        {"type": "MODIFIED", "object": {**node("n2"), "spec": {"unschedulable": True}}}
    )
    cache.state()
    assert cache.builds["full"] == 2  # a node change: built in full


def test_a_change_planning_does_not_read_is_no_change() -> None:
    server = FakeApiServer()
    api, _ = make_api(server)
    cache = Cache(api, GROUPS)
    before = cache.version
    same = node("n1")
    cache.informers["Node"].apply({"type": "ADDED", "object": same})
    heartbeat = node("n1")
    heartbeat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:00:00Z"
    cache.informers["Node"].apply({"type": "MODIFIED", "object": heartbeat})
    assert cache.version == before + 1


# --- the Cluster port ------------------------------------------------------------------------------
def cluster(server: FakeApiServer, leader: list[bool] | None = None, **kw: Any) -> KubeCluster:
    api, _ = make_api(server)
    cache = Cache(api, GROUPS)
    for inf in cache.informers.values():
        inf.relist()
    flag = leader if leader is not None else [True]
    return KubeCluster(api, cache, may_act=lambda: flag[0], **kw)


def seeded() -> FakeApiServer:
    server = FakeApiServer()
    server.put("/api/v1/nodes/n1", node("n1"))
    server.put("/api/v1/nodes/g1", node("g1", "gpu"))
    server.put(pod_path("a"), pod("a", "n1"))
    server.put(pod_path("p"), pod("p", None, cpu="3", priority=100))
    server.put(
        f"/apis/apps/v1/namespaces/{NS}/deployments/web",
        {"kind": "Deployment", "metadata": {"name": "web", "namespace": NS}, "spec": {"replicas": 1}},
    )
    return server


def test_eviction_429_is_blocked_and_404_not_found() -> None:
    server = seeded()
    kc = cluster(server)
    server.blocked_evictions.add(pod_path("a"))
    with pytest.raises(EvictionBlockedError):
        kc.evict(f"{NS}/a")
    server.blocked_evictions.clear()
    kc.evict(f"{NS}/a")
    with pytest.raises(NotFoundError):
        kc.evict(f"{NS}/a")
    post = [c for c in server.calls if c[0] == "POST"]
    assert post[0][1].endswith("/pods/a/eviction") and post[0][2]["kind"] == "Eviction"


def test_pod_annotations_and_the_scale_subresource() -> None:
    server = seeded()
    kc = cluster(server)
    kc.annotate_pod(f"{NS}/a", {"x": "1", "a": None})
    assert server.objects[pod_path("a")]["metadata"]["annotations"] == {"x": "1"}
    kc.scale(f"{NS}/web", 3)
    d = server.objects[f"/apis/apps/v1/namespaces/{NS}/deployments/web"]
    assert d["spec"]["replicas"] == 3 and "annotations" not in d["metadata"]
    (scale,) = [(m, p) for m, p, _ in server.calls if p.endswith("/scale")]
    assert scale == ("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/web/scale")


def test_taints_and_tolerations_keep_the_others() -> None:
    server = seeded()
    server.objects["/api/v1/nodes/n1"]["spec"]["taints"] = [{"key": "other", "effect": "NoSchedule"}]
    kc = cluster(server)
    kc.taint_node("n1", Taint("makeroom.io/x", "v", TaintEffect.NO_SCHEDULE))
    kc.taint_node("n1", Taint("makeroom.io/x", "w", TaintEffect.NO_SCHEDULE))
    assert [t["key"] for t in server.objects["/api/v1/nodes/n1"]["spec"]["taints"]] == [
        "other",
        "makeroom.io/x",
    ]
    kc.untaint_node("n1", "makeroom.io/x")
    assert server.objects["/api/v1/nodes/n1"]["spec"]["taints"] == [{"key": "other", "effect": "NoSchedule"}]
    kc.add_toleration(f"{NS}/p", Toleration("k", "Exists", "", "NoSchedule"))
    kc.add_toleration(f"{NS}/p", Toleration("k", "Exists", "", "NoSchedule"))
    tolerations = server.objects[pod_path("p")]["spec"]["tolerations"]
    assert len(tolerations) == 2 and tolerations[1] == {
        "key": "k",
        "operator": "Exists",
        "effect": "NoSchedule",
    }


def test_nothing_is_written_when_not_the_leader() -> None:
    server = seeded()
    leader = [False]
    kc = cluster(server, leader)
    before = len(server.calls)
    verbs: list[Callable[[], None]] = [
        lambda: kc.evict(f"{NS}/a"),
        lambda: kc.annotate_pod(f"{NS}/a", {"x": "1"}),
        lambda: kc.scale("apps/web", 2),
        lambda: kc.nominate(f"{NS}/p", "g1"),
        lambda: kc.emit_event(ObjectKind.POD, f"{NS}/p", Reason.RELOCATING, "m"),
    ]
    for verb in verbs:
        with pytest.raises(NotLeaderError):
            verb()
    assert len(server.calls) == before


def test_nomination_status_then_taint_fallback_when_the_cluster_clears_it() -> None:
    server = seeded()
    server.drop_status_fields.add("nominatedNodeName")  # a cluster that does not keep it
    kc = cluster(server, nomination=Nomination(NominationMode.AUTO, clear_limit=2, settle=0.0))
    kc.nominate(f"{NS}/p", "g1")
    assert "nominatedNodeName" not in server.objects[pod_path("p")]["status"]
    kc.nominate(f"{NS}/p", "g1")  # cleared twice: fall back to a reservation taint
    assert f"{NS}/p" in kc.nomination.fallback
    kc.nominate(f"{NS}/p", "g1")
    taints = server.objects["/api/v1/nodes/g1"]["spec"]["taints"]
    assert taints == [{"key": RESERVED_FOR, "value": "uid-p", "effect": "NoSchedule"}]
    assert {
        "key": RESERVED_FOR,
        "operator": "Equal",
        "value": "uid-p",
        "effect": "NoSchedule",
    } in server.objects[pod_path("p")]["spec"]["tolerations"]
    for inf in kc.cache.informers.values():
        inf.relist()
    assert kc.snapshot().pods[f"{NS}/p"].nominated_node == "g1"  # the controller sees the room held
    kc.nominate(f"{NS}/p", None)
    assert not server.objects["/api/v1/nodes/g1"]["spec"].get("taints")


def test_orphan_reservation_taints_are_released() -> None:
    server = seeded()
    server.objects["/api/v1/nodes/g1"]["spec"]["taints"] = [
        {"key": RESERVED_FOR, "value": "uid-gone", "effect": "NoSchedule"}
    ]
    kc = cluster(server)
    assert kc.release_orphan_reservations() == 1
    assert not server.objects["/api/v1/nodes/g1"]["spec"].get("taints")


def test_the_snapshot_is_the_cluster_as_it_is() -> None:
    """Scope is the controller's (controller/scope.py): the adapter changes no pod to express it."""
    server = seeded()
    state = cluster(server).snapshot()
    assert state.pods[f"{NS}/p"].unschedulable_since is not None
    assert "makeroom.io/do-not-move" not in state.pods[f"{NS}/a"].annotations


def test_event_names_the_object() -> None:
    server = seeded()
    kc = cluster(server, identity="me")
    kc.emit_event(ObjectKind.POD, f"{NS}/a", Reason.MOVING, "moving to make room for p on n1")
    (ev,) = [o for p, o in server.objects.items() if "/events/" in p]
    assert ev["involvedObject"] == {
        "kind": "Pod",
        "name": "a",
        "namespace": NS,
        "apiVersion": "v1",
        "uid": "uid-a",
    }
    assert ev["reportingComponent"] == "makeroom" and ev["reportingInstance"] == "me"
    assert "make room for p" in ev["message"]


def test_dry_run_changes_nothing_and_records_the_actions(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)  # the log lines are part of it (a key clash would raise here)
    server = seeded()
    dry = DryRunCluster(cluster(server))
    before = len(server.calls)
    dry.evict(f"{NS}/a")
    dry.annotate_pod(f"{NS}/p", {"x": "1"})
    dry.nominate(f"{NS}/p", "g1")
    dry.scale("apps/web", 3)
    dry.emit_event(ObjectKind.POD, f"{NS}/p", Reason.RELOCATING, "m")
    assert len(server.calls) == before
    assert [w.verb for w in dry.would] == ["evict", "annotate", "nominate", "scale", "event"]
    assert sum(r.getMessage() == "dry run: would act" for r in caplog.records) == 5
    assert f"{NS}/p" in dry.snapshot().pods


# --- logs, metrics, health ---------------------------------------------------------------------------
def test_json_logs_carry_the_extra_fields() -> None:
    record = logging.LogRecord("makeroom.controller", logging.INFO, "f", 1, "relocation started", None, None)
    record.pod = "ns/p"
    record.victims = 3
    out = json.loads(JsonFormatter().format(record))
    assert out["msg"] == "relocation started" and out["pod"] == "ns/p" and out["victims"] == 3
    assert out["level"] == "info" and out["logger"] == "makeroom.controller"


def test_health_and_metrics_endpoints() -> None:
    metrics = Metrics()
    ready = threading.Event()
    server = HealthServer(0, metrics, lambda: True, ready.is_set, host="127.0.0.1")
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(base + "/readyz", timeout=5)
        assert info.value.code == 503
        ready.set()
        assert urllib.request.urlopen(base + "/readyz", timeout=5).status == 200
        assert urllib.request.urlopen(base + "/healthz", timeout=5).status == 200
        metrics.relocations.labels(outcome="started").inc()
        text = urllib.request.urlopen(base + "/metrics", timeout=5).read().decode()
        for name in (
            'makeroom_relocation_outcomes_total{outcome="started"} 1.0',
            "makeroom_controller_moves_total",
            "makeroom_controller_reconcile_seconds_bucket",
            'makeroom_controller_plan_seconds_bucket{kind="consolidation",le="0.005"}',
            "makeroom_relocation_pending_pods",
            "makeroom_relocation_in_flight",
        ):
            assert name in text
    finally:
        server.stop()


def test_a_deployment_scaled_by_an_hpa_has_its_replicas_owned() -> None:
    server = seeded()
    server.put(
        f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers/web",
        {
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": NS},
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                "maxReplicas": 5,
            },
        },
    )
    kc = cluster(server)
    assert kc.snapshot().workloads[f"{NS}/web"].replicas_owner == "HorizontalPodAutoscaler/web"
