"""The cluster's objects, read once (no watch): for ``makeroom snapshot`` and ``plan --kubeconfig``."""

from __future__ import annotations

from typing import Any

from makeroom.kube.cache import NOT_IN_STATE, resources
from makeroom.kube.client import Api
from makeroom.kube.slim import SLIMMERS, Interner

JSON = dict[str, Any]


def read_objects(api: Api, *, slim: bool = False, autoscaler_namespace: str = "kube-system") -> list[JSON]:
    """Nodes, pods, PodDisruptionBudgets, Deployments and HorizontalPodAutoscalers, then the
    autoscaler's status ConfigMap if present: full objects (without managedFields) for a dump a person
    may read, or the slim ones the watch cache keeps."""
    interner = Interner()
    out: list[JSON] = []
    versions = {
        "Node": "v1",
        "Pod": "v1",
        "PodDisruptionBudget": "policy/v1",
        "Deployment": "apps/v1",
        "HorizontalPodAutoscaler": "autoscaling/v2",
        "ConfigMap": "v1",
    }
    for r in resources(autoscaler_namespace):
        if r.kind in NOT_IN_STATE:
            continue  # not a planning input (the controller's scope reads them)
        query = {"fieldSelector": r.field_selector} if r.field_selector else {}
        for items, _ in api.list_pages(r.path, query):
            for item in items:
                obj = {"apiVersion": versions[r.kind], "kind": r.kind, **item}
                if slim:
                    s = SLIMMERS[r.kind](obj, interner)
                    if s is not None:
                        out.append(s)
                else:
                    (obj.get("metadata") or {}).pop("managedFields", None)
                    out.append(obj)
    return out


def as_list(objects: list[JSON]) -> JSON:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": objects}
