"""Prometheus metrics and the health, readiness and metrics HTTP endpoints.

Names follow ``makeroom_<subsystem>_<name>`` with ``_total`` for counters and ``_seconds`` for times;
each help text names its labels. docs/kube.md has the table (a test keeps it in step with this file).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from makeroom.controller import TickReport
from makeroom.controller.reasons import Fallback

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


class HealthServer:
    """``/healthz`` (the loop is alive), ``/readyz`` (the cache has synced) and ``/metrics``."""

    def __init__(
        self,
        port: int,
        metrics: Metrics,
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
        host: str,
    ) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path == "/metrics":
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

        self.metrics, self.healthy, self.ready = metrics, healthy, ready
        self.server = ThreadingHTTPServer((host, port), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="health", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
