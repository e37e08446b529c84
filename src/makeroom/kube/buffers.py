"""The autoscalers' own room: a ``CapacityBuffer`` (``autoscaling.x-k8s.io/v1beta1``, served by the
cluster-autoscaler 1.34+ with ``--capacity-buffer-controller-enabled`` and
``--capacity-buffer-pod-injection-enabled``, and by Karpenter 1.14+ with the ``CapacityBuffer`` feature
gate) and the PodTemplate it refers to, both in makeroom's own namespace and labelled as makeroom's.

The autoscaler turns an active buffer into that many fake pods of the template, which it adds to the
pending pods it scales up for and keeps on nodes when it scales down; nothing is ever scheduled. So the
template only has to say what one pod needs and where it may go: the group's nodes, by the label that
names the group on them (``snapshot.GROUP_LABELS``), with no toleration. It is a valid pod of the
``restricted`` Pod Security level, since the autoscaler checks it with a server dry run of a pod
create in this namespace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from makeroom.kube.records import MANAGED_BY, valid_name
from makeroom.model import Resources
from makeroom.model.quantity import format_quantity
from makeroom.snapshot import GROUP_LABELS

GROUP = "autoscaling.x-k8s.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
PLURAL = "capacitybuffers"
ACTIVE = "buffer.x-k8s.io/active-capacity"
"""The provisioning strategy both autoscalers act on (and the CRD's default)."""
GROUP_ANNOTATION = "makeroom.io/node-group"
"""The group a buffer keeps room in, as given (a group's name need not be a valid label value)."""
LABELS = {**MANAGED_BY, "app.kubernetes.io/component": "capacity-buffer"}
SELECTOR = ",".join(f"{k}={v}" for k, v in LABELS.items())
IMAGE = "registry.k8s.io/pause:3.10"
"""Never pulled: the autoscaler only simulates the template's pods."""
NOT_EXTENDED = ("cpu", "memory", "ephemeral-storage", "pods")

JSON = dict[str, Any]


def object_name(group: str) -> str:
    """One name for the group's buffer and its template."""
    return valid_name(f"makeroom-{group}", group)


def collection(namespace: str) -> str:
    return f"/apis/{API_VERSION}/namespaces/{namespace}/{PLURAL}"


def templates(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/podtemplates"


def buffer_path(namespace: str, group: str) -> str:
    return f"{collection(namespace)}/{object_name(group)}"


def template_path(namespace: str, group: str) -> str:
    return f"{templates(namespace)}/{object_name(group)}"


def is_makeroom_s(obj: Mapping[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in LABELS.items())


def group_keys(group: str, nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """The label keys that name ``group`` on its nodes now; every key makeroom reads a group from when
    it has no node (a group at zero), so that any of its nodes' templates matches."""
    found: set[str] = set()
    for obj in nodes:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        key = next((k for k in GROUP_LABELS if labels.get(k)), None)
        if key is not None and labels[key] == group:
            found.add(key)
    return sorted(found) if found else list(GROUP_LABELS)


def _metadata(namespace: str, group: str) -> JSON:
    return {
        "name": object_name(group),
        "namespace": namespace,
        "labels": dict(LABELS),
        "annotations": {GROUP_ANNOTATION: group},
    }


def _resources(requests: Resources) -> JSON:
    wanted = {k: format_quantity(v, k) for k, v in requests.items() if k != "pods" and v > 0}
    # Kubernetes takes an extended resource (a GPU) only with a limit equal to its request.
    extended = {k: v for k, v in wanted.items() if k not in NOT_EXTENDED and not k.startswith("hugepages-")}
    return {"requests": wanted, **({"limits": extended} if extended else {})}


def pod_template(namespace: str, group: str, requests: Resources, keys: Iterable[str]) -> JSON:
    # One term per key: the terms are ORed, the group is on its nodes under one of them.
    terms = [{"matchExpressions": [{"key": k, "operator": "In", "values": [group]}]} for k in keys]
    required = {"nodeSelectorTerms": terms}
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": _metadata(namespace, group),
        "template": {
            "metadata": {"labels": dict(LABELS)},
            "spec": {
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}},
                "automountServiceAccountToken": False,
                "terminationGracePeriodSeconds": 0,
                "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [
                    {
                        "name": "room",
                        "image": IMAGE,
                        "resources": _resources(requests),
                        "securityContext": {
                            "runAsUser": 65535,
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }
                ],
            },
        },
    }


def capacity_buffer(namespace: str, group: str, replicas: int) -> JSON:
    return {
        "apiVersion": API_VERSION,
        "kind": "CapacityBuffer",
        "metadata": _metadata(namespace, group),
        "spec": {
            "provisioningStrategy": ACTIVE,
            "podTemplateRef": {"name": object_name(group)},
            "replicas": replicas,
        },
    }
