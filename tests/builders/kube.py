"""Kubernetes API objects as the API server returns them (dicts), for the kube and snapshot tests."""

from __future__ import annotations

from typing import Any

NS = "apps"


def node(name: str, group: str = "cpu", cpu: str = "4") -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"makeroom.io/group": group}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "MemoryPressure", "status": "False"},
            ],
        },
    }


def pod(name: str, node_name: str | None, cpu: str = "1", priority: int = 0, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "c",
                "image": "x",
                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                "env": [{"name": "A"}],
            }
        ],
        "priority": priority,
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "volumes": [{"name": "token", "projected": {}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    conditions = [{"type": "Ready", "status": "True" if node_name else "False", "lastProbeTime": None}]
    if not node_name:
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/2 nodes are available",
                "lastTransitionTime": "2026-01-01T00:00:10Z",
            }
        )
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "h1"},
            "annotations": {"a": "b"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-h1", "controller": True, "uid": "rs"}],
            "managedFields": [{"manager": "kube"}],
        },
        "spec": spec,
        "status": {
            "phase": "Running" if node_name else "Pending",
            "conditions": conditions,
            "hostIP": "1.2.3.4",
        },
        **extra,
    }


def namespace(name: str = NS) -> tuple[str, dict[str, Any]]:
    """A Namespace's path and object, with the name label the API server sets on every namespace
    (makeroom judges no namespace it has not seen)."""
    meta = {"name": name, "labels": {"kubernetes.io/metadata.name": name}}
    return f"/api/v1/namespaces/{name}", {"kind": "Namespace", "metadata": meta}


def pod_path(name: str) -> str:
    return f"/api/v1/namespaces/{NS}/pods/{name}"
