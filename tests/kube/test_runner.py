"""The loop of `makeroom run` on the in-memory API server: it acts as the leader, not as a standby,
and a dry run writes nothing."""

from __future__ import annotations

from makeroom.controller import ControllerConfig
from makeroom.kube.client import Api, RateLimiter
from makeroom.kube.dryrun import DryRunCluster
from makeroom.kube.runner import Runner, RunOptions
from makeroom.snapshot import GroupConfig, GroupSpec
from tests.kube.fake import FakeApiServer
from tests.kube.test_adapter import NS, node, pod, pod_path

GROUPS = GroupConfig((GroupSpec("cpu", 1, 1), GroupSpec("gpu", 1, 1)))


def cluster() -> FakeApiServer:
    """seed-1 in small: a GPU node whose CPU two low-priority pods hold, room for them on the CPU node,
    and a pending GPU pod."""
    server = FakeApiServer()
    server.put("/api/v1/nodes/cpu-0", node("cpu-0", "cpu"))
    gpu = node("gpu-0", "gpu")
    gpu["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    server.put("/api/v1/nodes/gpu-0", gpu)
    for i in range(2):
        server.put(pod_path(f"w{i}"), pod(f"w{i}", "gpu-0", cpu="2"))
    p = pod("p", None, cpu="3", priority=100)
    p["metadata"]["labels"] = {"app": "big", "pod-template-hash": "h2"}
    p["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "big-h2", "controller": True}]
    p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    server.put(pod_path("p"), p)
    server.put(
        f"/apis/apps/v1/namespaces/{NS}/deployments/web",
        {"kind": "Deployment", "metadata": {"name": "web", "namespace": NS}, "spec": {"replicas": 2}},
    )
    return server


def runner(server: FakeApiServer, **kw: object) -> Runner:
    api = Api(server, RateLimiter(0, 1), sleep=lambda s: None)
    opts = RunOptions(
        config=ControllerConfig(strategy="evict", consolidation=False),
        groups=GROUPS,
        metrics_port=None,
        leader_elect=False,
        **kw,  # type: ignore[arg-type]
    )
    r = Runner(api, opts)
    for inf in r.cache.informers.values():
        inf.relist()
    return r


def writes(server: FakeApiServer) -> list[tuple[str, str]]:
    return [(m, p) for m, p, _ in server.calls if m != "GET"]


def test_the_leader_starts_a_relocation() -> None:
    server = cluster()
    r = runner(server)
    r.once()
    annotations = server.objects[pod_path("p")]["metadata"].get("annotations") or {}
    assert "makeroom.io/relocation" in annotations
    assert r.metrics.relocations.labels(outcome="started")._value.get() == 1
    assert any(p.endswith("/eviction") for _, p in writes(server))


def test_a_standby_changes_nothing() -> None:
    server = cluster()
    r = runner(server)
    r.may_act = lambda: False  # type: ignore[method-assign]
    r.kube.may_act = r.may_act
    r.once()
    assert writes(server) == []
    assert r.controller is None


def test_a_dry_run_writes_nothing_and_reports_the_plan() -> None:
    server = cluster()
    r = runner(server, dry_run=True)
    r.once()
    assert writes(server) == []
    assert isinstance(r.port, DryRunCluster)
    assert {w.verb for w in r.port.would} >= {"annotate", "nominate", "evict"}
    assert r.last_plan is not None and [p.node for p in r.last_plan.placements] == ["gpu-0"]
