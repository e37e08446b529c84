"""``makeroom cleanup``: everything makeroom has under way undone, and nothing of it left on the
cluster (the Helm chart runs it as a pre-delete hook). Idempotent: run it again and it finds nothing.

1. The controller is stopped first, so that it cannot start anything while the cleanup runs: its
   Deployment scaled to 0 and its pods waited for (``controller_deployment``), and its Lease taken and
   held (a replica still running elsewhere cannot act without it).
2. Passes, each on a fresh, consistent read of the cluster: every relocation rolled back (surges
   shrunk back, marks and deletion costs restored, nomination and scale-up delay removed), every
   consolidation given up (its taint lifted), every victim mark, consolidation taint and reservation
   taint removed, every record deleted, every CapacityBuffer makeroom keeps deleted with its
   PodTemplate; until a pass finds nothing to do.
3. The Lease deleted.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from makeroom.controller import Controller, ControllerConfig
from makeroom.controller.port import ClusterError, NotFoundError
from makeroom.kube.cache import Cache
from makeroom.kube.client import Api, KubeError, path_of
from makeroom.kube.cluster import KubeCluster
from makeroom.kube.leader import LeaderElector
from makeroom.snapshot import GroupConfig, GroupSpec, group_of

log = logging.getLogger("makeroom.cleanup")

WHY = "makeroom is being removed (makeroom cleanup)"
IDENTITY = "makeroom-cleanup"


class CleanupError(Exception):
    """The cleanup could not finish; the message says what is left to do. Running it again is safe."""


@dataclass
class CleanupOptions:
    records_namespace: str = "default"
    lease_namespace: str | None = "default"  # None: take no Lease (no leader election)
    lease_name: str = "makeroom"
    controller_deployment: str | None = None  # in records_namespace: scaled to 0 first
    autoscaler_namespace: str = "kube-system"
    timeout: float = 120.0
    max_passes: int = 5


@dataclass
class CleanupResult:
    relocations: list[str] = field(default_factory=list)
    consolidations: list[str] = field(default_factory=list)
    actions: int = 0
    passes: int = 0
    reservations: int = 0
    buffers: list[str] = field(default_factory=list)  # CapacityBuffers deleted


def clean_up(
    api: Api,
    opts: CleanupOptions,
    say: Callable[[str], None] = lambda line: None,
    sleep: Callable[[float], None] = time.sleep,
) -> CleanupResult:
    deadline = time.monotonic() + opts.timeout
    if opts.controller_deployment:
        _stop_controller(api, opts.records_namespace, opts.controller_deployment, deadline, say, sleep)
    elector = None
    stop = threading.Event()
    if opts.lease_namespace is not None:
        elector = LeaderElector(api, opts.lease_namespace, opts.lease_name, IDENTITY)
        while not elector.try_acquire_or_renew():
            if time.monotonic() > deadline:
                raise CleanupError(
                    f"a makeroom replica still holds the Lease {opts.lease_namespace}/{opts.lease_name}: "
                    "stop it first (scale its Deployment to 0)"
                )
            sleep(elector.retry_period)
        say(f"holding the Lease {opts.lease_namespace}/{opts.lease_name}: no makeroom replica acts now")
        threading.Thread(target=elector.run, args=(stop,), name="cleanup-lease", daemon=True).start()
    try:
        result = _passes(api, opts, elector, deadline, say, sleep)
        if elector is not None and opts.lease_namespace is not None:
            stop.set()
            path = f"/apis/coordination.k8s.io/v1/namespaces/{opts.lease_namespace}/leases/{opts.lease_name}"
            with contextlib.suppress(NotFoundError):  # gone already: what was asked
                api.request("DELETE", path)
            say(f"deleted the Lease {opts.lease_namespace}/{opts.lease_name}")
        return result
    finally:
        stop.set()


def _stop_controller(
    api: Api,
    namespace: str,
    name: str,
    deadline: float,
    say: Callable[[str], None],
    sleep: Callable[[float], None],
) -> None:
    path = path_of(namespace, name, "deployments", "apps/v1")
    try:
        deployment = api.get(path)
    except NotFoundError:
        say(f"no Deployment {namespace}/{name}: nothing to stop")
        return
    selector = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    if (deployment.get("spec") or {}).get("replicas", 1) != 0:
        api.patch(f"{path}/scale", {"spec": {"replicas": 0}})
        say(f"scaled {namespace}/{name} to 0")
    labels = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    while selector:
        pods = api.get(f"/api/v1/namespaces/{namespace}/pods", {"labelSelector": labels}).get("items") or []
        if not pods:
            break
        if time.monotonic() > deadline:
            raise CleanupError(f"{len(pods)} pod(s) of {namespace}/{name} still run")
        sleep(1.0)
    say(f"no pod of {namespace}/{name} runs")


def _passes(
    api: Api,
    opts: CleanupOptions,
    elector: LeaderElector | None,
    deadline: float,
    say: Callable[[str], None],
    sleep: Callable[[float], None],
) -> CleanupResult:
    result = CleanupResult()
    cache = Cache(api, None, autoscaler_namespace=opts.autoscaler_namespace)
    cluster = KubeCluster(
        api,
        cache,
        identity=IDENTITY,
        records_namespace=opts.records_namespace,
        may_act=(lambda: True) if elector is None else elector.is_leader,
    )
    while result.passes < opts.max_passes:
        result.passes += 1
        try:
            for informer in cache.informers.values():  # a fresh, consistent read for each pass
                informer.relist()
            cache.groups = _groups_of(cache)
            report = Controller(cluster, cluster, ControllerConfig()).clean_up(WHY)
            released = cluster.release_orphan_reservations()
            freed = cluster.release_buffers()
        except ClusterError as exc:
            if time.monotonic() > deadline:
                raise CleanupError(f"pass {result.passes}: {exc}") from exc
            log.warning("cleanup pass failed; trying again", extra={"error": str(exc)})
            say(f"pass {result.passes} failed ({exc}); trying again")
            sleep(2.0)
            continue
        result.relocations += report.rolled_back
        result.consolidations += report.consolidation_stopped
        result.reservations += released
        result.buffers += freed
        result.actions += report.actions + released + len(freed)
        for pod in report.rolled_back:
            say(f"rolled back the relocation for {pod}")
        for node in report.consolidation_stopped:
            say(f"gave up the consolidation of {node}")
        for name in freed:
            say(f"deleted the CapacityBuffer {opts.records_namespace}/{name} and its PodTemplate")
        if report.actions == 0 and released == 0 and not freed:
            return result
    raise CleanupError(f"still finding makeroom's marks after {opts.max_passes} passes")


def _groups_of(cache: Cache) -> GroupConfig:
    """Every group of the nodes, sized as they are: node groups do not matter to undoing."""
    sizes: dict[str, int] = {}
    for node in cache.informers["Node"].objects():
        group = group_of(node["metadata"].get("labels") or {})
        if group:
            sizes[group] = sizes.get(group, 0) + 1
    return GroupConfig(tuple(GroupSpec(g, 0, n) for g, n in sorted(sizes.items())), "cleanup")


__all__ = ["CleanupError", "CleanupOptions", "CleanupResult", "KubeError", "clean_up"]
