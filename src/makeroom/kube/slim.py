"""Slim copies of API objects: only the fields that ``snapshot.state_from_objects`` reads, with the
parts that pods of one template share (containers, tolerations, selectors, labels, owners) stored once.

So 150,000 pods fit in memory: a slim pod is a few small dicts whose values are mostly shared. The
output is still a Kubernetes object (a dict of the same shape), so the one conversion in
``makeroom.snapshot`` reads it unchanged, and a test checks that it plans as the full object does.
Shared parts are never mutated (nothing in makeroom mutates what it reads).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

from makeroom.snapshot.placement import VOLUME_ZONE_LABELS

JSON = dict[str, Any]


class Interner:
    """One copy of each distinct value (by its JSON text) and of each string."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def value(self, v: Any) -> Any:
        if v is None or isinstance(v, bool | int | float):
            return v
        if isinstance(v, str):
            return sys.intern(v) if len(v) <= 64 else v
        key = json.dumps(v, sort_keys=True, separators=(",", ":"))
        found = self._values.get(key)
        if found is None:
            found = self._values[key] = v
        return found

    def __len__(self) -> int:
        return len(self._values)


def _pick(obj: Mapping[str, Any], keys: tuple[str, ...]) -> JSON:
    return {k: obj[k] for k in keys if obj.get(k) is not None}


_POD_SPEC_KEYS = (
    "overhead",
    "priority",
    "preemptionPolicy",
    "nodeSelector",
    "tolerations",
    "priorityClassName",
    "terminationGracePeriodSeconds",
    "topologySpreadConstraints",
)
_AFFINITY_KEYS = ("nodeAffinity", "podAffinity", "podAntiAffinity")


def _host_ports(container: Mapping[str, Any]) -> list[JSON]:
    """Only the ports a pod holds on its node (those with a hostPort)."""
    return [
        _pick(p, ("hostPort", "protocol", "hostIP"))
        for p in container.get("ports") or ()
        if isinstance(p, dict) and p.get("hostPort")
    ]


def _container(c: Mapping[str, Any], keys: tuple[str, ...]) -> JSON:
    out = _pick(c, keys)
    ports = _host_ports(c)
    if ports:
        out["ports"] = ports
    return out


def slim_pod_spec(spec: Mapping[str, Any], intern: Interner) -> JSON:
    """What planning reads of a pod's spec (a pod's, or a Deployment's template)."""
    template: JSON = _pick(spec, _POD_SPEC_KEYS)
    template["containers"] = [
        {"resources": c.get("resources") or {}, **_container(c, ())} for c in spec.get("containers") or ()
    ]
    inits = [
        _container(c, ("resources", "restartPolicy"))
        for c in spec.get("initContainers") or ()
        if isinstance(c, dict)
    ]
    if inits:
        template["initContainers"] = inits
    affinity = _pick(spec.get("affinity") or {}, _AFFINITY_KEYS)
    if affinity:
        template["affinity"] = affinity
    s: JSON = dict(intern.value(template))
    # Volumes: whether the pod has local storage, and its claims' names (a StatefulSet's pods each have
    # their own: kept beside the shared template, not interned).
    local: list[JSON] = [
        {k: {} for k in ("emptyDir", "hostPath") if k in v}
        for v in spec.get("volumes") or ()
        if isinstance(v, dict) and ("emptyDir" in v or "hostPath" in v)
    ]
    claims: list[JSON] = [
        {"persistentVolumeClaim": _pick(v["persistentVolumeClaim"], ("claimName",))}
        for v in spec.get("volumes") or ()
        if isinstance(v, dict) and isinstance(v.get("persistentVolumeClaim"), dict)
    ]
    if claims:
        s["volumes"] = local[:1] + claims
    elif local:
        s["volumes"] = intern.value(local[:1])
    return s


def slim_pod(obj: Mapping[str, Any], intern: Interner) -> JSON | None:
    status = obj.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return None  # holds no room; the snapshot leaves it out too
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    owners = [
        {
            "kind": r.get("kind"),
            "name": r.get("name"),
            "uid": r.get("uid"),
            "controller": bool(r.get("controller")),
        }
        for r in meta.get("ownerReferences") or ()
    ]
    m: JSON = {
        "name": meta.get("name"),
        "namespace": intern.value(meta.get("namespace") or "default"),
        "uid": meta.get("uid"),
        "creationTimestamp": meta.get("creationTimestamp"),
        "labels": intern.value(meta.get("labels") or {}),
        "annotations": intern.value(meta.get("annotations") or {}),
        "ownerReferences": intern.value(owners),
    }
    if meta.get("deletionTimestamp"):
        m["deletionTimestamp"] = meta["deletionTimestamp"]
    s = slim_pod_spec(spec, intern)
    if spec.get("nodeName"):
        s["nodeName"] = intern.value(spec["nodeName"])
    if spec.get("schedulingGates"):
        s["schedulingGates"] = [{"name": "gated"}]  # that there are gates is all planning needs
    conditions = [
        _pick(c, ("type", "status", "reason", "lastTransitionTime"))
        if c.get("type") == "PodScheduled"
        else {"type": c.get("type"), "status": c.get("status")}
        for c in status.get("conditions") or ()
        if c.get("type") in ("Ready", "PodScheduled")
    ]
    st: JSON = {"conditions": intern.value(conditions)}
    if status.get("phase"):
        st["phase"] = intern.value(status["phase"])
    if status.get("nominatedNodeName"):
        st["nominatedNodeName"] = status["nominatedNodeName"]
    return {"kind": "Pod", "metadata": m, "spec": s, "status": st}


_KEEP_NODE = ("makeroom.io/", "cluster-autoscaler.kubernetes.io/")


