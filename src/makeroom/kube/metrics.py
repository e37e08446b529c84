"""Prometheus metrics (``makeroom_`` prefix) and the health, readiness and metrics HTTP endpoints."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        self.relocations = Counter(
            "makeroom_relocations",
            "Relocations by outcome (outcome: started, done, rolled_back).",
            ["outcome"],
            registry=r,
        )
        for outcome in ("started", "done", "rolled_back"):
            self.relocations.labels(outcome=outcome)
        self.moves = Counter("makeroom_moves", "Pods marked to move to make room (victims).", registry=r)
        self.actions = Counter(
            "makeroom_actions", "Mutating API calls made, by verb (verb).", ["verb"], registry=r
        )
        self.errors = Counter(
            "makeroom_reconcile_errors",
            "Steps of a reconciliation that failed and wait to retry.",
            registry=r,
        )
        self.plan_latency = Histogram(
            "makeroom_plan_latency_seconds",
            "Seconds of one reconciliation as the leader: snapshot, plan and the actions it took.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10),
            registry=r,
        )
        self.first_action = Histogram(
            "makeroom_unschedulable_to_action_seconds",
            "Seconds from the watch event of a pod becoming unschedulable to makeroom's first action for it.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
            registry=r,
        )
        self.pending = Gauge(
            "makeroom_pending_pods_waiting", "Unschedulable pods waiting for room.", registry=r
        )
        self.in_flight = Gauge(
            "makeroom_relocations_in_flight", "Relocations under way (records on pending pods).", registry=r
        )
        self.leader = Gauge("makeroom_leader", "1 while this replica holds the lease and acts.", registry=r)
        self.cache_objects = Gauge(
            "makeroom_cache_objects", "Objects in the watch cache, by kind (kind).", ["kind"], registry=r
        )
        self.build_seconds = Gauge(
            "makeroom_snapshot_build_seconds", "Seconds of the last cache-to-state build.", registry=r
        )

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
        host: str = "0.0.0.0",
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
