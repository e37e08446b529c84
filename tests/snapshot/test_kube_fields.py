"""The fields the controller needs from a live cluster: a Deployment's replicas and annotations, when
the scheduler gave up on a pod, and a node's annotations."""

from __future__ import annotations

from typing import Any

import pytest

from makeroom.errors import InputError
from makeroom.snapshot import pod_from_object, state_from_objects

GROUPS_NODE = {
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {"makeroom.io/group": "cpu"}, "annotations": {"makeroom.io/x": "1"}},
    "status": {
        "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}
STATUS = {
    "kind": "ConfigMap",
    "metadata": {"name": "cluster-autoscaler-status", "namespace": "kube-system"},
    "data": {"status": "nodeGroups: []\n"},  # the autoscaler manages no group: sizes are fixed
}


def pod(
    name: str, node: str | None, conditions: list[dict[str, Any]] | None = None, ns: str = "default"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"app": "web", "pod-template-hash": "abc"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-abc", "controller": True}],
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": spec,
        "status": {"conditions": conditions or []},
    }


def deployment(replicas: int, annotations: dict[str, str], ns: str = "default") -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns, "annotations": annotations},
        "spec": {"replicas": replicas},
    }


def build(*objs: dict[str, Any]) -> Any:
    return state_from_objects([GROUPS_NODE, *objs], autoscaler_status=STATUS)


def test_deployment_gives_replicas_and_annotations() -> None:
    state = build(pod("a", "n1"), pod("b", "n1"), deployment(5, {"makeroom.io/surge": "{}"}))
    w = state.workloads["web"]
    assert w.replicas == 5
    assert w.annotations == {"makeroom.io/surge": "{}"}


def test_deployment_in_other_namespace_keys_like_its_pods() -> None:
    state = build(pod("a", "n1", ns="prod"), deployment(3, {}, ns="prod"), deployment(9, {}))
    assert state.workloads["prod/web"].replicas == 3


def test_without_deployment_replicas_are_the_pods() -> None:
    state = build(pod("a", "n1"), pod("b", "n1"))
    assert state.workloads["web"].replicas == 2
    assert state.workloads["web"].annotations == {}


def test_unschedulable_since_from_pod_scheduled_condition() -> None:
    cond = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "lastTransitionTime": "2026-01-01T00:01:00Z",
    }
    state = build(pod("a", None, [cond]), pod("b", None), pod("c", "n1", [{**cond, "status": "True"}]))
    since = state.pods["default/a"].unschedulable_since
    assert since is not None and since == state.pods["default/a"].created_at + 60
    assert state.pods["default/b"].unschedulable_since is None  # the scheduler has not tried it
    assert state.pods["default/c"].unschedulable_since is None


def test_node_annotations() -> None:
    assert build().nodes["n1"].annotations == {"makeroom.io/x": "1"}


def test_pod_from_object_is_the_pod_of_a_full_build() -> None:
    cond = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "lastTransitionTime": "2026-01-01T00:01:00Z",
    }
    obj = pod("a", None, [cond], ns="prod")
    one = pod_from_object(obj)
    full = build(obj).pods["prod/a"]
    assert one is not None
    assert (one.key, one.spec, one.workload, one.unschedulable_since, one.created_at) == (
        full.key,
        full.spec,
        full.workload,
        full.unschedulable_since,
        full.created_at,
    )
    finished = {**obj, "status": {"phase": "Succeeded"}}
    assert pod_from_object(finished) is None
    broken = pod("b", None)
    broken["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(InputError):
        pod_from_object(broken)
