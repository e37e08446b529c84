"""Faults on the real control plane, for `makeroom run` (issue 12, item 6): a proxy between makeroom
and the real kube-apiserver that answers some requests with 409, 429 or 500 instead of passing them
on, passes some on slowly, loses the answer of some it passed on, and cuts watch streams; and the
kube-apiserver restarted in place.

Test infrastructure, not product. The proxy listens on plain HTTP on loopback (makeroom gets a
kubeconfig pointing at it, with the control plane's token) and forwards over TLS to the API server,
headers and all (the token, the impersonation of makeroom's ServiceAccount). Which request gets which
fault is decided by a plan seeded like every random choice of the harness, so that a run can be
replayed: every ``every``-th write (POST, PUT, PATCH, DELETE) gets the next fault of a fixed cycle,
every ``every_read``-th read a 500, and every watch is cut after a few seconds, all only while the
plan is armed. Leases are left alone: fencing on the lease is unit-tested (tests/kube/test_fences.py)
and faults there would only make the runs slow. The API server being down is passed on as it is: the
connection to makeroom is closed without an answer.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import random
import re
import socket
import ssl
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from .cluster import ControlPlane, _start_apiserver


class Fault(StrEnum):
    """What the proxy does to one request."""

    CONFLICT = "409"
    """Answered 409 Conflict, not passed on (the object changed under the request)."""
    TOO_MANY = "429"
    """Answered 429, not passed on (on an eviction: the budget allows no disruption now)."""
    SERVER_ERROR = "500"
    """Answered 500, not passed on."""
    SLOW = "slow"
    """Passed on after a delay (seconds of ``FaultPlan.slow``)."""
    LOST_ANSWER = "lost-answer"
    """Passed on, and done, but its answer lost: 503 instead (the client retries what already
    happened: every write must be idempotent)."""
    DROPPED_WATCH = "dropped-watch"
    """A watch stream cut without its end (the client resumes from the last resourceVersion)."""
    READ_ERROR = "read-500"
    """A read (GET, LIST) answered 500, not passed on."""


WRITE_CYCLE = (Fault.SERVER_ERROR, Fault.CONFLICT, Fault.SLOW, Fault.TOO_MANY, Fault.LOST_ANSWER)
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SPARED = re.compile(r"/leases(/|$)")


@dataclass
class FaultPlan:
    """Which request gets which fault, deterministically (seeded). Armed with ``arm()``."""

    seed: int = 12
    every: int = 3
    every_read: int = 7
    slow: float = 2.5
    watch_life: tuple[float, float] = (2.0, 6.0)
    cycle: tuple[Fault, ...] = WRITE_CYCLE
    armed: threading.Event = field(default_factory=threading.Event)
    injected: Counter[Fault] = field(default_factory=Counter)
    log: list[tuple[float, Fault, str, str]] = field(default_factory=list)  # (t, fault, method, path)
    _writes: int = 0
    _reads: int = 0
    _next: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def arm(self) -> None:
        self.armed.set()

    def disarm(self) -> None:
        self.armed.clear()

    def decide(self, method: str, path: str, watch: bool) -> tuple[Fault | None, float]:
        """The fault for a request (None: passed on as it is), and for a watch, its life."""
        if not self.armed.is_set() or SPARED.search(path):
            return None, 0.0
        with self._lock:
            if watch:
                return Fault.DROPPED_WATCH, self._rng.uniform(*self.watch_life)
            if method in WRITES:
                self._writes += 1
                if self._writes % self.every:
                    return None, 0.0
                fault = self.cycle[self._next % len(self.cycle)]
                self._next += 1
                return fault, 0.0
            self._reads += 1
            return (Fault.READ_ERROR if self._reads % self.every_read == 0 else None), 0.0

    def count(self, fault: Fault, method: str, path: str) -> None:
        with self._lock:
            self.injected[fault] += 1
            self.log.append((time.monotonic(), fault, method, path))


@dataclass
class Hold:
    """Holds the next request that matches until released (to kill makeroom during a call)."""

    method: str
    path: re.Pattern[str]
    watch: bool | None = None
    """Only a watch (True), only a plain request (False), or either (None)."""
    holding: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    taken: bool = False


class FaultProxy:
    """The proxy: ``url`` to give makeroom (``kubeconfig()`` writes one), ``plan`` to arm."""

    def __init__(self, cp: ControlPlane, plan: FaultPlan | None = None) -> None:
        self.cp = cp
        self.plan = plan or FaultPlan()
        self.hold: Hold | None = None
        upstream = urlsplit(cp.api_url)
        self.upstream = (upstream.hostname or "127.0.0.1", upstream.port or 443)
        self.ctx = ssl.create_default_context(cafile=str(cp.credentials.ca_cert))
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                outer._handle(self)

            def do_POST(self) -> None:
                outer._handle(self)

            def do_PUT(self) -> None:
                outer._handle(self)

            def do_PATCH(self) -> None:
                outer._handle(self)

            def do_DELETE(self) -> None:
                outer._handle(self)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="fault-proxy", daemon=True)

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.plan.disarm()
        if self.hold is not None:
            self.hold.release.set()
        self.server.shutdown()
        self.server.server_close()

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig for makeroom: this proxy, with the control plane's token."""
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "faults", "cluster": {"server": self.url}}],
            "users": [{"name": "admin", "user": {"token": self.cp.credentials.token}}],
            "contexts": [{"name": "faults", "context": {"cluster": "faults", "user": "admin"}}],
            "current-context": "faults",
        }
        path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
        path.chmod(0o600)
        return path

    def hold_next(self, method: str, path: str, watch: bool | None = None) -> Hold:
        """The next ``method`` request whose path matches ``path`` (and is a watch or not, as
        ``watch`` says) is held (its ``holding`` set) until ``release`` is set; then passed on."""
        self.hold = Hold(method, re.compile(path), watch)
        return self.hold

    # --- one request ------------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        method, path = h.command, h.path
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else None
        split = urlsplit(path)
        watch = "watch=true" in split.query or "watch=1" in split.query
        hold = self.hold
        if (
            hold is not None
            and not hold.taken
            and method == hold.method
            and hold.path.search(split.path)
            and hold.watch in (None, watch)
        ):
            hold.taken = True
            hold.holding.set()
            hold.release.wait(120)
        fault, life = self.plan.decide(method, split.path, watch)
        if fault in (Fault.CONFLICT, Fault.TOO_MANY, Fault.SERVER_ERROR, Fault.READ_ERROR):
            self.plan.count(fault, method, split.path)
            status = 500 if fault is Fault.READ_ERROR else int(fault.value)
            self._status(h, status, f"injected by the fault proxy: {fault.value}")
            return
        if fault is Fault.SLOW:
            self.plan.count(fault, method, split.path)
            time.sleep(self.plan.slow)
        headers = {
            k: v
            for k, v in h.headers.items()
            if k.lower() not in ("host", "connection", "accept-encoding", "content-length", "keep-alive")
        }
        try:
            conn = http.client.HTTPSConnection(*self.upstream, context=self.ctx, timeout=60)
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
        except OSError:
            h.close_connection = True  # the API server is down: no answer at all, as without a proxy
            return
        try:
            if watch and resp.status == 200:
                self._stream(h, resp, conn, fault, life, method, split.path)
                return
            data = resp.read()
            if fault is Fault.LOST_ANSWER:
                self.plan.count(fault, method, split.path)
                self._status(h, 503, "injected by the fault proxy: the answer was lost")
                return
            h.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() in ("content-type", "audit-id", "warning"):
                    h.send_header(k, v)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
        finally:
            conn.close()

    def _stream(
        self,
        h: BaseHTTPRequestHandler,
        resp: http.client.HTTPResponse,
        conn: http.client.HTTPSConnection,
        fault: Fault | None,
        life: float,
        method: str,
        path: str,
    ) -> None:
        """Relay a watch, chunk by chunk; cut it (no final chunk) when its life is over. A watch that
        began before the plan was armed gets its life when the plan is armed."""
        h.send_response(200)
        h.send_header("Content-Type", resp.getheader("Content-Type") or "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        deadline = time.monotonic() + life if fault is Fault.DROPPED_WATCH else None
        chunks: queue.Queue[bytes] = queue.Queue()

        def pump() -> None:  # a timed-out socket file cannot be read again: wait on a queue instead
            try:
                while chunk := resp.read1(65536):
                    chunks.put(chunk)
            except Exception:  # the upstream closed under it (a cut watch): the pump ends
                pass
            chunks.put(b"")

        threading.Thread(target=pump, name="fault-proxy-watch", daemon=True).start()
        try:
            while True:
                if deadline is None and self.plan.armed.is_set():
                    fault, life = self.plan.decide(method, path, watch=True)
                    if fault is Fault.DROPPED_WATCH:
                        deadline = time.monotonic() + life
                if deadline is not None and time.monotonic() >= deadline:
                    self.plan.count(Fault.DROPPED_WATCH, method, path)
                    h.close_connection = True
                    with contextlib.suppress(OSError):
                        h.connection.shutdown(socket.SHUT_RDWR)
                    return
                try:
                    chunk = chunks.get(timeout=0.25)
                except queue.Empty:
                    continue
                if not chunk:
                    break
                h.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                h.wfile.flush()
            h.wfile.write(b"0\r\n\r\n")
        except OSError:
            h.close_connection = True

    @staticmethod
    def _status(h: BaseHTTPRequestHandler, code: int, message: str) -> None:
        reason = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}
        body = json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": message,
                "reason": reason.get(code, "Unknown"),
                "code": code,
            }
        ).encode()
        h.send_response(code)
        h.send_header("Content-Type", "application/json")
        if code == 429:
            h.send_header("Retry-After", "1")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)


def restart_apiserver(cp: ControlPlane) -> float:
    """Stop kube-apiserver and start it again on the same port and storage; the seconds it was away.
    The other components (and makeroom) reconnect on their own."""
    started = time.monotonic()
    cp.processes.pop("kube-apiserver").stop()
    _start_apiserver(cp)
    return time.monotonic() - started


def described(plan: FaultPlan) -> dict[str, Any]:
    """The faults injected, by kind (for the test's report)."""
    return {f.value: plan.injected.get(f, 0) for f in Fault}
