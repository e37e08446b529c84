"""Prometheus metrics and the health, readiness and metrics HTTP endpoints (``/metrics`` behind a
TokenReview and a SubjectAccessReview; every connection with a timeout, and a cap on them).

Names follow ``makeroom_<subsystem>_<name>`` with ``_total`` for counters and ``_seconds`` for times;
each help text names its labels. docs/kube.md has the table (a test keeps it in step with this file).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from makeroom.controller import TickReport
from makeroom.controller.reasons import Fallback
from makeroom.kube.client import Api, KubeError

log = logging.getLogger("makeroom.run")

RELOCATION_OUTCOMES = ("started", "done", "rolled_back")
CONSOLIDATION_OUTCOMES = ("started", "done", "stopped")
PLAN_KINDS = ("relocation", "consolidation")
_FAST = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        # controller: the reconciliation loop
        self.reconcile_seconds = Histogram(
            "makeroom_controller_reconcile_seconds",
            "Seconds of one reconciliation as the leader: the snapshot, the plans and the actions taken.",
            buckets=_FAST,
            registry=r,
        )
        self.plan_seconds = Histogram(
            "makeroom_controller_plan_seconds",
            "Seconds the planner took, by kind (kind: relocation, consolidation).",
            ["kind"],
            buckets=_FAST,
            registry=r,
        )
        for kind in PLAN_KINDS:
            self.plan_seconds.labels(kind=kind)
        self.errors = Counter(
            "makeroom_controller_errors_total",
            "Steps of a reconciliation that failed (an API error, or the loop itself) and wait to retry.",
            registry=r,
        )
        self.moves = Counter(
            "makeroom_controller_moves_total",
            "Pods marked to leave their node (victims of a relocation or a consolidation), each counted "
            "once, when the move is decided.",
            registry=r,
        )
        self.evictions = Counter(
            "makeroom_controller_evictions_total",
            "Victims evicted through the Eviction API (migrate's victims mostly leave by the scale-down).",
            registry=r,
        )
        self.leader = Gauge(
            "makeroom_controller_leader", "1 while this replica holds the lease and acts.", registry=r
        )
        # relocation: making room for pending pods
        self.relocations = Counter(
            "makeroom_relocation_outcomes_total",
            "Relocations by outcome (outcome: started, done, rolled_back).",
            ["outcome"],
            registry=r,
        )
        for outcome in RELOCATION_OUTCOMES:
            self.relocations.labels(outcome=outcome)
        self.fallbacks = Counter(
            "makeroom_relocation_fallbacks_total",
            "Victims of a make-before-break move evicted before a replacement of theirs was Ready, by why "
            "(why: replicas-owned, not-a-deployment, not-replaced, no-workload).",
            ["why"],
            registry=r,
        )
        for why in Fallback:
            self.fallbacks.labels(why=why.value)
        self.futile = Counter(
            "makeroom_relocation_futile_pods_total",
            "Pending pods whose room was made but the scheduler did not place them there: each reported "
            "once (an Event RoomNotUsed) and not planned for again.",
            registry=r,
        )
        self.zone_unknown = Counter(
            "makeroom_relocation_zone_unknown_pods_total",
            "Pending pods makeroom moves nothing for because a constraint by zone needs a new node of a "
            "group whose template gives no zone: each reported once (an Event NewNodeZoneUnknown).",
            registry=r,
        )
        self.in_flight = Gauge(
            "makeroom_relocation_in_flight", "Relocations under way (Relocation records).", registry=r
        )
        self.pending = Gauge(
            "makeroom_relocation_pending_pods", "Unschedulable pods waiting for room.", registry=r
        )
        self.first_action = Histogram(
            "makeroom_relocation_first_action_seconds",
            "Seconds from the watch event of a pod becoming unschedulable to makeroom's first action for it.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
            registry=r,
        )
        # consolidation: emptying costly nodes
        self.consolidations = Counter(
            "makeroom_consolidation_outcomes_total",
            "Consolidations by outcome (outcome: started, done (the node is empty for the autoscaler), "
            "stopped (given up)).",
            ["outcome"],
            registry=r,
        )
        for outcome in CONSOLIDATION_OUTCOMES:
            self.consolidations.labels(outcome=outcome)
        self.consolidating = Gauge(
            "makeroom_consolidation_in_flight",
            "Consolidations under way (Consolidation records).",
            registry=r,
        )
        self.unpriced = Gauge(
            "makeroom_consolidation_unpriced",
            "1 while consolidation is on but no node group has a price, so it never starts.",
            registry=r,
        )
        # api: what makeroom changes in the cluster
        self.actions = Counter(
            "makeroom_api_actions_total", "Mutating API calls made, by verb (verb).", ["verb"], registry=r
        )
        # cache: the watch cache and the state built from it
        self.cache_objects = Gauge(
            "makeroom_cache_objects", "Objects in the watch cache, by kind (kind).", ["kind"], registry=r
        )
        self.build_seconds = Gauge(
            "makeroom_cache_build_seconds", "Seconds of the last cache-to-state build.", registry=r
        )

    def count(self, report: TickReport) -> None:
        """What one reconciliation did, as counters and timings."""
        relocations = {"started": report.started, "done": report.done, "rolled_back": report.rolled_back}
        for outcome, pods in relocations.items():
            self.relocations.labels(outcome=outcome).inc(len(pods))
        consolidations = {
            "started": report.consolidating,
            "done": report.consolidated,
            "stopped": report.consolidation_stopped,
        }
        for outcome, nodes in consolidations.items():
            self.consolidations.labels(outcome=outcome).inc(len(nodes))
        self.moves.inc(report.moves)
        self.futile.inc(len(report.futile))
        self.zone_unknown.inc(len(report.zone_unknown))
        self.evictions.inc(report.evictions)
        for _, why in report.fallbacks:
            self.fallbacks.labels(why=why.value).inc()
        self.errors.inc(report.errors)
        if report.relocation_plan_seconds is not None:
            self.plan_seconds.labels(kind="relocation").observe(report.relocation_plan_seconds)
        if report.consolidation_plan_seconds is not None:
            self.plan_seconds.labels(kind="consolidation").observe(report.consolidation_plan_seconds)

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))


TIMEOUT = 10.0
"""Seconds a connection may take to send its request or read the answer: an idle one is closed."""
MAX_CONNECTIONS = 16
"""Connections served at once; one more is closed at once (the probes and a scraper need few)."""


class MetricsAuth:
    """Who may read ``/metrics``: a bearer token that the API server authenticates (TokenReview) and
    authorizes for ``get`` on the non-resource URL ``/metrics`` (SubjectAccessReview), the convention of
    controller-runtime's secure metrics (the chart's ``metrics-reader`` ClusterRole grants it). Each
    answer is kept ``ttl`` seconds by the token's digest (at most ``MAX_CACHED`` of them), so a scraper
    costs two API calls a minute; the calls go through their own small rate limit, never makeroom's."""

    MAX_CACHED = 1024

    def __init__(self, api: Api, ttl: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.api, self.ttl, self.clock = api, ttl, clock
        self._seen: dict[str, tuple[float, bool]] = {}
        self._lock = threading.Lock()

    def allows(self, authorization: str | None) -> bool | None:
        """True when the token may read the metrics, False when it may not, None when there is none."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        token = token.strip()
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = self.clock()
        with self._lock:
            seen = self._seen.get(digest)
        if seen is not None and now - seen[0] < self.ttl:
            return seen[1]
        allowed = self._review(token)
        with self._lock:
            if len(self._seen) >= self.MAX_CACHED:
                self._seen.clear()
            self._seen[digest] = (now, allowed)
        return allowed

    def _review(self, token: str) -> bool:
        try:
            review = self.api.request(
                "POST",
                "/apis/authentication.k8s.io/v1/tokenreviews",
                body={
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenReview",
                    "spec": {"token": token},
                },
            )
            status = review.get("status") or {}
            user = status.get("user") or {}
            if not status.get("authenticated") or not user.get("username"):
                return False
            access = self.api.request(
                "POST",
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                body={
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SubjectAccessReview",
                    "spec": {
                        "user": user["username"],
                        "uid": user.get("uid", ""),
                        "groups": user.get("groups") or [],
                        "extra": user.get("extra") or {},
                        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
                    },
                },
            )
        except KubeError as exc:
            log.warning("metrics request not authorized: the review failed", extra={"error": str(exc)})
            return False
        return bool((access.get("status") or {}).get("allowed"))


class _Server(ThreadingHTTPServer):
    """A thread per connection, at most ``MAX_CONNECTIONS`` at once, each with ``TIMEOUT``."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)  # full: closed at once, never queued
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class HealthServer:
    """``/healthz`` (the loop is alive), ``/readyz`` (the cache has synced) and ``/metrics`` (for a
    token ``auth`` allows, when given)."""

    def __init__(
        self,
        port: int,
        metrics: Metrics,
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
        host: str,
        auth: MetricsAuth | None = None,
    ) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            timeout = TIMEOUT  # the socket's: a client that sends nothing is dropped

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path == "/metrics":
                    allowed = (
                        True if outer.auth is None else outer.auth.allows(self.headers.get("Authorization"))
                    )
                    if allowed is None:
                        self._send(401, b"a bearer token is required\n")
                    elif not allowed:
                        self._send(403, b"forbidden\n")
                    else:
                        self._send(200, outer.metrics.render(), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/livez"):
                    ok = outer.healthy()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"loop stalled\n")
                elif path == "/readyz":
                    ok = outer.ready()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"cache not synced\n")
                else:
                    self._send(404, b"not found\n")

            def _send(self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.metrics, self.healthy, self.ready, self.auth = metrics, healthy, ready, auth
        self.server = _Server((host, port), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="health", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
