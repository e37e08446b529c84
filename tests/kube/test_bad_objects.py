"""Objects of the cluster that break an input rule never stop `makeroom run`: a pod that asks for more
than any node could hold (10Pi of memory, which the API server accepts) fits nowhere, a node that
claims that much stays in the plan, a garbled autoscaler status is said in the log; every other pod
is still made room for, and `Runner.once()` never raises."""

from __future__ import annotations

import logging

import pytest

from makeroom.kube.cache import PRIORITIES
from makeroom.snapshot.fields import UNFIT
from tests.builders.kube import NS, pod, pod_path
from tests.kube.fake import FakeApiServer
from tests.kube.test_runner import cluster, runner


def huge(name: str, node: str | None) -> dict[str, object]:
    p = pod(name, node, priority=1000)
    p["metadata"]["labels"] = {"app": "huge", "pod-template-hash": "h9"}
    p["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "huge-h9", "controller": True}]
    p["spec"]["containers"][0]["resources"]["requests"]["memory"] = "10Pi"
    return p


def relocating(server: FakeApiServer) -> bool:
    """Whether makeroom started a relocation for the pod ``p`` (its record, in makeroom's own store)."""
    return any(
        "/relocations/" in path and o["spec"]["pod"].endswith("/p") for path, o in server.objects.items()
    )


def test_a_pod_asking_10pi_fits_nowhere_and_the_others_are_still_served() -> None:
    server = cluster()
    server.put(pod_path("huge"), huge("huge", None))
    r = runner(server)
    r.once()  # used to raise OverflowError out of the loop
    assert relocating(server)
    state = r.cache.state()
    assert state.pods[f"{NS}/huge"].spec.requests["memory"] == UNFIT
    assert not state.feasible(state.pods[f"{NS}/huge"]).any()


def test_a_bound_pod_asking_10pi_fills_its_node_and_nothing_crashes() -> None:
    server = cluster()
    server.put(pod_path("huge"), huge("huge", "cpu-0"))  # a nodeName written by hand
    r = runner(server)
    r.once()
    state = r.cache.state()
    assert f"{NS}/huge" in state.pods
    assert not relocating(server)  # the CPU node it squats on has no room for the victims any more


def test_a_node_claiming_10pi_stays_in_the_plan() -> None:
    server = cluster()
    cpu = server.objects["/api/v1/nodes/cpu-0"]
    cpu["status"]["allocatable"]["memory"] = "10Pi"
    r = runner(server)
    r.once()
    assert relocating(server)
    assert "cpu-0" in r.cache.state().nodes


def test_a_garbled_autoscaler_status_is_logged_and_the_groups_file_used(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = cluster()
    server.put(
        "/api/v1/namespaces/kube-system/configmaps/cluster-autoscaler-status",
        {
            "kind": "ConfigMap",
            "metadata": {"name": "cluster-autoscaler-status", "namespace": "kube-system"},
            "data": {"status": "%%% garbled %%%"},
        },
    )
    r = runner(server)
    with caplog.at_level(logging.WARNING, logger="makeroom.kube.cache"):
        r.once()
    assert relocating(server)
    problems = [rec.__dict__.get("problem", "") for rec in caplog.records]
    assert any("data.status: expected the cluster-autoscaler status" in p for p in problems), problems
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="makeroom.kube.cache"):
        r.cache.informers["Pod"].relist()
        r.cache.state()
    assert not caplog.records  # said once, not at every build


def test_a_pod_turning_invalid_between_builds_is_left_out_of_the_incremental_update() -> None:
    server = cluster()
    r = runner(server)
    r.cache.state()
    server.put(
        pod_path("w0"),
        {**pod("w0", "gpu-0", cpu="2"), "spec": {**pod("w0", "gpu-0")["spec"], "priority": "high"}},
    )
    r.cache.informers["Pod"].relist()
    state = r.cache.state()  # used to raise InputError, which stopped every relocation
    assert f"{NS}/w0" not in state.pods
    assert r.cache.builds["incremental"] == 1


def test_many_pods_asking_10pi_on_one_node_do_not_wrap_its_room_around() -> None:
    server = cluster()
    for i in range(12):  # 12 x 1Pi is past int64: the node would look empty
        server.put(pod_path(f"huge{i}"), huge(f"huge{i}", "cpu-0"))
    r = runner(server)
    r.once()
    state = r.cache.state()
    slot, memory = state.slot_of["cpu-0"], state.index.position("memory")
    assert state.alloc[slot, memory] - state.used[slot, memory] < 0  # full, not wrapped to "free"
    assert not relocating(server)
    for i in range(12, 16):  # more, between full builds (the pod-by-pod update): 16 x 1Pi wraps too
        server.put(pod_path(f"huge{i}"), huge(f"huge{i}", "cpu-0"))
    r.cache.informers["Pod"].relist()
    state = r.cache.state()
    assert state.alloc[slot, memory] - state.used[slot, memory] < 0


def test_the_controller_reads_the_priority_expander_s_configmap() -> None:
    """Issue 22: the controller plans with the autoscaler's configured priorities, as plan does."""
    server = cluster()
    r = runner(server)
    assert r.cache.state().expander_priorities is None  # none there: the groups' order
    server.put(
        "/api/v1/namespaces/kube-system/configmaps/cluster-autoscaler-priority-expander",
        {
            "kind": "ConfigMap",
            "metadata": {"name": "cluster-autoscaler-priority-expander", "namespace": "kube-system"},
            "data": {"priorities": "50:\n  - gpu\n10:\n  - .*\n"},
        },
    )
    r.cache.informers[PRIORITIES].relist()
    assert r.cache.state().expander_priorities == {"cpu": 10, "gpu": 50}


def test_a_pod_bound_to_a_node_that_is_gone_is_left_out_and_the_others_are_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A pod whose node was deleted (until the pod garbage collector removes it), or one a tenant wrote
    a made-up nodeName into, used to stop planning cluster-wide ("the cluster cannot be planned on":
    the project's CI lost a relocation to a pod left from another test on a deleted node)."""
    server = cluster()
    server.put(pod_path("orphan"), pod("orphan", "n-gone-ddd37", cpu="2"))
    r = runner(server)
    with caplog.at_level(logging.WARNING, logger="makeroom.kube.cache"):
        r.once()
    assert relocating(server)
    assert f"{NS}/orphan" not in r.cache.state().pods
    said = [str(rec.__dict__.get("problem")) for rec in caplog.records]
    assert said == [
        f"the watch cache: Pod {NS}/orphan.spec.nodeName: bound to 'n-gone-ddd37', a node the cluster "
        "does not have (gone, or not seen yet): left out"
    ]


def test_a_pod_on_a_node_not_seen_yet_is_left_out_until_the_node_comes() -> None:
    """The pod watch may show a pod bound to a new node before the node watch shows the node."""
    server = cluster()
    r = runner(server)
    r.cache.state()
    server.put(pod_path("early"), pod("early", "cpu-9", cpu="1"))
    r.cache.informers["Pod"].relist()
    state = r.cache.state()  # pod by pod: left out, not a full build each time such a pod changes
    assert f"{NS}/early" not in state.pods
    assert r.cache.builds == {"full": 1, "incremental": 1}
    node = {**server.objects["/api/v1/nodes/cpu-0"]}
    node["metadata"] = {**node["metadata"], "name": "cpu-9"}
    server.put("/api/v1/nodes/cpu-9", node)
    r.cache.informers["Node"].relist()
    assert r.cache.state().pods[f"{NS}/early"].node == "cpu-9"
