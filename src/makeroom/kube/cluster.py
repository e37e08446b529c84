"""The controller's Cluster port on a real cluster: reads from the watch cache, writes through the API.

Verbs and the API operations they are (RBAC in docs/kube.md):
- evict: POST pods/eviction (policy/v1); 429 -> EvictionBlockedError, 404 -> NotFoundError.
- delete_pod: DELETE pods. annotate_pod: merge PATCH of metadata.annotations (null removes).
- add_toleration: GET pod, merge PATCH of spec.tolerations with the resourceVersion (optimistic).
- taint_node / untaint_node: GET node, merge PATCH of spec.taints with the resourceVersion.
- nominate: merge PATCH of status.nominatedNodeName on pods/status; when the cluster does not keep it
  (see ``Nomination``), a reservation taint on the node that only the pod tolerates instead.
- scale: merge PATCH of deployments/scale.
- emit_event: POST core/v1 Events on the object, from component ``makeroom``.
- records / save_record / delete_record: LIST, server-side apply and DELETE of makeroom's own
  ``Relocation`` and ``Consolidation`` resources in its namespace (``kube.records``).
- keep_buffer: server-side apply of a CapacityBuffer (autoscaling.x-k8s.io/v1beta1) and its PodTemplate
  in makeroom's namespace (``kube.buffers``); 0 replicas DELETEs both. A missing API (404) or no RBAC
  for it (403: the chart's ``capacityBuffers.enabled``) is one log line and BuffersUnavailableError.
- deployment_of: GET the pod's ReplicaSet, checked against its owner reference's uid and its own
  controller reference to the Deployment (by uid, against the watch cache).
Every mutating verb first asks ``may_act`` (the leader election): a replica that is not the leader
changes nothing; and each HTTP attempt of a write is fenced on its own (``fence``, the lease's
remaining validity): sent only while the lease holds, with a timeout within it, never retried past it.
API failures are retried with backoff in ``Api`` and then raised as ClusterError, which the controller
logs and retries on a later tick.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from makeroom.controller.port import (
    BuffersUnavailableError,
    ClusterError,
    ConflictError,
    EvictionBlockedError,
    EvictionRefusedError,
    NotFoundError,
)
from makeroom.controller.reasons import ObjectKind, Reason
from makeroom.controller.records import Moves, RecordKind, Records, Stored
from makeroom.controller.scope import NamespaceLabels
from makeroom.kube import buffers
from makeroom.kube import records as crs
from makeroom.kube.cache import Cache
from makeroom.kube.client import Api, Fence, KubeError, NamespaceShares, NotLeaderError, path_of
from makeroom.kube.options import NominationMode
from makeroom.model import Resources, Taint, Toleration
from makeroom.model.objects import RESERVED_FOR
from makeroom.model.quantity import format_quantity
from makeroom.model.state import ClusterState

SEVERAL_BUDGETS = "more than one PodDisruptionBudget"
"""In the API server's answer (HTTP 500) to the eviction of a pod that several budgets select."""

log = logging.getLogger("makeroom.kube")

APPLY_PATCH = "application/apply-patch+yaml"  # server-side apply: create or replace in one idempotent call


def split_key(key: str) -> tuple[str, str]:
    ns, _, name = key.rpartition("/")
    return ns or "default", name


def _controller(refs: Any) -> dict[str, Any] | None:
    """The owner reference marked as the controller."""
    for ref in refs or ():
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def taint_dict(t: Taint) -> dict[str, str]:
    out = {"key": t.key, "effect": str(getattr(t.effect, "value", t.effect))}
    if t.value:
        out["value"] = t.value
    return out


def toleration_dict(t: Toleration) -> dict[str, str]:
    out = {"key": t.key, "operator": t.operator}
    if t.value:
        out["value"] = t.value
    if t.effect:
        out["effect"] = t.effect
    return out


