"""keep_buffer on the in-memory API server: a CapacityBuffer and its PodTemplate in makeroom's own
namespace, pinned to the group, applied idempotently, removed at 0; a cluster without the API (or
without the RBAC for it) is one log line and BuffersUnavailableError; not the leader, nothing; the
cleanup deletes makeroom's buffers and only them."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from makeroom.controller.port import BuffersUnavailableError, ClusterError
from makeroom.kube import buffers
from makeroom.kube.cache import Cache
from makeroom.kube.cleanup import CleanupOptions, clean_up
from makeroom.kube.client import Api, NotLeaderError, RateLimiter
from makeroom.kube.cluster import KubeCluster
from makeroom.kube.dryrun import DryRunCluster
from makeroom.model import Resources
from makeroom.snapshot import GROUP_LABELS, GroupConfig, GroupSpec
from tests.builders.kube import node
from tests.kube.fake import FakeApiServer

HOME = "makeroom-system"
BUFFERS = f"/apis/{buffers.API_VERSION}/namespaces/{HOME}/capacitybuffers"
TEMPLATES = f"/api/v1/namespaces/{HOME}/podtemplates"
ONE = Resources.parse({"cpu": "1500m", "memory": "2Gi"})


def cluster(server: FakeApiServer, leader: list[bool] | None = None) -> KubeCluster:
    api = Api(server, RateLimiter(0, 1), sleep=lambda _s: None)
    cache = Cache(api, GroupConfig((GroupSpec("cpu", 1, 3), GroupSpec("gpu", 0, 1))))
    for inf in cache.informers.values():
        inf.relist()
    flag = leader if leader is not None else [True]
    return KubeCluster(api, cache, records_namespace=HOME, may_act=lambda: flag[0])


def with_nodes() -> FakeApiServer:
    server = FakeApiServer()
    server.put("/api/v1/nodes/cpu-0", node("cpu-0", "cpu"))
    server.put("/api/v1/nodes/gpu-0", node("gpu-0", "gpu"))
    return server


def stored(server: FakeApiServer, collection: str) -> dict[str, dict[str, Any]]:
    return {p.rpartition("/")[2]: o for p, o in server.objects.items() if p.startswith(collection + "/")}


def test_a_buffer_and_its_template_pin_the_group_in_makeroom_s_namespace() -> None:
    server = with_nodes()
    cluster(server).keep_buffer("cpu", ONE, 2)
    (name,) = stored(server, BUFFERS)
    buffer = stored(server, BUFFERS)[name]
    template = stored(server, TEMPLATES)[name]
    assert buffer["spec"] == {
        "provisioningStrategy": "buffer.x-k8s.io/active-capacity",
        "podTemplateRef": {"name": name},
        "replicas": 2,
    }
    for obj in (buffer, template):
        assert obj["metadata"]["namespace"] == HOME
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "makeroom"
        assert obj["metadata"]["annotations"] == {"makeroom.io/node-group": "cpu"}
    spec = template["template"]["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # The label that names the group on its nodes now, and no other: a GPU node is never the room.
    assert terms["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "makeroom.io/group", "operator": "In", "values": ["cpu"]}]}
    ]
    assert "tolerations" not in spec and "priorityClassName" not in spec
    (container,) = spec["containers"]
    assert container["resources"] == {"requests": {"cpu": "1500m", "memory": "2Gi"}}
    # Every write is server-side apply by makeroom, and nothing outside its namespace is written.
    writes = [(m, p) for m, p, _ in server.calls if m != "GET"]
    assert writes and all(m == "PATCH" and "fieldManager=makeroom" in p for m, p in writes)
    assert all(f"/namespaces/{HOME}/" in p for _, p in writes)


def test_applying_again_is_idempotent_and_a_new_count_replaces_the_old() -> None:
    server = with_nodes()
    kc = cluster(server)
    kc.keep_buffer("cpu", ONE, 2)
    before = {p: {k: v for k, v in o.items() if k != "metadata"} for p, o in server.objects.items()}
    kc.keep_buffer("cpu", ONE, 2)
    after = {p: {k: v for k, v in o.items() if k != "metadata"} for p, o in server.objects.items()}
    assert after == before
    kc.keep_buffer("cpu", Resources.parse({"cpu": "2"}), 3)
    ((_, buffer),) = stored(server, BUFFERS).items()
    ((_, template),) = stored(server, TEMPLATES).items()
    assert buffer["spec"]["replicas"] == 3
    assert template["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "2"}


def test_zero_removes_both_and_again_is_no_error() -> None:
    server = with_nodes()
    kc = cluster(server)
    kc.keep_buffer("cpu", ONE, 1)
    kc.keep_buffer("gpu", Resources.parse({"cpu": "1", "nvidia.com/gpu": "1"}), 1)
    kc.keep_buffer("cpu", ONE, 0)
    assert set(stored(server, BUFFERS)) == set(stored(server, TEMPLATES)) == {buffers.object_name("gpu")}
    kc.keep_buffer("cpu", ONE, 0)
    deletes = [p for m, p, _ in server.calls if m == "DELETE"]
    # The buffer goes before its template, so the autoscaler never reads one without the other.
    assert deletes[:2] == [f"{BUFFERS}/makeroom-cpu", f"{TEMPLATES}/makeroom-cpu"]


def test_a_gpu_request_has_its_limit_and_a_group_without_nodes_matches_any_group_label() -> None:
    server = FakeApiServer()
    cluster(server).keep_buffer("gpu", Resources.parse({"cpu": "1", "nvidia.com/gpu": "1"}), 1)
    ((_, template),) = stored(server, TEMPLATES).items()
    spec = template["template"]["spec"]
    assert spec["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1"},
    }
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    keys = [t["matchExpressions"][0]["key"] for t in terms["nodeSelectorTerms"]]
    assert keys == list(GROUP_LABELS)
    assert all(t["matchExpressions"][0]["values"] == ["gpu"] for t in terms["nodeSelectorTerms"])


def test_a_group_name_that_is_no_valid_object_name_gets_one() -> None:
    server = FakeApiServer()
    kc = cluster(server)
    kc.keep_buffer("Spot_CPU", ONE, 1)
    kc.keep_buffer("spot-cpu", ONE, 1)
    names = set(stored(server, BUFFERS))
    assert len(names) == 2 and "makeroom-spot-cpu" in names
    assert all(buffers.object_name(g) in names for g in ("Spot_CPU", "spot-cpu"))


def test_without_the_api_one_log_line_and_an_error_the_keeper_recognises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = with_nodes()
    server.refused[f"/apis/{buffers.GROUP}/"] = 404
    kc = cluster(server)
    with caplog.at_level(logging.WARNING, logger="makeroom.kube"):
        for _ in range(3):
            with pytest.raises(BuffersUnavailableError, match="capacity-buffer-controller-enabled"):
                kc.keep_buffer("cpu", ONE, 2)
        kc.keep_buffer("cpu", ONE, 0)  # nothing to remove: what was asked
    assert issubclass(BuffersUnavailableError, ClusterError)
    said = [r for r in caplog.records if "no CapacityBuffer" in r.getMessage()]
    assert len(said) == 1
    assert server.objects.keys() == with_nodes().objects.keys()  # no template left behind


def test_without_rbac_for_buffers_it_is_unavailable_too() -> None:
    server = with_nodes()
    server.refused[BUFFERS] = 403
    with pytest.raises(BuffersUnavailableError, match=r"capacityBuffers\.enabled"):
        cluster(server).keep_buffer("cpu", ONE, 1)


def test_transient_failures_are_retried() -> None:
    server = with_nodes()
    kc = cluster(server)
    server.fail_next = [503, 0]
    kc.keep_buffer("cpu", ONE, 1)
    assert set(stored(server, BUFFERS)) == set(stored(server, TEMPLATES)) == {"makeroom-cpu"}


def test_not_the_leader_writes_nothing() -> None:
    server = with_nodes()
    with pytest.raises(NotLeaderError):
        cluster(server, leader=[False]).keep_buffer("cpu", ONE, 1)
    assert not [c for c in server.calls if c[0] != "GET"]


def test_a_buffer_of_nothing_is_refused_before_any_call() -> None:
    server = with_nodes()
    kc = cluster(server)
    calls = len(server.calls)
    with pytest.raises(ValueError, match="-1"):
        kc.keep_buffer("cpu", ONE, -1)
    with pytest.raises(ValueError, match="request nothing"):
        kc.keep_buffer("cpu", Resources(), 1)
    assert len(server.calls) == calls


def test_dry_run_only_says_it() -> None:
    server = with_nodes()
    dry = DryRunCluster(cluster(server))
    dry.keep_buffer("cpu", ONE, 2)
    assert [(w.verb, w.target, w.detail["replicas"]) for w in dry.would] == [("keep-buffer", "cpu", 2)]
    assert not [c for c in server.calls if c[0] != "GET"]


def test_the_cleanup_deletes_makeroom_s_buffers_and_no_one_else_s() -> None:
    server = with_nodes()
    kc = cluster(server)
    kc.keep_buffer("cpu", ONE, 2)
    kc.keep_buffer("gpu", Resources.parse({"cpu": "1", "nvidia.com/gpu": "1"}), 1)
    theirs = {"apiVersion": buffers.API_VERSION, "kind": "CapacityBuffer", "metadata": {"name": "team-a"}}
    server.put(f"{BUFFERS}/team-a", theirs)
    server.put(f"{TEMPLATES}/team-a", {"kind": "PodTemplate", "metadata": {"name": "team-a"}})
    lines: list[str] = []
    opts = CleanupOptions(records_namespace=HOME, lease_namespace=HOME)
    api = Api(server, RateLimiter(0, 1), sleep=lambda _s: None)
    result = clean_up(api, opts, lines.append, sleep=lambda _s: None)
    assert result.buffers == ["makeroom-cpu", "makeroom-gpu"]
    assert set(stored(server, BUFFERS)) == set(stored(server, TEMPLATES)) == {"team-a"}
    assert f"deleted the CapacityBuffer {HOME}/makeroom-cpu and its PodTemplate" in lines
    again = clean_up(api, opts, sleep=lambda _s: None)
    assert again.actions == 0 and again.buffers == []


def test_the_cleanup_of_a_cluster_without_buffers_finds_none() -> None:
    server = with_nodes()
    server.refused[f"/apis/{buffers.GROUP}/"] = 404
    api = Api(server, RateLimiter(0, 1), sleep=lambda _s: None)
    result = clean_up(
        api, CleanupOptions(records_namespace=HOME, lease_namespace=HOME), sleep=lambda _s: None
    )
    assert result.buffers == [] and result.passes == 1
