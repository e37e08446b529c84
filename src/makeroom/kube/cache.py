"""The watch cache: for each kind makeroom plans on, list (in pages) then watch from the list's
resourceVersion, keep slim objects, resume a broken watch from the last resourceVersion seen, relist
on 410 Gone, and relist anyway every ``resync`` seconds. ``Cache.state()`` turns the objects into a
ClusterState with the one conversion of ``makeroom.snapshot``: built in full when nodes, budgets,
Deployments, the autoscaler status, namespaces, claims or volumes changed (or every ``full_every``
seconds), and otherwise updated
pod by pod (``snapshot.pod_from_object``), so that a pod turning unschedulable in a 150,000-pod
cluster is planned on in milliseconds rather than after a full build of seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from makeroom.errors import Problem
from makeroom.kube.client import Api, GoneError, KubeError
from makeroom.kube.slim import SLIMMERS, Interner, is_unschedulable
from makeroom.model import Pod
from makeroom.model.expander import PRIORITY_CONFIGMAP
from makeroom.model.state import ClusterState
from makeroom.snapshot import (
    STATUS_CONFIGMAP,
    GroupConfig,
    Storage,
    on_unknown_node,
    pod_from_object,
    state_from_objects,
    storage_from_objects,
)
from makeroom.snapshot.fields import UNFIT

log = logging.getLogger("makeroom.kube.cache")
JSON = dict[str, Any]


class _RebuildError(Exception):
    """The changes cannot be applied pod by pod: build the state in full."""


@dataclass(frozen=True, slots=True)
class Resource:
    kind: str
    path: str
    field_selector: str = ""
    optional: bool = False
    """A kind the cluster may not serve (Karpenter's, without Karpenter) or makeroom may not be allowed to
    read: a 404 or 403 on its list is an empty list, asked again every ``resync``."""
    key: str = ""
    """The informer's name where two watch one kind (default: the kind)."""

    @property
    def name(self) -> str:
        return self.key or self.kind


OPTIONAL_STATUSES = frozenset({403, 404})


def resources(autoscaler_namespace: str = "kube-system") -> tuple[Resource, ...]:
    """What the cache watches, cluster-wide (room is counted over every pod of a node)."""
    return (
        Resource("Node", "/api/v1/nodes"),
        Resource("Pod", "/api/v1/pods"),
        Resource("PodDisruptionBudget", "/apis/policy/v1/poddisruptionbudgets"),
        Resource("Deployment", "/apis/apps/v1/deployments"),
        Resource("HorizontalPodAutoscaler", "/apis/autoscaling/v2/horizontalpodautoscalers"),
        Resource(
            "ConfigMap",
            f"/api/v1/namespaces/{autoscaler_namespace}/configmaps",
            f"metadata.name={STATUS_CONFIGMAP}",
        ),
        Resource(
            "ConfigMap",
            f"/api/v1/namespaces/{autoscaler_namespace}/configmaps",
            f"metadata.name={PRIORITY_CONFIGMAP}",
            optional=True,
            key=PRIORITIES,
        ),
        Resource("Namespace", "/api/v1/namespaces"),
        # Where a pod's bound volumes can be reached; optional: without the right to read them (a chart
        # older than issue 19), pods are planned as if their volumes were reachable from every node.
        Resource("PersistentVolumeClaim", "/api/v1/persistentvolumeclaims", optional=True),
        Resource("PersistentVolume", "/api/v1/persistentvolumes", optional=True),
        Resource("NodePool", "/apis/karpenter.sh/v1/nodepools", optional=True),
        Resource("NodeClaim", "/apis/karpenter.sh/v1/nodeclaims", optional=True),
    )


PRIORITIES = "PriorityExpanderConfigMap"
"""The informer of the cluster-autoscaler priority expander's ConfigMap (optional: where makeroom may not
read it, or it is not there, the groups' order stands for its priorities)."""


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


@dataclass
class Informer:
    """List-then-watch of one resource into a dict of slim objects, on its own thread."""

    api: Api
    resource: Resource
    interner: Interner
    on_change: Callable[[str, JSON | None, JSON | None], None]
    resync: float = 600.0
    watch_timeout: int = 300
    backoff: float = 1.0
    store: dict[str, JSON] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    synced: threading.Event = field(default_factory=threading.Event)
    stopped: threading.Event = field(default_factory=threading.Event)
    resource_version: str = ""
    relists: int = 0
    last_error: str = ""
    absent: bool = False  # an optional kind the cluster does not serve (or makeroom may not read)

    @property
    def query(self) -> dict[str, str | int | bool]:
        return {"fieldSelector": self.resource.field_selector} if self.resource.field_selector else {}

    def slim(self, obj: Mapping[str, Any]) -> JSON | None:
        obj = {**obj, "kind": self.resource.kind}
        return SLIMMERS[self.resource.kind](obj, self.interner)

    def relist(self) -> None:
        fresh: dict[str, JSON] = {}
        version = ""
        try:
            for items, rv in self.api.list_pages(self.resource.path, self.query):
                version = rv
                for obj in items:
                    s = self.slim(obj)
                    if s is not None:
                        fresh[key_of(s)] = s
        except KubeError as exc:
            if not (self.resource.optional and exc.status in OPTIONAL_STATUSES):
                raise
            if not self.absent:
                log.info("not served; none assumed", extra={"kind": self.resource.kind, "error": str(exc)})
            self.absent = True
        else:
            self.absent = False
        with self.lock:
            old, self.store = self.store, fresh
        for k in old.keys() | fresh.keys():
            if old.get(k) is not fresh.get(k):
                self.on_change(k, old.get(k), fresh.get(k))
        self.resource_version = version
        self.relists += 1
        self.synced.set()

    def apply(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            self.resource_version = str(rv or self.resource_version)
            return
        key = key_of(obj)
        s = self.slim(obj) if kind in ("ADDED", "MODIFIED") else None
        with self.lock:
            old = self.store.get(key)
            if s is None:
                self.store.pop(key, None)
            else:
                self.store[key] = s
        if rv:
            self.resource_version = str(rv)
        if old != s:  # a heartbeat or a field planning does not read changes nothing
            self.on_change(key, old, s)

    def run(self) -> None:
        listed_at = 0.0
        while not self.stopped.is_set():
            try:
                if self.absent or not self.resource_version or time.monotonic() - listed_at > self.resync:
                    if self.absent and listed_at and self.stopped.wait(self.resync):
                        return
                    self.relist()
                    listed_at = time.monotonic()
                    if self.absent:
                        continue
                query = {**self.query, "resourceVersion": self.resource_version}
                timeout = max(
                    1, min(self.watch_timeout, int(self.resync - (time.monotonic() - listed_at)) + 1)
                )
                for event in self.api.watch(self.resource.path, query, timeout):
                    self.apply(event)
                    if self.stopped.is_set():
                        return
                self.last_error = ""
            except GoneError as exc:
                log.info("watch expired; relisting", extra={"kind": self.resource.kind, "error": str(exc)})
                self.resource_version = ""
            except (KubeError, ValueError, OSError) as exc:
                self.last_error = str(exc)
                log.warning("watch failed; resuming", extra={"kind": self.resource.kind, "error": str(exc)})
                self.stopped.wait(self.backoff)
            except Exception as exc:  # a broken stream from the HTTP library: resume, never die
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning(
                    "watch broke; resuming", extra={"kind": self.resource.kind, "error": self.last_error}
                )
                self.stopped.wait(self.backoff)

    def objects(self) -> list[JSON]:
        with self.lock:
            return list(self.store.values())

    def get(self, key: str) -> JSON | None:
        with self.lock:
            return self.store.get(key)


class Cache:
    """The informers of every watched kind, and the ClusterState built from them."""

    def __init__(
        self,
        api: Api,
        groups: GroupConfig | None = None,
        *,
        autoscaler_namespace: str = "kube-system",
        resync: float = 600.0,
        watch_timeout: int = 300,
        full_every: float = 300.0,
        max_incremental: int = 5000,
    ) -> None:
        self.api = api
        self.full_every, self.max_incremental = full_every, max_incremental
        self._dirty: dict[str, set[str]] = defaultdict(set)  # kind -> keys changed since the last build
        self._full_at = 0.0
        self.builds = {"full": 0, "incremental": 0}
        self.groups = groups
        self.interner = Interner()
        self.version = 0
        self._version_lock = threading.Lock()
        self.changed = threading.Event()
        self.unschedulable = threading.Event()
        """Set when a pod becomes unschedulable: the loop reconciles at once rather than at its tick."""
        self.informers = {
            r.name: Informer(api, r, self.interner, self._on_change, resync, watch_timeout)
            for r in resources(autoscaler_namespace)
        }
        self._threads: list[threading.Thread] = []
        self._built: tuple[int, ClusterState] | None = None
        self._storage = Storage()
        self._build_lock = threading.Lock()
        self.last_build_seconds = 0.0
        self._logged_problems: set[str] = set()
        """Problems of the cluster's objects already logged (those objects are left out)."""
        self.unknown_groups: set[str] = set()
        """Node groups seen that nothing bounds (warned about once)."""
        self.unschedulable_at: dict[str, float] = {}
        """Pod key -> monotonic time its watch event said it became unschedulable (for latency)."""

    def _on_change(self, key: str, old: JSON | None, new: JSON | None) -> None:
        kind = str((new or old or {}).get("kind"))
        with self._version_lock:
            self.version += 1
            self._dirty[kind].add(key)
        self.changed.set()
        if (
            new is not None
            and new.get("kind") == "Pod"
            and is_unschedulable(new)
            and not is_unschedulable(old)
        ):
            self.unschedulable_at[key] = time.monotonic()
            self.unschedulable.set()

    def start(self) -> None:
        for inf in self.informers.values():
            t = threading.Thread(target=inf.run, name=f"watch-{inf.resource.kind}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        for inf in self.informers.values():
            inf.stopped.set()

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        return all(inf.synced.wait(max(0.0, deadline - time.monotonic())) for inf in self.informers.values())

    @property
    def synced(self) -> bool:
        return all(inf.synced.is_set() for inf in self.informers.values())

    def objects(
        self,
        kinds: tuple[str, ...] = (
            "Node",
            "Pod",
            "PodDisruptionBudget",
            "Deployment",
            "HorizontalPodAutoscaler",
            "NodePool",
            "NodeClaim",
            PRIORITIES,
            "Namespace",
            "PersistentVolumeClaim",
            "PersistentVolume",
        ),
    ) -> list[JSON]:
        out: list[JSON] = []
        for kind in kinds:
            out.extend(self.informers[kind].objects())
        return out

    def autoscaler_status(self) -> JSON | None:
        found = self.informers["ConfigMap"].objects()
        return found[0] if found else None

    def get(self, kind: str, key: str) -> JSON | None:
        return self.informers[kind].get(key)

    def state(self) -> ClusterState:
        """The cluster as planning sees it; the same object until something changes. Read-only."""
        with self._build_lock:
            version = self.version
            if self._built is not None and self._built[0] == version:
                return self._built[1]
            with self._version_lock:
                dirty, self._dirty = self._dirty, defaultdict(set)
            start = time.perf_counter()
            if (
                self._built is not None
                and set(dirty) <= {"Pod"}
                and len(dirty.get("Pod", ())) <= self.max_incremental
                and time.monotonic() - self._full_at < self.full_every
            ):
                state = self._built[1]
                try:
                    self._apply_pods(state, dirty.get("Pod", set()))
                    self._built = (version, state)
                    self.builds["incremental"] += 1
                    return state
                except _RebuildError as exc:
                    log.info("state rebuilt in full", extra={"why": str(exc)})
            skipped: list[Problem] = []
            unknown: list[str] = []
            # A claim or volume that changes forces a full build: pods changed one by one between full
            # builds resolve their claims through the claims and volumes of the last one.
            self._storage = storage_from_objects(self.objects(("PersistentVolumeClaim", "PersistentVolume")))
            state = state_from_objects(
                self.objects(),
                self.groups,
                self.autoscaler_status(),
                source="the watch cache",
                skipped=skipped,
                unknown_groups=unknown,
            )
            self._report_skipped(skipped)
            self._warn_unknown(unknown)
            self.last_build_seconds = time.perf_counter() - start
            self._full_at = time.monotonic()
            self._built = (version, state)
            self.builds["full"] += 1
            return state

    def _warn_unknown(self, groups: list[str]) -> None:
        """A node group that neither --groups nor the autoscaler's status names is planned on as fixed
        at its nodes (never a stop): said once per group, not on every build."""
        for name in groups:
            if name not in self.unknown_groups:
                self.unknown_groups.add(name)
                log.warning(
                    "a node group neither --groups nor the autoscaler status names: planned on as "
                    "fixed at its nodes",
                    extra={"group": name},
                )

    def _apply_pods(self, state: ClusterState, keys: set[str]) -> None:
        """The changed pods, replaced one by one in the last state (what a full build would give; a
        case it cannot do that for raises _RebuildError)."""
        deployments = self.informers["Deployment"].store
        pods = self.informers["Pod"]

        def recount(pod: Pod, delta: int) -> None:
            # A workload with no Deployment has as many replicas as it has live pods (as a full build).
            if pod.workload is None or pod.terminating:
                return
            w = state.workloads.get(pod.workload)
            if w is None:
                raise _RebuildError(f"a new workload {pod.workload}")
            if (pod.workload if "/" in pod.workload else f"default/{pod.workload}") not in deployments:
                w.replicas += delta

        skipped: list[Problem] = []
        for key in keys:
            obj = pods.get(key)
            new = (
                pod_from_object(obj, source=key, skipped=skipped, storage=self._storage)
                if obj is not None
                else None
            )
            if new is not None and new.node is not None and new.node not in state.nodes:
                skipped.append(Problem(f"Pod {key}.spec.nodeName", on_unknown_node(new.node)))
                new = None  # as a full build leaves it out; a Node that comes makes a full build
            if new is not None:
                if new.node is not None and any(v >= UNFIT for v in new.spec.requests.values()):
                    raise _RebuildError(f"pod {key} asks for more than any node holds")
                if new.workload is not None and new.workload not in state.workloads:
                    raise _RebuildError(f"a new workload {new.workload}")
            old = state.pods.get(key)
            if old is not None:
                state.remove_pod(old)
                old.node = None
                recount(old, -1)
            if new is not None:
                nominated, new.nominated_node = new.nominated_node, None
                state.add_pod(new)
                if new.node is None and nominated in state.nodes:
                    state.nominate(new, nominated)
                recount(new, +1)
        self._report_skipped(skipped)

    def _report_skipped(self, skipped: list[Problem]) -> None:
        """Objects left out of the state because a field breaks the input rules (a pod may ask for
        more than any node could hold, a ConfigMap may say anything): each problem is logged once."""
        lines = {p.render("the watch cache") for p in skipped}
        for line in sorted(lines - self._logged_problems):
            log.warning("object left out of planning", extra={"problem": line})
        self._logged_problems |= lines

    def memory_objects(self) -> int:
        return sum(len(inf.store) for inf in self.informers.values())