@dataclass
class Nomination:
    """How the room for a pod is held on its node.

    ``status``: status.nominatedNodeName (kube-scheduler then counts the pod on that node against
    lower-priority pods, and the cluster-autoscaler skips a pod nominated to an existing node).
    ``taint``: a ``makeroom.io/reserved-for=<pod uid>:NoSchedule`` taint on the node plus the matching
    toleration on the pod, for clusters that do not keep a nomination makeroom writes.
    ``auto`` (default): ``status``, switching a pod to ``taint`` once the cluster cleared its
    nomination ``clear_limit`` times while the pod was still pending (the pod-scale-up-delay annotation
    that the controller writes keeps the autoscaler off in both cases).
    """

    mode: NominationMode = NominationMode.AUTO
    clear_limit: int = 2
    settle: float = 3.0
    """Seconds after writing a nomination before the cache's view of it counts (the watch lags)."""
    written: dict[str, tuple[str, float]] = field(default_factory=dict)  # pod key -> (node, when)
    cleared: dict[str, int] = field(default_factory=dict)  # pod key -> times seen cleared
    fallback: set[str] = field(default_factory=set)  # pod keys held by a reservation taint

    def uses_taint(self, pod: str) -> bool:
        return self.mode is NominationMode.TAINT or pod in self.fallback


