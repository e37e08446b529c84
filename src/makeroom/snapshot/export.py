"""The other way round: a ClusterState as Kubernetes objects (plain dicts), as a dump would hold them.

For tests and benchmarks of ``state_from_objects``, and to show a simulated cluster to kubectl users.
Only the fields that ``state_from_objects`` reads are written.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from makeroom.model import OwnerKind, Pod, format_quantity
from makeroom.model.objects import NODE_NAME_FIELD, Node, NodeSelectorTerm, Workload
from makeroom.model.resources import Resources
from makeroom.model.state import ClusterState

_EPOCH = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
_KIND = {
    OwnerKind.REPLICA_SET: "ReplicaSet",
    OwnerKind.STATEFUL_SET: "StatefulSet",
    OwnerKind.DAEMON_SET: "DaemonSet",
    OwnerKind.JOB: "Job",
    OwnerKind.NODE: "Node",
}


def _time(seconds: float) -> str:
    return datetime.fromtimestamp(_EPOCH + seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _quantities(r: Resources) -> dict[str, str]:
    return {k: format_quantity(v, k) for k, v in r.items()}


def template_hash(workload: str) -> str:
    return hashlib.sha1(workload.encode()).hexdigest()[:10]


def node_object(node: Node) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if node.taints:
        spec["taints"] = [{"key": t.key, "value": t.value, "effect": t.effect.value} for t in node.taints]
    if node.unschedulable:
        spec["unschedulable"] = True
    alloc = _quantities(node.allocatable)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": {k: v for k, v in node.labels.items() if k != NODE_NAME_FIELD},
            "creationTimestamp": _time(node.created_at),
        },
        "spec": spec,
        "status": {
            "allocatable": alloc,
            "capacity": alloc,
            "conditions": [{"type": "Ready", "status": "True" if node.ready else "False"}],
        },
    }


def pod_object(pod: Pod) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": pod.name,
        "namespace": pod.namespace,
        "labels": {**pod.labels},
        "creationTimestamp": _time(pod.created_at),
    }
    if pod.annotations:
        meta["annotations"] = dict(pod.annotations)
    if pod.terminating:
        meta["deletionTimestamp"] = _time(pod.created_at)
    kind = _KIND.get(pod.owner_kind)
    if kind is not None and pod.workload is not None:
        owner = pod.workload.split("/")[-1]
        if pod.owner_kind == OwnerKind.REPLICA_SET:
            h = template_hash(owner)
            meta["labels"].setdefault("pod-template-hash", h)
            owner = f"{owner}-{h}"
        meta["labels"].setdefault("app", pod.workload.split("/")[-1])
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": owner, "controller": True}]
    s = pod.spec
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"requests": _quantities(s.requests)}}],
        "priority": s.priority,
        "preemptionPolicy": s.preemption_policy.value,
    }
    if s.priority_class:
        spec["priorityClassName"] = s.priority_class
    if s.node_selector:
        spec["nodeSelector"] = dict(s.node_selector)
    if s.tolerations:
        spec["tolerations"] = [
            {
                k: v
                for k, v in (
                    ("key", t.key),
                    ("operator", t.operator),
                    ("value", t.value),
                    ("effect", t.effect),
                )
                if v
            }
            for t in s.tolerations
        ]
    if s.required_affinity:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [_term(term) for term in s.required_affinity]
                }
            }
        }
    if s.local_storage:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    if pod.node is not None:
        spec["nodeName"] = pod.node
    status: dict[str, Any] = {"phase": "Running" if pod.node else "Pending"}
    status["conditions"] = [{"type": "Ready", "status": "True" if pod.ready else "False"}]
    if pod.nominated_node:
        status["nominatedNodeName"] = pod.nominated_node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def pdb_object(w: Workload) -> dict[str, Any]:
    assert w.pdb is not None
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": w.name.split("/")[-1]}}}
    if w.pdb.min_available is not None:
        spec["minAvailable"] = w.pdb.min_available
    else:
        spec["maxUnavailable"] = w.pdb.max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": w.name.split("/")[-1], "namespace": w.namespace},
        "spec": spec,
    }


def objects_of_state(state: ClusterState) -> list[dict[str, Any]]:
    """Nodes, then pods, then the PodDisruptionBudgets of the state's workloads."""
    out = [node_object(n) for n in state.nodes.values()]
    out += [pod_object(p) for p in state.pods.values()]
    out += [pdb_object(w) for w in state.workloads.values() if w.pdb is not None]
    return out


def autoscaler_status_object(state: ClusterState) -> dict[str, Any]:
    """The cluster-autoscaler-status ConfigMap (the YAML status of 1.30+) for the state's groups."""
    lines = ["autoscalerStatus: Running", "nodeGroups:"]
    for g in state.groups.values():
        size = len(state.nodes_of(g.name))
        lines += [
            f"- name: {g.name}",
            "  health:",
            "    status: Healthy",
            f"    cloudProviderTarget: {size}",
            f"    minSize: {g.min}",
            f"    maxSize: {g.max}",
        ]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cluster-autoscaler-status", "namespace": "kube-system"},
        "data": {"status": "\n".join(lines) + "\n"},
    }


def _term(term: NodeSelectorTerm) -> dict[str, Any]:
    """A node selector term as the pod had it: its matchFields (the node's name) apart."""
    out: dict[str, Any] = {}
    for key, r_key in (("matchExpressions", False), ("matchFields", True)):
        reqs = [
            {"key": "metadata.name" if r_key else r.key, "operator": r.operator, "values": list(r.values)}
            for r in term
            if (r.key == NODE_NAME_FIELD) == r_key
        ]
        if reqs:
            out[key] = reqs
    return out
