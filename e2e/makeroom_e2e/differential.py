"""Run a batch of generated scheduling cases (constraint_cases) on one control plane and observe what
the real kube-scheduler does with each case's new pod: the node it binds it to, or Pending with
PodScheduled=False (Unschedulable).

Order of a batch: namespaces, nodes, volumes and claims; wait until every node is Ready with no
not-ready taint (and a cordoned one has its unschedulable taint) and every claim is Bound; the bound
pods (by nodeName); a read of every object (the state every verdict is computed on); then all the
new pods at once, each read back as the API server stored it (defaults, merged matchLabelKeys,
default tolerations); then a short poll of one list call until each new pod is bound or marked
unschedulable. Cases never influence each other (see
constraint_cases), so the new pods may be scheduled in any order.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .cluster import E2E_LABEL, ControlPlane
from .constraint_cases import NEW_POD, Case

Obj = dict[str, Any]
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_THREADS = 12


@dataclass
class Observed:
    """What one batch showed."""

    objects: list[Obj]  # every Node, Pod, Namespace, PV and PVC before the new pods, as the API has them
    created: dict[str, Obj]  # case name -> its new pod as the API server stored it
    bound_to: dict[str, str | None]  # case name -> the node kube-scheduler bound it to, or None (Pending)
    seconds: dict[str, float] = field(default_factory=dict)  # phase -> wall time


def _client(cp: ControlPlane) -> Any:
    """An ApiClient whose connection pool serves the creating threads."""
    from kubernetes import client

    configuration = copy.deepcopy(cp.api.configuration)
    configuration.connection_pool_maxsize = _THREADS + 4
    return client.ApiClient(configuration)


def _raw(call: Callable[..., Any], kind: str, **kwargs: Any) -> list[Obj]:
    response = call(_preload_content=False, **kwargs)
    items = json.loads(response.data)["items"]
    return [{"kind": kind, **item} for item in items]


def _parallel(fn: Callable[[Obj], Any], items: Iterable[Obj]) -> list[Any]:
    with ThreadPoolExecutor(_THREADS) as pool:
        return list(pool.map(fn, items))


def read_all(core: Any) -> list[Obj]:
    """Every object a scheduling verdict reads, as plain JSON."""
    return [
        *_raw(core.list_namespace, "Namespace"),
        *_raw(core.list_node, "Node"),
        *_raw(core.list_persistent_volume, "PersistentVolume"),
        *_raw(core.list_persistent_volume_claim_for_all_namespaces, "PersistentVolumeClaim"),
        *_raw(core.list_pod_for_all_namespaces, "Pod"),
    ]


def _create(core: Any, obj: Obj) -> Obj:
    kind = obj["kind"]
    ns = (obj.get("metadata") or {}).get("namespace")
    if kind == "Namespace":
        r = core.create_namespace(obj, _preload_content=False)
    elif kind == "Node":
        r = core.create_node(obj, _preload_content=False)
    elif kind == "PersistentVolume":
        r = core.create_persistent_volume(obj, _preload_content=False)
    elif kind == "PersistentVolumeClaim":
        r = core.create_namespaced_persistent_volume_claim(ns, obj, _preload_content=False)
    elif kind == "Pod":
        r = core.create_namespaced_pod(ns, obj, _preload_content=False)
    else:
        raise ValueError(f"cannot create a {kind}")
    created: Obj = json.loads(r.data)
    return {"kind": kind, **created}


def _nodes_ready(core: Any, names: set[str]) -> bool:
    ready = set()
    for node in _raw(core.list_node, "Node", label_selector=f"{E2E_LABEL}=true"):
        taints = (node.get("spec") or {}).get("taints") or ()
        conditions = (node.get("status") or {}).get("conditions") or ()
        keys = {t.get("key") for t in taints}
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        if (
            any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            and NOT_READY_TAINT not in keys
            # The node controller's taint on a cordoned node: spread's nodeTaintsPolicy reads it.
            and (not cordoned or UNSCHEDULABLE_TAINT in keys)
        ):
            ready.add(node["metadata"]["name"])
    return names <= ready


def _claims_bound(core: Any, keys: set[str]) -> bool:
    bound = {
        f"{c['metadata']['namespace']}/{c['metadata']['name']}"
        for c in _raw(core.list_persistent_volume_claim_for_all_namespaces, "PersistentVolumeClaim")
        if (c.get("status") or {}).get("phase") == "Bound"
    }
    return keys <= bound


def verdict(pod: Obj) -> tuple[bool, str | None]:
    """(decided, node): bound to a node, or Pending with PodScheduled=False because it is
    unschedulable; (False, None) while the scheduler has not decided yet."""
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return True, str(node)
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            if c.get("reason") != "Unschedulable":
                raise RuntimeError(
                    f"{pod['metadata']['namespace']}/{NEW_POD}: {c.get('reason')}: {c.get('message')}"
                )
            return True, None
    return False, None


def run_batch(
    cp: ControlPlane,
    cases: Sequence[Case],
    *,
    on_snapshot: Callable[[], object] = lambda: None,
    timeout: float = 120.0,
) -> Observed:
    """Create the batch, let kube-scheduler decide each new pod, and return what it did.
    `on_snapshot` runs right after the objects are read and before the new pods are created (a second
    reader of the same state)."""
    from kubernetes import client

    api = _client(cp)
    core: Any = client.CoreV1Api(api)
    seconds: dict[str, float] = {}
    t = time.monotonic()
    try:
        _parallel(lambda o: _create(core, o), [ns for c in cases for ns in c.namespaces])
        _parallel(lambda o: _create(core, o), [o for c in cases for o in (*c.nodes, *c.volumes, *c.claims)])
        seconds["create"] = time.monotonic() - t
        nodes = {n for c in cases for n in c.node_names()}
        claims = {f"{o['metadata']['namespace']}/{o['metadata']['name']}" for c in cases for o in c.claims}
        cp.wait_for(
            lambda: _nodes_ready(core, nodes), 90, f"{len(nodes)} nodes Ready without the not-ready taint"
        )
        cp.wait_for(lambda: _claims_bound(core, claims), 60, f"{len(claims)} claims Bound")
        seconds["ready"] = time.monotonic() - t - seconds["create"]
        t_existing = time.monotonic()
        _parallel(lambda o: _create(core, o), [p for c in cases for p in c.existing])
        seconds["existing"] = time.monotonic() - t_existing
        objects = read_all(core)
        on_snapshot()
        t_pods = time.monotonic()
        seconds["read"] = t_pods - t_existing - seconds["existing"]
        made = _parallel(lambda o: _create(core, o), [c.pod for c in cases])
        created = {c.name: m for c, m in zip(cases, made, strict=True)}
        decided: dict[str, str | None] = {}

        def all_decided() -> bool:
            for pod in _raw(
                core.list_pod_for_all_namespaces, "Pod", field_selector=f"metadata.name={NEW_POD}"
            ):
                ns = pod["metadata"]["namespace"]
                if ns in created and ns not in decided:
                    done, node = verdict(pod)
                    if done:
                        decided[ns] = node
            return len(decided) == len(created)

        cp.wait_for(all_decided, timeout, f"kube-scheduler's verdict on {len(created)} new pods")
        # Once more, now that every pod is decided: a pod bound after it was first marked unschedulable
        # would mean that the cases are not independent.
        for pod in _raw(core.list_pod_for_all_namespaces, "Pod", field_selector=f"metadata.name={NEW_POD}"):
            ns = pod["metadata"]["namespace"]
            if ns in created:
                decided[ns] = verdict(pod)[1]
        seconds["schedule"] = time.monotonic() - t_pods
        return Observed(objects, created, decided, seconds)
    finally:
        with contextlib.suppress(Exception):
            api.close()


def delete_batch(cp: ControlPlane, timeout: float = 120.0) -> None:
    """The batch's namespaces (their pods force-deleted: no kubelet confirms), nodes and volumes, many
    calls at once: one call after another made the deletion the test's longest phase."""
    from kubernetes import client

    api = _client(cp)
    core: Any = client.CoreV1Api(api)
    sel = f"{E2E_LABEL}=true"
    try:
        names = {n["metadata"]["name"] for n in _raw(core.list_namespace, "Namespace", label_selector=sel)}

        def drop(name: str) -> None:
            with contextlib.suppress(client.ApiException):
                core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
            with contextlib.suppress(client.ApiException):
                core.delete_namespace(name, grace_period_seconds=0)

        with ThreadPoolExecutor(_THREADS) as pool:
            list(pool.map(drop, sorted(names)))

        def pods_gone() -> bool:
            left = {p["metadata"]["namespace"] for p in _raw(core.list_pod_for_all_namespaces, "Pod")} & names
            with ThreadPoolExecutor(_THREADS) as pool:
                list(pool.map(drop, sorted(left)))
            return not left

        cp.wait_for(pods_gone, timeout, "pods of the batch's namespaces deleted")
        core.delete_collection_node(label_selector=sel)
        core.delete_collection_persistent_volume(label_selector=sel)
        cp.wait_for(
            lambda: not _raw(core.list_node, "Node", label_selector=sel), timeout, "the batch's nodes deleted"
        )
    finally:
        with contextlib.suppress(Exception):
            api.close()