def slim_node(obj: Mapping[str, Any], intern: Interner) -> JSON:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    st: JSON = {
        "conditions": intern.value(
            [
                {"type": "Ready", "status": c.get("status")}
                for c in status.get("conditions") or ()
                if c.get("type") == "Ready"
            ]
        )
    }
    if status.get("allocatable"):
        st["allocatable"] = intern.value(status["allocatable"])
    elif status.get("capacity"):
        st["capacity"] = intern.value(status["capacity"])
    return {
        "kind": "Node",
        "metadata": {
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "labels": intern.value(meta.get("labels") or {}),
            "annotations": {
                k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(_KEEP_NODE)
            },
            "creationTimestamp": meta.get("creationTimestamp"),
        },
        "spec": intern.value(_pick(spec, ("taints", "unschedulable"))),
        "status": st,
    }


def slim_pdb(obj: Mapping[str, Any], intern: Interner) -> JSON:
    meta = obj.get("metadata") or {}
    return {
        "kind": "PodDisruptionBudget",
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace") or "default"},
        "spec": _pick(obj.get("spec") or {}, ("minAvailable", "maxUnavailable", "selector")),
    }


def slim_deployment(obj: Mapping[str, Any], intern: Interner) -> JSON:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    return {
        "kind": "Deployment",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace") or "default",
            "uid": meta.get("uid"),
            "annotations": {
                k: v
                for k, v in (meta.get("annotations") or {}).items()
                if not k.startswith("kubectl.kubernetes.io/")
            },
        },
        # The template: the shape of the workload's pods while it has none (scaled to zero, as a GPU
        # workload before its burst), which headroom keeps room for.
        "spec": {
            "replicas": spec.get("replicas", 1),
            "template": {"spec": slim_pod_spec((spec.get("template") or {}).get("spec") or {}, intern)},
        },
    }


def slim_hpa(obj: Mapping[str, Any], intern: Interner) -> JSON:
    """Only which Deployment it scales: an HPA owns that workload's replica count."""
    meta = obj.get("metadata") or {}
    target = (obj.get("spec") or {}).get("scaleTargetRef") or {}
    return {
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace") or "default"},
        "spec": {"scaleTargetRef": {"kind": target.get("kind"), "name": target.get("name")}},
    }


def slim_configmap(obj: Mapping[str, Any], intern: Interner) -> JSON:
    meta = obj.get("metadata") or {}
    return {
        "kind": "ConfigMap",
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
        "data": dict(obj.get("data") or {}),
    }


def slim_nodepool(obj: Mapping[str, Any], intern: Interner) -> JSON:
    """What a NodePool says of the nodes it launches (snapshot/nodepools.py reads it)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    return {
        "kind": "NodePool",
        "metadata": {"name": meta.get("name")},
        "spec": {
            **_pick(spec, ("weight", "limits", "disruption")),
            "template": {
                "metadata": {"labels": (template.get("metadata") or {}).get("labels") or {}},
                "spec": _pick(template.get("spec") or {}, ("taints", "requirements")),
            },
        },
    }


def slim_nodeclaim(obj: Mapping[str, Any], intern: Interner) -> JSON:
    """A NodeClaim's pool, type and node: a node coming up until its node registers."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    m: JSON = {"name": meta.get("name"), "labels": intern.value(meta.get("labels") or {})}
    if meta.get("deletionTimestamp"):
        m["deletionTimestamp"] = meta["deletionTimestamp"]
    return {
        "kind": "NodeClaim",
        "metadata": m,
        "spec": _pick(obj.get("spec") or {}, ("taints", "requirements")),
        "status": _pick(status, ("nodeName", "allocatable")),
    }


def slim_namespace(obj: Mapping[str, Any], intern: Interner) -> JSON:
    """Its name and labels: the scope's namespace selectors read them (only an admin sets them)."""
    meta = obj.get("metadata") or {}
    return {
        "kind": "Namespace",
        "metadata": {"name": meta.get("name"), "labels": dict(meta.get("labels") or {})},
    }


def slim_claim(obj: Mapping[str, Any], intern: Interner) -> JSON:
    """A PersistentVolumeClaim: the volume it is bound to, and whether it is bound."""
    meta = obj.get("metadata") or {}
    return {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": meta.get("name"), "namespace": intern.value(meta.get("namespace") or "default")},
        "spec": _pick(obj.get("spec") or {}, ("volumeName",)),
        "status": _pick(obj.get("status") or {}, ("phase",)),
    }


def slim_volume(obj: Mapping[str, Any], intern: Interner) -> JSON:
    """A PersistentVolume: where it can be reached (its required node affinity, its zone labels)."""
    meta = obj.get("metadata") or {}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k in VOLUME_ZONE_LABELS}
    return {
        "kind": "PersistentVolume",
        "metadata": {"name": meta.get("name"), "labels": intern.value(labels)},
        "spec": intern.value(_pick(obj.get("spec") or {}, ("nodeAffinity",))),
    }


SLIMMERS: dict[str, Callable[[Mapping[str, Any], Interner], JSON | None]] = {
    "Pod": slim_pod,
    "Node": slim_node,
    "PodDisruptionBudget": slim_pdb,
    "Deployment": slim_deployment,
    "HorizontalPodAutoscaler": slim_hpa,
    "ConfigMap": slim_configmap,
    "NodePool": slim_nodepool,
    "NodeClaim": slim_nodeclaim,
    "Namespace": slim_namespace,
    "PersistentVolumeClaim": slim_claim,
    "PersistentVolume": slim_volume,
}


def is_unschedulable(pod: Mapping[str, Any] | None) -> bool:
    """The scheduler found no node for it (PodScheduled=False, Unschedulable) and it is not bound."""
    if pod is None or (pod.get("spec") or {}).get("nodeName"):
        return False
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )
