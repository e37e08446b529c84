"""The Kubernetes adapter next to Karpenter: NodePools and NodeClaims in the watch cache and in a
snapshot (read-only; none where Karpenter is not served or may not be read), and the room for a pod
held by a nomination and a reservation taint, since Karpenter does not count a nomination's hold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from makeroom.kube.cache import Cache
from makeroom.kube.client import Api, RateLimiter
from makeroom.kube.cluster import KubeCluster
from makeroom.kube.dump import read_objects
from makeroom.model import AutoscalerKind
from makeroom.model.objects import RESERVED_FOR
from makeroom.snapshot import GroupConfig, GroupSpec
from tests.builders.kube import NS, node, pod, pod_path
from tests.kube.fake import FakeApiServer

POOLS = "/apis/karpenter.sh/v1/nodepools"
CLAIMS = "/apis/karpenter.sh/v1/nodeclaims"


class Unserved(FakeApiServer):
    """An API server without Karpenter's kinds (404), or that does not let makeroom read them (403)."""

    def __init__(self, status: int) -> None:
        super().__init__()
        self.status = status

    def _serve(self, method: str, p: str, query: Mapping[str, list[str]], body: Any) -> tuple[int, Any]:
        if self.status != 200 and p.startswith("/apis/karpenter.sh/"):
            return self.status, {"kind": "Status", "code": self.status, "message": "no"}
        return super()._serve(method, p, query, body)


def karpenter_node(name: str, pool: str) -> dict[str, Any]:
    n = node(name, group=pool)
    n["metadata"]["labels"] = {
        "karpenter.sh/nodepool": pool,
        "node.kubernetes.io/instance-type": f"{pool}-4x",
        "eks-node-viewer/instance-price": "0.2",
    }
    return n


def served(server: FakeApiServer) -> FakeApiServer:
    server.put("/api/v1/nodes/c1", karpenter_node("c1", "cpu"))
    server.put("/api/v1/nodes/g1", karpenter_node("g1", "gpu"))
    server.put(pod_path("a"), pod("a", "g1"))
    server.put(pod_path("p"), pod("p", None, cpu="3", priority=100))
    for name, weight in (("cpu", 50), ("gpu", 10)):
        server.put(
            f"{POOLS}/{name}",
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": name, "managedFields": [{"manager": "x"}]},
                "spec": {
                    "weight": weight,
                    "limits": {"nodes": "2"},
                    "template": {"spec": {"requirements": []}},
                },
                "status": {"resources": {"cpu": "4"}},
            },
        )
    server.put(
        f"{CLAIMS}/cpu-abc",
        {
            "kind": "NodeClaim",
            "metadata": {"name": "cpu-abc", "labels": {"karpenter.sh/nodepool": "cpu"}},
            "spec": {"requirements": []},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
        },
    )
    return server


def cache_of(server: FakeApiServer, groups: GroupConfig | None = None) -> Cache:
    cache = Cache(Api(server, RateLimiter(0, 1), sleep=lambda s: None), groups)
    for inf in cache.informers.values():
        inf.relist()
    return cache


def test_the_cache_reads_nodepools_and_nodeclaims() -> None:
    cache = cache_of(served(FakeApiServer()))
    assert cache.synced
    state = cache.state()
    assert state.autoscaler is AutoscalerKind.KARPENTER
    assert (state.groups["cpu"].weight, state.groups["cpu"].max) == (50, 2)
    assert not state.nodes["cpu-abc"].ready  # a NodeClaim still coming up
    slim = cache.informers["NodePool"].objects()[0]
    assert "managedFields" not in slim["metadata"] and "status" not in slim


@pytest.mark.parametrize("status", [404, 403])
def test_without_karpenter_the_cache_syncs_and_the_cluster_autoscaler_runs(status: int) -> None:
    server = Unserved(status)
    server.put("/api/v1/nodes/n1", node("n1"))
    cache = cache_of(server, GroupConfig((GroupSpec("cpu", 1, 2),)))
    assert cache.synced
    assert cache.informers["NodePool"].absent and cache.informers["NodeClaim"].absent
    assert cache.state().autoscaler is AutoscalerKind.CLUSTER_AUTOSCALER


def test_an_optional_kind_served_later_is_read_at_the_next_list() -> None:
    server = Unserved(404)
    cache = cache_of(server)
    assert cache.informers["NodePool"].objects() == []
    server.status = 200  # Karpenter installed
    served(server)
    cache.informers["NodePool"].relist()
    assert not cache.informers["NodePool"].absent
    assert {o["metadata"]["name"] for o in cache.informers["NodePool"].objects()} == {"cpu", "gpu"}


def test_a_watch_event_of_a_nodepool_changes_the_state() -> None:
    server = served(FakeApiServer())
    cache = cache_of(server)
    changed = {
        "kind": "NodePool",
        "metadata": {"name": "gpu", "resourceVersion": "900"},
        "spec": {"weight": 90, "template": {"spec": {}}},
    }
    cache.informers["NodePool"].apply({"type": "MODIFIED", "object": changed})
    assert cache.state().groups["gpu"].weight == 90


def test_a_snapshot_reads_them_and_leaves_them_out_when_not_served() -> None:
    kinds = {o["kind"] for o in read_objects(Api(served(FakeApiServer()), RateLimiter(0, 1)))}
    assert {"NodePool", "NodeClaim"} <= kinds
    objs = read_objects(Api(Unserved(403), RateLimiter(0, 1)))
    assert not {o["kind"] for o in objs} & {"NodePool", "NodeClaim"}
    full = [
        o for o in read_objects(Api(served(FakeApiServer()), RateLimiter(0, 1))) if o["kind"] == "NodePool"
    ]
    assert full[0]["apiVersion"] == "karpenter.sh/v1" and "managedFields" not in full[0]["metadata"]


def test_under_karpenter_the_room_is_held_by_a_nomination_and_a_reservation_taint() -> None:
    server = served(FakeApiServer())
    api = Api(server, RateLimiter(0, 1), sleep=lambda s: None)
    cache = cache_of(server)
    kc = KubeCluster(api, cache)
    kc.nominate(f"{NS}/p", "g1")
    assert server.objects[pod_path("p")]["status"]["nominatedNodeName"] == "g1"
    assert server.objects["/api/v1/nodes/g1"]["spec"]["taints"] == [
        {"key": RESERVED_FOR, "value": "uid-p", "effect": "NoSchedule"}
    ]
    assert {
        "key": RESERVED_FOR,
        "operator": "Equal",
        "value": "uid-p",
        "effect": "NoSchedule",
    } in server.objects[pod_path("p")]["spec"]["tolerations"]
    for inf in cache.informers.values():
        inf.relist()
    kc.nominate(f"{NS}/p", None)
    assert not server.objects["/api/v1/nodes/g1"]["spec"].get("taints")


def test_without_karpenter_a_nomination_is_only_a_nomination() -> None:
    server = Unserved(404)
    server.put("/api/v1/nodes/n1", node("n1"))
    server.put(pod_path("p"), pod("p", None, cpu="3", priority=100))
    api = Api(server, RateLimiter(0, 1), sleep=lambda s: None)
    kc = KubeCluster(api, cache_of(server, GroupConfig((GroupSpec("cpu", 1, 2),))))
    kc.nominate(f"{NS}/p", "n1")
    assert server.objects[pod_path("p")]["status"]["nominatedNodeName"] == "n1"
    assert not server.objects["/api/v1/nodes/n1"]["spec"].get("taints")
