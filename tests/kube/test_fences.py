"""Stale decisions and stalls on the Kubernetes side (issue 12, items 3 and 4): the leader fenced on
every HTTP attempt of a write, a reservation taint never replaced by a second one, the StatefulSet
that shares a Deployment's name never scaled, and a node group nothing names never stopping the loop
(against the in-memory API server)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from makeroom.controller import ConsolidationConfig, ControllerConfig, Strategy
from makeroom.controller.port import ConflictError
from makeroom.kube.cache import Cache
from makeroom.kube.client import Api, KubeError, NotLeaderError, RateLimiter, Transport
from makeroom.kube.cluster import KubeCluster, Nomination
from makeroom.kube.leader import LeaderElector
from makeroom.kube.options import NominationMode
from makeroom.kube.runner import Runner, RunOptions
from makeroom.snapshot import GroupConfig, GroupSpec
from tests.builders.kube import NS, namespace, node, pod, pod_path
from tests.kube.fake import FakeApiServer

GROUPS = GroupConfig((GroupSpec("cpu", 1, 2), GroupSpec("gpu", 1, 1)))


class Hanging(Transport):
    """An API server that never answers: each attempt takes its whole timeout, on a virtual clock."""

    def __init__(self, now: list[float]) -> None:
        self.now = now
        self.attempts: list[tuple[str, float, float]] = []  # (path, sent at, timeout)

    def request(
        self, method: str, path: str, body: Any, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, bytes]:
        self.attempts.append((path, self.now[0], timeout))
        self.now[0] += timeout
        raise TimeoutError("read timed out")

    def stream(self, path: str, timeout: float) -> tuple[int, Iterator[bytes], Callable[[], None]]:
        raise NotImplementedError


def elector_on(now: list[float]) -> LeaderElector:
    """A leader that renewed its 15 s lease (10 s renew deadline) at t=0, and then nothing."""
    elector = LeaderElector(Api(FakeApiServer()), NS, "makeroom", "me", clock=lambda: now[0])
    elector._renewed = 0.0
    return elector


def test_each_attempt_of_a_write_is_fenced_by_the_lease() -> None:
    """Before: the leader was asked once, then the client's retry loop went on: five attempts of 30 s,
    the last sent 122 s after the lease could no longer be renewed (up to ~150 s with its answer)."""
    now = [0.0]
    transport = Hanging(now)
    elector = elector_on(now)
    api = Api(transport, RateLimiter(0, 1), sleep=lambda s: now.__setitem__(0, now[0] + s))
    writer = api.fenced(elector.remaining)
    with pytest.raises(KubeError):
        writer.request("POST", f"/api/v1/namespaces/{NS}/pods/a/eviction", body={})
    assert [(sent, timeout) for _, sent, timeout in transport.attempts] == [(0.0, 10.0)]
    assert now[0] <= elector.renew_deadline  # nothing in flight once another replica may lead
    with pytest.raises(NotLeaderError):  # the lease gone: not even one attempt
        writer.request("POST", f"/api/v1/namespaces/{NS}/pods/a/eviction", body={})
    assert len(transport.attempts) == 1


def test_retries_go_on_only_while_the_lease_holds() -> None:
    server = FakeApiServer()
    server.put(pod_path("a"), pod("a", "n1"))
    now = [0.0]
    elector = elector_on(now)
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        now[0] += s

    writer = Api(server, RateLimiter(0, 1), sleep=sleep, backoff=2.0).fenced(elector.remaining)
    server.fail_next = [503, 503]
    writer.request("POST", f"/api/v1/namespaces/{NS}/pods/a/eviction", body={})  # retried in time
    assert sleeps == [2.0, 4.0]
    server.put(pod_path("a"), pod("a", "n1"))
    server.fail_next = [503, 503, 503]
    with pytest.raises(KubeError) as info:  # 6 s in: a wait of 8 s would outlast the lease
        writer.request("POST", f"/api/v1/namespaces/{NS}/pods/a/eviction", body={})
    assert info.value.status == 503 and sleeps == [2.0, 4.0, 2.0]
    assert pod_path("a") in server.objects  # never evicted after the lease ran out


def test_the_runner_fences_the_adapter_s_writes_by_its_lease() -> None:
    server = FakeApiServer()
    api = Api(server, RateLimiter(0, 1), sleep=lambda s: None)
    r = Runner(api, RunOptions(groups=GROUPS, metrics_port=None, leader_elect=True))
    assert r.elector is not None and r.kube.writer.fence is not None
    assert r.lease_left() == 0.0  # not the leader yet
    r.elector._renewed = r.elector.clock()
    assert 0 < r.lease_left() <= r.elector.renew_deadline
    r.stop.set()
    assert r.lease_left() == 0.0  # stopping: no write goes out any more


# --- one reservation per node -------------------------------------------------------------------------
def two_waiting() -> FakeApiServer:
    server = FakeApiServer()
    server.put("/api/v1/nodes/g1", node("g1", "gpu", cpu="8"))
    for name in ("p1", "p2"):
        server.put(pod_path(name), pod(name, None, cpu="3", priority=100))
    return server


def taint_mode(server: FakeApiServer) -> KubeCluster:
    api = Api(server, RateLimiter(0, 1), sleep=lambda s: None)
    cache = Cache(api, GROUPS)
    for inf in cache.informers.values():
        inf.relist()
    return KubeCluster(api, cache, nomination=Nomination(NominationMode.TAINT))


def reservations(server: FakeApiServer) -> list[str]:
    return [t["value"] for t in server.objects["/api/v1/nodes/g1"]["spec"].get("taints") or ()]


def test_a_second_reservation_never_replaces_the_first_pod_s_taint() -> None:
    """Before: the second relocation's taint replaced the first's, and the first pod, whose room it
    was, could no longer schedule there."""
    server = two_waiting()
    kc = taint_mode(server)
    kc.nominate(f"{NS}/p1", "g1")
    with pytest.raises(ConflictError, match="reserved for another waiting pod"):
        kc.nominate(f"{NS}/p2", "g1")
    assert reservations(server) == ["uid-p1"]
    kc.nominate(f"{NS}/p2", None)  # p2's relocation rolled back: p1's reservation stays
    assert reservations(server) == ["uid-p1"]
    bound = pod("p1", "g1", cpu="3", priority=100)  # p1 took its room
    server.put(pod_path("p1"), bound)
    for inf in kc.cache.informers.values():
        inf.relist()
    kc.nominate(f"{NS}/p2", "g1")  # a reservation whose pod is bound is no one's now
    assert reservations(server) == ["uid-p2"]


# --- wrong kinds -------------------------------------------------------------------------------------
def statefulset_and_lookalike() -> FakeApiServer:
    """seed-1 in small, the GPU node's low-priority pods those of a StatefulSet ``web``, beside a
    Deployment that happens to be called ``web`` too."""
    server = FakeApiServer()
    server.put(*namespace())
    server.put("/api/v1/nodes/cpu-0", node("cpu-0", "cpu"))
    gpu = node("gpu-0", "gpu")
    gpu["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    server.put("/api/v1/nodes/gpu-0", gpu)
    for i in range(2):
        w = pod(f"web-{i}", "gpu-0", cpu="1500m")
        w["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "controller": True, "uid": "ss"}
        ]
        w["metadata"]["labels"] = {"app": "web"}
        server.put(pod_path(f"web-{i}"), w)
    p = pod("p", None, cpu="3", priority=100)
    p["metadata"]["labels"] = {"app": "big"}
    p["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "big-h2", "controller": True}]
    p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    server.put(pod_path("p"), p)
    server.put(
        f"/apis/apps/v1/namespaces/{NS}/deployments/web",
        {
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": NS, "uid": "d"},
            "spec": {"replicas": 2},
        },
    )
    return server


def runner(server: FakeApiServer, groups: GroupConfig, strategy: Strategy = Strategy.MIGRATE) -> Runner:
    api = Api(server, RateLimiter(0, 1), sleep=lambda s: None)
    config = ControllerConfig(strategy=strategy, consolidation=ConsolidationConfig(enabled=False))
    r = Runner(api, RunOptions(config=config, groups=groups, metrics_port=None, leader_elect=False))
    for inf in r.cache.informers.values():
        inf.relist()
    return r


def test_migrate_never_scales_a_deployment_for_a_statefulset_s_pods() -> None:
    """Before issue 11's owner check: PATCH deployments/web/scale, a 404 (or the lookalike scaled)."""
    server = statefulset_and_lookalike()
    r = runner(server, GroupConfig((GroupSpec("cpu", 1, 1), GroupSpec("gpu", 1, 1))))
    now = [1_767_225_600.0]
    r.kube.now = lambda: now[0]  # type: ignore[method-assign]
    r.once()
    assert [p for m, p, _ in server.calls if p.endswith("/scale")] == []
    assert server.objects[f"/apis/apps/v1/namespaces/{NS}/deployments/web"]["spec"]["replicas"] == 2
    (record,) = [o for path, o in server.objects.items() if "/relocations/" in path]
    assert record["spec"]["surge"] == {}  # moved by eviction, within its budget
    for _ in range(3):  # the StatefulSet's pods leave by eviction (migrate falls back, and says so)
        now[0] += 10.0
        r.once()
    evictions = [p for m, p, _ in server.calls if m == "POST" and p.endswith("/eviction")]
    assert evictions and all("/pods/web-" in p for p in evictions)
    said = [b for m, p, b in server.calls if m == "POST" and p.endswith("/events")]
    assert any(e["reason"] == "EvictedBeforeReplaced" and "not a Deployment" in e["message"] for e in said)


# --- unknown groups -----------------------------------------------------------------------------------
def test_a_node_of_a_group_nothing_names_does_not_stop_the_controller(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before: every state build failed (no min or max for the group), so no relocation anywhere."""
    server = statefulset_and_lookalike()
    server.put("/api/v1/nodes/spot-0", node("spot-0", "spot"))  # not in --groups, no autoscaler status
    r = runner(server, GroupConfig((GroupSpec("cpu", 1, 1), GroupSpec("gpu", 1, 1))), Strategy.EVICT)
    with caplog.at_level(logging.WARNING, logger="makeroom.kube.cache"):
        r.once()
        r.cache.informers["Node"].relist()  # a change: the state is built again
        r.once()
    state = r.port.snapshot()
    spot = state.groups["spot"]
    assert (spot.min, spot.max) == (1, 1)  # fixed at the nodes it has
    assert [o for path, o in server.objects.items() if "/relocations/" in path]  # planning went on
    warned = [rec for rec in caplog.records if "neither --groups nor the autoscaler" in rec.getMessage()]
    assert len(warned) == 1 and warned[0].__dict__["group"] == "spot"
