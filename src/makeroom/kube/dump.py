"""The cluster's objects, read once (no watch): for ``makeroom snapshot`` and ``plan --kubeconfig``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from makeroom.kube.cache import OPTIONAL_STATUSES, Resource, resources
from makeroom.kube.client import Api, KubeError
from makeroom.kube.slim import SLIMMERS, Interner

JSON = dict[str, Any]


def read_objects(api: Api, *, slim: bool = False, autoscaler_namespace: str = "kube-system") -> list[JSON]:
    """Every kind the watch cache keeps (nodes, pods, PodDisruptionBudgets, Deployments,
    HorizontalPodAutoscalers, the autoscaler's status ConfigMap if present, Karpenter's kinds if served,
    namespaces, claims and volumes): full objects (without managedFields) for a dump a person may read,
    or the slim ones the watch cache keeps."""
    interner = Interner()
    out: list[JSON] = []
    versions = {
        "Node": "v1",
        "Pod": "v1",
        "PodDisruptionBudget": "policy/v1",
        "Deployment": "apps/v1",
        "HorizontalPodAutoscaler": "autoscaling/v2",
        "ConfigMap": "v1",
        "NodePool": "karpenter.sh/v1",
        "NodeClaim": "karpenter.sh/v1",
        "Namespace": "v1",
        "PersistentVolumeClaim": "v1",
        "PersistentVolume": "v1",
    }
    for r in resources(autoscaler_namespace):
        query = {"fieldSelector": r.field_selector} if r.field_selector else {}
        for items, _ in _pages(api, r, query):
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


def _pages(api: Api, r: Resource, query: dict[str, str]) -> Iterator[tuple[list[JSON], str]]:
    """The pages of a list; none of an optional kind the cluster does not serve (or may not be read)."""
    try:
        yield from api.list_pages(r.path, query)
    except KubeError as exc:
        if not (r.optional and exc.status in OPTIONAL_STATUSES):
            raise


def as_list(objects: list[JSON]) -> JSON:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": objects}