class KubeCluster:
    def __init__(
        self,
        api: Api,
        cache: Cache,
        *,
        identity: str = "makeroom",
        records_namespace: str = "default",
        nomination: Nomination | None = None,
        may_act: Callable[[], bool] = lambda: True,
        on_action: Callable[[str, str, Mapping[str, Any]], None] | None = None,
        fence: Fence | None = None,
    ) -> None:
        self.api = api
        self.writer = api if fence is None else api.fenced(fence)
        """Writes go through the fenced client: each HTTP attempt only while the lease holds."""
        self.shares = NamespaceShares(api.limiter)
        """Turns by namespace for what can wait (docs/kube.md, "Rate limit")."""
        self.cache = cache
        self.identity = identity
        self.records_namespace = records_namespace
        self.in_flight: dict[RecordKind, set[str]] = {kind: set() for kind in RecordKind}
        self._legacy_names: dict[tuple[RecordKind, str], str] = {}
        """Subjects of the records last read or written, for the metrics."""
        self.nomination = nomination or Nomination()
        self.may_act = may_act
        self.on_action = on_action
        self._derived: tuple[int, ClusterState] | None = None
        self._replica_sets: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self._buffers_said = False
        """Whether the missing CapacityBuffer API was logged (once: the keeper asks every round)."""

    # Clock: the wall clock, as creationTimestamp and lastTransitionTime are.
    def now(self) -> float:
        return time.time()

    # --- reading -----------------------------------------------------------------------------------
    def snapshot(self) -> ClusterState:
        version = self.cache.version
        if self._derived is not None and self._derived[0] == version:
            return self._derived[1]
        state = self.cache.state()
        self._adjust(state)
        self._derived = (version, state)
        return state

    def _adjust(self, state: ClusterState) -> None:
        """What the controller must see beyond the objects: a pod held by a reservation taint is
        nominated to that node; a nomination the cluster cleared is counted."""
        held = self._reservations(state)
        for pod in state.pods.values():
            node = held.get(pod.key)
            if node is not None and pod.node is None and pod.nominated_node != node:
                state.nominate(pod, node)
            written = self.nomination.written.get(pod.key)
            if (
                written is not None
                and pod.node is None
                and node is None
                and pod.nominated_node != written[0]
                and time.monotonic() - written[1] > self.nomination.settle
            ):
                self.nomination.written.pop(pod.key)
                self._note_cleared(pod.key, written[0])

    def namespaces(self) -> NamespaceLabels:
        return {
            str(ns["metadata"]["name"]): ns["metadata"].get("labels") or {}
            for ns in self.cache.informers["Namespace"].objects()
        }

    def deployment_of(self, pod: str) -> str | None:
        """The pod's controller reference is a ReplicaSet (uid checked against the live ReplicaSet),
        whose own controller reference is a Deployment (uid checked against the watched one)."""
        found = self.cache.get("Pod", pod)
        if found is None:
            return None
        ns = str(found["metadata"].get("namespace") or "default")
        ref = _controller(found["metadata"].get("ownerReferences"))
        if ref is None or ref.get("kind") != "ReplicaSet" or not ref.get("uid"):
            return None
        rs = self._replica_set(path_of(ns, str(ref["name"]), "replicasets", "apps/v1"))
        if rs is None:
            return None
        meta = rs.get("metadata") or {}
        owner = _controller(meta.get("ownerReferences"))
        if meta.get("uid") != ref["uid"] or owner is None or owner.get("kind") != "Deployment":
            return None
        if not str(owner.get("apiVersion", "apps/v1")).startswith("apps/"):
            return None
        key = f"{ns}/{owner['name']}"
        deployment = self.cache.get("Deployment", key)
        if deployment is None or deployment["metadata"].get("uid") != owner.get("uid"):
            return None
        return str(owner["name"]) if ns == "default" else key

    def _replica_set(self, path: str) -> dict[str, Any] | None:
        """The live ReplicaSet, read once per second at most (a surge asks for each of its victims)."""
        now = time.monotonic()
        hit = self._replica_sets.get(path)
        if hit is not None and now - hit[0] < 1.0:
            return hit[1]
        try:
            found: dict[str, Any] | None = self.api.get(path)
        except NotFoundError:
            found = None
        self._replica_sets[path] = (now, found)
        return found

    # --- makeroom's records ------------------------------------------------------------------------
    def records(self) -> Records:
        out = Records()
        for kind in crs.PLURALS:
            found: dict[str, Any] = out.of(kind)
            try:
                items = self.api.list_all(crs.collection(self.records_namespace, kind))["items"]
            except NotFoundError as exc:
                raise ClusterError(
                    f"no {crs.PLURALS[kind]}.{crs.GROUP} in {self.records_namespace}: install the chart's "
                    f"CRDs, or give --records-namespace the namespace makeroom was installed in ({exc})"
                ) from exc
            for obj in items:
                parsed = crs.from_object(kind, obj)
                if parsed is None:
                    log.warning(
                        "a record names nothing makeroom could act on; left alone",
                        extra={"kind": kind.value, "object": (obj.get("metadata") or {}).get("name")},
                    )
                    continue
                found[parsed[0]] = parsed[1]
                name = (obj.get("metadata") or {}).get("name")
                if isinstance(name, str) and name != crs.object_name(kind, parsed[0]):
                    self._legacy_names[kind, parsed[0]] = name  # written under an older naming
            self.in_flight[kind] = set(found)
        return out

    def save_record(self, record: Stored) -> None:
        path = crs.path_of(self.records_namespace, record.kind, record.subject)
        # The action is on the record's subject (its pod or node), as the metrics and logs name it.
        detail = {"kind": record.kind.value}
        detail.update({"phase": record.phase.value} if isinstance(record, Moves) else {})
        self._guard("record", record.subject, detail)
        self._apply(path, crs.to_object(record, self.records_namespace))
        self.in_flight[record.kind].add(record.subject)

    def delete_record(self, kind: RecordKind, subject: str) -> None:
        path = crs.path_of(self.records_namespace, kind, subject)
        self._guard("forget", subject, {"kind": kind.value})
        with contextlib.suppress(NotFoundError):  # gone already: what was asked
            self.writer.request("DELETE", path)
        legacy = self._legacy_names.pop((kind, subject), None)
        if legacy is not None:
            with contextlib.suppress(NotFoundError):
                self.writer.request("DELETE", f"{crs.collection(self.records_namespace, kind)}/{legacy}")
        self.in_flight[kind].discard(subject)

    def _reservations(self, state: ClusterState) -> dict[str, str]:
        """Pod key -> node, from the reservation taints (by the pods' uids)."""
        uids: dict[str, str] = {}
        for n in state.nodes.values():
            for t in n.taints:
                if t.key == RESERVED_FOR:
                    uids[t.value] = n.name
        if not uids:
            return {}
        out: dict[str, str] = {}
        for pod in self.cache.informers["Pod"].objects():
            meta = pod["metadata"]
            node = uids.get(str(meta.get("uid")))
            if node is not None:
                out[f"{meta['namespace']}/{meta['name']}"] = node
        return out

    def _note_cleared(self, pod: str, node: str) -> None:
        n = self.nomination.cleared.get(pod, 0) + 1
        self.nomination.cleared[pod] = n
        log.info("nomination cleared by the cluster", extra={"pod": pod, "node": node, "times": n})
        if (
            self.nomination.mode is NominationMode.AUTO
            and n >= self.nomination.clear_limit
            and pod not in self.nomination.fallback
        ):
            self.nomination.fallback.add(pod)
            log.warning(
                "the cluster does not keep nominatedNodeName; holding the room with a reservation taint",
                extra={"pod": pod, "node": node},
            )

    # --- acting ------------------------------------------------------------------------------------
    def _guard(self, verb: str, target: str, detail: Mapping[str, Any]) -> None:
        if not self.may_act():
            raise NotLeaderError(f"{verb} {target}: not the leader")
        log.info("action", extra={"verb": verb, "object": target, "detail": dict(detail)})
        if self.on_action is not None:
            self.on_action(verb, target, detail)

    def evict(self, pod: str) -> None:
        self._guard("evict", pod, {})
        ns, name = split_key(pod)
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
        try:
            self.writer.request(
                "POST",
                path_of(ns, name, "pods", sub="eviction"),
                body=body,
                # 500 is not retried here: it may be the refusal below (the next round retries others)
                retry_statuses=frozenset({0, 502, 503, 504}),
            )
        except KubeError as exc:
            if exc.status == 429:
                raise EvictionBlockedError(str(exc)) from exc
            if exc.status == 500 and SEVERAL_BUDGETS in str(exc):
                raise EvictionRefusedError(str(exc)) from exc
            raise

    def delete_pod(self, pod: str) -> None:
        self._guard("delete", pod, {})
        ns, name = split_key(pod)
        self.writer.request("DELETE", path_of(ns, name, "pods"))

    def annotate_pod(self, pod: str, changes: Mapping[str, str | None]) -> None:
        self._guard("annotate", pod, {"changes": dict(changes)})
        ns, name = split_key(pod)
        self.writer.patch(path_of(ns, name, "pods"), {"metadata": {"annotations": dict(changes)}})

    def may_tidy(self, namespace: str) -> bool:
        return self.shares.take(namespace)

    def add_toleration(self, pod: str, toleration: Toleration) -> None:
        self._guard("tolerate", pod, {"toleration": toleration_dict(toleration)})
        self._add_toleration(pod, toleration_dict(toleration))

    def _add_toleration(self, pod: str, tol: dict[str, str]) -> None:
        ns, name = split_key(pod)
        path = path_of(ns, name, "pods")
        for _ in range(3):
            current = self.writer.get(path)
            tolerations = list((current.get("spec") or {}).get("tolerations") or [])
            if tol in tolerations:
                return
            rv = current["metadata"]["resourceVersion"]
            try:
                self.writer.patch(
                    path, {"metadata": {"resourceVersion": rv}, "spec": {"tolerations": [*tolerations, tol]}}
                )
                return
            except ConflictError:
                continue
        raise ConflictError(f"tolerate {pod}: the pod kept changing")

    def taint_node(self, node: str, taint: Taint) -> None:
        self._guard("taint", node, {"taint": taint_dict(taint)})
        t = taint_dict(taint)
        self._set_taints(node, lambda taints: [*(x for x in taints if x.get("key") != t["key"]), t])

    def untaint_node(self, node: str, key: str) -> None:
        self._guard("untaint", node, {"key": key})
        self._set_taints(node, lambda taints: [x for x in taints if x.get("key") != key])

    def _set_taints(self, node: str, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
        path = f"/api/v1/nodes/{node}"
        for _ in range(3):
            current = self.writer.get(path)
            taints = list((current.get("spec") or {}).get("taints") or [])
            wanted = change(taints)
            if wanted == taints:
                return
            rv = current["metadata"]["resourceVersion"]
            try:
                self.writer.patch(
                    path, {"metadata": {"resourceVersion": rv}, "spec": {"taints": wanted or None}}
                )
                return
            except ConflictError:
                continue
        raise ConflictError(f"taint {node}: the node kept changing")

    def nominate(self, pod: str, node: str | None) -> None:
        self._guard("nominate", pod, {"node": node})
        ns, name = split_key(pod)
        if node is not None and self.nomination.uses_taint(pod):
            self._reserve(pod, node)
            return
        if node is None:
            self._release_reservations(pod)
            self.nomination.written.pop(pod, None)
            self.nomination.cleared.pop(pod, None)
            self.nomination.fallback.discard(pod)
        answer = self.writer.patch(
            path_of(ns, name, "pods", sub="status"), {"status": {"nominatedNodeName": node}}
        )
        if node is not None:
            kept = (answer.get("status") or {}).get("nominatedNodeName")
            self.nomination.written[pod] = (node, time.monotonic())
            if kept != node:
                self._note_cleared(pod, node)
            if self.runs_karpenter():
                # Karpenter leaves a nominated pod alone, but counts the room it holds as free for
                # other pods (and then launches nothing for them): the taint keeps them off it too.
                self._reserve(pod, node)

    def runs_karpenter(self) -> bool:
        """The cluster scales with Karpenter: the cache holds NodePools."""
        return bool(self.cache.informers["NodePool"].objects())

    def _uid(self, pod: str) -> str:
        found = self.cache.get("Pod", pod)
        uid = (found or {}).get("metadata", {}).get("uid")
        if not uid:
            ns, name = split_key(pod)
            uid = self.api.get(path_of(ns, name, "pods"))["metadata"]["uid"]
        return str(uid)

    def _reserve(self, pod: str, node: str) -> None:
        """The node reserved for the pod alone. A node holds one reservation (a taint is unique by key
        and effect): one for another pod still waiting is never replaced (ConflictError: the
        relocation waits, or gives up), one whose pod is gone or bound is."""
        uid = self._uid(pod)
        self._add_toleration(
            pod, {"key": RESERVED_FOR, "operator": "Equal", "value": uid, "effect": "NoSchedule"}
        )
        taint = {"key": RESERVED_FOR, "value": uid, "effect": "NoSchedule"}
        waiting = self._waiting_uids()

        def reserve(taints: list[dict[str, Any]]) -> list[dict[str, Any]]:
            for t in taints:
                other = t.get("value")
                if t.get("key") == RESERVED_FOR and other != uid and other in waiting:
                    raise ConflictError(f"{node} is reserved for another waiting pod ({waiting[other]})")
            return [*(x for x in taints if x.get("key") != RESERVED_FOR), taint]

        self._set_taints(node, reserve)

    def _waiting_uids(self) -> dict[str, str]:
        """uid -> key of every pod not bound to a node yet, as the cache has them."""
        out: dict[str, str] = {}
        for obj in self.cache.informers["Pod"].objects():
            meta = obj["metadata"]
            if not obj["spec"].get("nodeName") and meta.get("uid"):
                out[str(meta["uid"])] = f"{meta.get('namespace')}/{meta.get('name')}"
        return out

    def _release_reservations(self, pod: str) -> None:
        """The pod's own reservation taints, and no other pod's (a pod the cache no longer has leaves
        an orphan, which ``release_orphan_reservations`` removes)."""
        if self.cache.get("Pod", pod) is None:
            return
        uid = self._uid(pod)

        def release(taints: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [x for x in taints if not (x.get("key") == RESERVED_FOR and x.get("value") == uid)]

        for obj in self.cache.informers["Node"].objects():
            for t in obj["spec"].get("taints") or ():
                if t.get("key") == RESERVED_FOR and t.get("value") == uid:
                    self._set_taints(obj["metadata"]["name"], release)

    def release_orphan_reservations(self) -> int:
        """Reservation taints whose pod is gone, bound, or no longer relocated: a dead leader's."""
        tainted = any(
            t.get("key") == RESERVED_FOR
            for obj in self.cache.informers["Node"].objects()
            for t in obj["spec"].get("taints") or ()
        )
        if not tainted:
            return 0  # the common case: no read of the records needed
        relocating = set(self.records().relocations)
        live = set()
        for obj in self.cache.informers["Pod"].objects():
            meta = obj["metadata"]
            if (
                not obj["spec"].get("nodeName")
                and f"{meta.get('namespace')}/{meta.get('name')}" in relocating
            ):
                live.add(str(meta.get("uid")))
        released = 0
        for obj in self.cache.informers["Node"].objects():
            for t in obj["spec"].get("taints") or ():
                if t.get("key") == RESERVED_FOR and t.get("value") not in live:
                    name = obj["metadata"]["name"]
                    self._guard("untaint", name, {"key": RESERVED_FOR, "orphan": True})
                    self._set_taints(name, lambda ts: [x for x in ts if x.get("key") != RESERVED_FOR])
                    released += 1
        return released

    def scale(self, workload: str, replicas: int) -> None:
        self._guard("scale", workload, {"replicas": replicas})
        ns, name = split_key(workload)
        self.writer.patch(
            path_of(ns, name, "deployments", "apps/v1", "scale"), {"spec": {"replicas": replicas}}
        )

    def keep_buffer(self, group: str, requests: Resources, replicas: int) -> None:
        if replicas < 0:
            raise ValueError(f"a buffer of {replicas} pods")
        if replicas and not any(v > 0 for k, v in requests.items() if k != "pods"):
            raise ValueError(f"a buffer in {group} for pods that request nothing")
        wanted = {k: format_quantity(v, k) for k, v in requests.items()}
        self._guard("buffer", group, {"replicas": replicas, "requests": wanted})
        ns = self.records_namespace
        try:
            if replicas == 0:
                self._remove_buffer(buffers.object_name(group))
                return
            keys = buffers.group_keys(group, self.cache.informers["Node"].objects())
            # The buffer first, so that where the API is missing nothing is written at all; the
            # autoscaler's controller waits for the template it names.
            self._apply(buffers.buffer_path(ns, group), buffers.capacity_buffer(ns, group, replicas))
            self._apply(buffers.template_path(ns, group), buffers.pod_template(ns, group, requests, keys))
        except KubeError as exc:
            if exc.status in (403, 404):
                raise self._buffers_unavailable(group, exc) from exc
            raise

    def _remove_buffer(self, name: str) -> None:
        ns = self.records_namespace
        # The buffer first: the autoscaler never sees one whose template is gone.
        for path in (f"{buffers.collection(ns)}/{name}", f"{buffers.templates(ns)}/{name}"):
            with contextlib.suppress(NotFoundError):  # gone already, or never installed
                self.writer.request("DELETE", path)

    def release_buffers(self) -> list[str]:
        """Every CapacityBuffer of makeroom's (and its PodTemplate) deleted, for the cleanup: a buffer
        left behind keeps a node for nobody, around the clock. Where the API or the permission to use
        it is missing, makeroom can have made none."""
        try:
            found = self.api.list_all(
                buffers.collection(self.records_namespace), {"labelSelector": buffers.SELECTOR}
            )
        except KubeError as exc:
            if exc.status in (403, 404):
                return []
            raise
        names = sorted(str(o["metadata"]["name"]) for o in found["items"] if buffers.is_makeroom_s(o))
        for name in names:
            self._guard("buffer", name, {"replicas": 0})
            self._remove_buffer(name)
        return names

    def _apply(self, path: str, body: Mapping[str, Any]) -> None:
        self.writer.request(
            "PATCH", path, {"fieldManager": "makeroom", "force": True}, body, content_type=APPLY_PATCH
        )

    def _buffers_unavailable(self, group: str, exc: KubeError) -> BuffersUnavailableError:
        if exc.status == 404:
            why = (
                f"no {buffers.PLURAL}.{buffers.GROUP} {buffers.VERSION} in the cluster (install the "
                "cluster-autoscaler's CRD and run it with --capacity-buffer-controller-enabled and "
                "--capacity-buffer-pod-injection-enabled, or Karpenter with the CapacityBuffer gate)"
            )
        else:
            why = (
                f"makeroom may not write {buffers.PLURAL}.{buffers.GROUP} or podtemplates in "
                f"{self.records_namespace} (the chart's capacityBuffers.enabled)"
            )
        if not self._buffers_said:
            self._buffers_said = True
            log.warning(
                "no CapacityBuffer: keeping room without the autoscaler's buffers",
                extra={"group": group, "reason": why, "error": str(exc)},
            )
        return BuffersUnavailableError(f"buffer for {group}: {why}: {exc}")

    def emit_event(self, kind: ObjectKind, name: str, reason: Reason, message: str) -> None:
        self._guard("event", f"{kind.value}/{name}", {"reason": reason.value})
        ns, obj_name = split_key(name) if kind.namespaced else ("default", name)
        involved: dict[str, Any] = {"kind": kind.value, "name": obj_name, "apiVersion": kind.api_version}
        if kind.namespaced:
            involved["namespace"] = ns
        cached = self.cache.get(kind.value, name)
        if cached and cached["metadata"].get("uid"):
            involved["uid"] = cached["metadata"]["uid"]
        stamp = now_rfc3339()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{obj_name}.{uuid.uuid4().hex[:16]}", "namespace": ns},
            "involvedObject": involved,
            "reason": reason.value,
            "message": message,
            "type": "Warning" if reason.warning else "Normal",
            "source": {"component": "makeroom"},
            "reportingComponent": "makeroom",
            "reportingInstance": self.identity,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        self.writer.request("POST", f"/api/v1/namespaces/{ns}/events", body=body)


__all__ = ["RESERVED_FOR", "KubeCluster", "Nomination", "NotFoundError", "NotLeaderError", "split_key"]
