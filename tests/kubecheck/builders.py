"""Tiny raw-object builders for the checker's own tests."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def node(
    name: str,
    zone: str | None = None,
    *,
    labels: dict[str, str] | None = None,
    alloc: dict[str, str] | None = None,
    taints: list[Obj] | None = None,
    unschedulable: bool = False,
) -> Obj:
    all_labels = {HOST: name, **({ZONE: zone} if zone else {}), **(labels or {})}
    spec: Obj = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": spec,
        "status": {"allocatable": alloc or {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def pod(
    name: str = "p",
    *,
    on: str | None = None,
    ns: str = "default",
    labels: dict[str, str] | None = None,
    requests: dict[str, str] | None = None,
    **spec: Any,
) -> Obj:
    container: Obj = {"name": "c", "resources": {"requests": requests} if requests else {}}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {"containers": [container], **({"nodeName": on} if on else {}), **spec},
        "status": {},
    }


def namespace(name: str, **labels: str) -> Obj:
    return {"kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def term(key: str, selector: Obj | None, **extra: Any) -> Obj:
    return {"topologyKey": key, "labelSelector": selector, **extra}


def affinity(kind: str, *terms: Obj) -> Obj:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def spread(key: str, selector: Obj | None, max_skew: int = 1, **extra: Any) -> Obj:
    return {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": selector,
        **extra,
    }
