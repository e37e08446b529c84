"""The one place that talks HTTP to the API server: connect (kubeconfig or in-cluster), a client-side
rate limit, retries with backoff on transient failures, errors mapped to the controller's port errors,
JSON in and out as plain dicts (no generated model objects), paged lists and line-by-line watches.

Only this module and the modules of this package import ``kubernetes``; the client's objects never
leave it: callers get dicts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from makeroom.controller.port import ClusterError, ConflictError, NotFoundError

log = logging.getLogger("makeroom.kube")

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
RETRIABLE = frozenset({0, 429, 500, 502, 503, 504})


class KubeError(ClusterError):
    """An API call failed; ``status`` is the HTTP status (0: no answer at all)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class GoneError(KubeError):
    """410: the resourceVersion a watch asked for is too old; relist."""


class NotLeaderError(ClusterError):
    """This replica does not hold the lease (or no longer long enough for another attempt): it must
    not act."""


Fence = Callable[[], float]
"""Seconds this replica may still act for (its lease's remaining validity); 0 or less: not at all."""


class ConnectError(Exception):
    """No usable kubeconfig, or an API server that does not answer or refuses the credentials: a message
    for the user, exit 2 (nothing was done)."""


@dataclass(frozen=True, slots=True)
class ConnectOptions:
    kubeconfig: str | None = None
    context: str | None = None
    impersonate: str | None = None
    """``--as``: a user name (e.g. system:serviceaccount:NS:NAME) whose permissions every call gets."""
    qps: float = 20.0
    burst: int = 30
    timeout: float = 30.0


class RateLimiter:
    """A token bucket, as client-go's: ``qps`` tokens a second, at most ``burst`` saved up."""

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.qps, self.burst = qps, max(1, burst)
        self.clock, self._sleep = clock, sleep
        self._tokens = float(self.burst)
        self._at = clock()
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Take one token, waiting for it if need be; returns the seconds waited."""
        if self.qps <= 0:
            return 0.0
        with self._lock:
            self._refill()
            self._tokens -= 1.0
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait

    def try_acquire(self, keep: float = 0.0) -> bool:
        """Take one token only if ``keep`` would still be left after it; never waits."""
        if self.qps <= 0:
            return True
        with self._lock:
            self._refill()
            if self._tokens - 1.0 < keep:
                return False
            self._tokens -= 1.0
            return True

    def has(self, keep: float = 0.0) -> bool:
        """Whether one token could be taken now with ``keep`` still left after it; takes none."""
        if self.qps <= 0:
            return True
        with self._lock:
            self._refill()
            return self._tokens - 1.0 >= keep

    def _refill(self) -> None:
        now = self.clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
        self._at = now

    def give_back(self) -> None:
        """Return a token taken with ``try_acquire`` and not used."""
        with self._lock:
            self._tokens = min(float(self.burst), self._tokens + 1.0)


class NamespaceShares:
    """Turns by namespace for the writes that can wait for a later round (removing marks no record
    explains, which a tenant can multiply on its own pods): each namespace has its own small token
    bucket, and a turn is also taken from the shared limiter only while ``keep`` of its tokens stay
    for the writes that cannot wait (room-making). So one namespace's thousands of objects take at
    most its own share, never another namespace's, and never the shared rate limit itself. A turn is
    refused at once, never waited for: what is refused is done in a later round."""

    def __init__(
        self,
        shared: RateLimiter,
        qps: float | None = None,
        burst: int = 10,
        keep: float | None = None,
    ) -> None:
        self.shared = shared
        self.qps = shared.qps / 10 if qps is None else qps
        self.burst = burst
        # two thirds of the burst: a round that makes room reads its five kinds of record and writes
        # about four times a victim, so two victims' relocation is sent without a wait
        self.keep = shared.burst * 2 / 3 if keep is None else keep
        self._buckets: dict[str, RateLimiter] = {}

    def take(self, namespace: str) -> bool:
        """A write on an object of ``namespace`` that can wait: True when it may be sent now."""
        if self.shared.qps <= 0:
            return True
        bucket = self._buckets.get(namespace)
        if bucket is None:
            bucket = self._buckets[namespace] = RateLimiter(self.qps, self.burst, self.shared.clock)
        if not bucket.try_acquire():
            return False
        if not self.shared.has(self.keep):  # the write itself takes its token from the shared limiter
            bucket.give_back()
            return False
        return True


def _message(status: int, body: str, fallback: str) -> str:
    try:
        data = json.loads(body)
        if isinstance(data, dict) and data.get("message"):
            return f"{status}: {data['message']}"
    except ValueError:
        pass
    return f"{status}: {fallback or body[:200]}"


def error_for(status: int, message: str) -> KubeError:
    if status == 404:
        return _NotFoundError(status, message)
    if status == 409:
        return _ConflictError(status, message)
    if status == 410:
        return GoneError(status, message)
    return KubeError(status, message)


class _NotFoundError(KubeError, NotFoundError):
    pass


class _ConflictError(KubeError, ConflictError):
    pass


class Transport:
    """What Api needs from an HTTP client: one request, answered by (status, body bytes), or a
    streaming response. The real one wraps ``kubernetes.client.ApiClient``; tests give a fake."""

    def request(
        self, method: str, path: str, body: Any, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, bytes]:
        raise NotImplementedError

    def stream(self, path: str, timeout: float) -> tuple[int, Iterator[bytes], Callable[[], None]]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class KubernetesTransport(Transport):
    def __init__(self, api_client: Any) -> None:
        self.client = api_client

    def _send(self, method: str, path: str, body: Any, headers: Mapping[str, str], timeout: Any) -> Any:
        m, url, hdrs, data, _ = self.client.param_serialize(
            method, path, header_params=dict(headers), body=body, auth_settings=["BearerToken"]
        )
        return self.client.call_api(m, url, header_params=hdrs, body=data, _request_timeout=timeout)

    def request(
        self, method: str, path: str, body: Any, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, bytes]:
        resp = self._send(method, path, body, headers, timeout)
        try:
            return int(resp.status), bytes(resp.read() or b"")
        finally:
            resp.response.release_conn()

    def stream(self, path: str, timeout: float) -> tuple[int, Iterator[bytes], Callable[[], None]]:
        resp = self._send("GET", path, None, {"Accept": "application/json"}, (10.0, timeout))
        raw = resp.response
        if not 200 <= int(resp.status) <= 299:
            data = bytes(raw.data or b"")
            raw.release_conn()
            return int(resp.status), iter([data]), lambda: None
        return int(resp.status), raw.stream(amt=None, decode_content=True), raw.release_conn

    def close(self) -> None:
        self.client.close()


class Api:
    """JSON over the API server, rate limited, retried, with errors mapped to ClusterError."""

    def __init__(
        self,
        transport: Transport,
        limiter: RateLimiter | None = None,
        *,
        retries: int = 4,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        fence: Fence | None = None,
    ) -> None:
        self.transport = transport
        self.limiter = limiter or RateLimiter(20.0, 30)
        self.retries, self.backoff, self.max_backoff = retries, backoff, max_backoff
        self.timeout = timeout
        self._sleep = sleep
        self.fence = fence
        self.calls = 0
        self.on_attempt: Callable[[], None] | None = None
        """Called after each attempt, answered or not: the loop is making progress (liveness)."""

    def fenced(self, fence: Fence) -> Api:
        """This client (its transport, rate limit and retries) for writes only a leader may make: each
        attempt is sent only while ``fence`` says the lease holds, with a timeout within what is left
        of it, and no retry waits past it. (The lease's renew deadline is shorter than its duration, so
        an attempt sent in time ends, or is abandoned, before another replica may take over.)"""
        out = Api(
            self.transport,
            self.limiter,
            retries=self.retries,
            backoff=self.backoff,
            max_backoff=self.max_backoff,
            timeout=self.timeout,
            sleep=self._sleep,
            fence=fence,
        )
        out.on_attempt = self.on_attempt
        return out

    def _left(self, method: str, path: str) -> float:
        """The seconds the fence leaves for this attempt (inf without a fence)."""
        if self.fence is None:
            return float("inf")
        left = self.fence()
        if left <= 0:
            raise NotLeaderError(f"{method} {path}: not the leader (the lease is not ours now)")
        return left

    def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, str | int | bool] | None = None,
        body: Any = None,
        content_type: str | None = None,
        *,
        retry_statuses: frozenset[int] = RETRIABLE,
    ) -> JSON:
        url = path + ("?" + urlencode({k: _q(v) for k, v in query.items()}) if query else "")
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        attempt = 0
        while True:
            self.limiter.acquire()
            left = self._left(method, path)  # fenced on every attempt, not only the first
            self.calls += 1
            try:
                status, data = self.transport.request(method, url, body, headers, min(self.timeout, left))
                text = data.decode("utf-8", errors="replace")
            except Exception as exc:  # no answer: connection refused, reset, timed out, TLS ...
                status, text = 0, f"{type(exc).__name__}: {exc}"
            if self.on_attempt is not None:
                self.on_attempt()
            if 200 <= status <= 299:
                return json.loads(text) if text.strip() else {}
            message = _message(status, text, text)
            wait = min(self.max_backoff, self.backoff * 2**attempt)
            if self.fence is not None and status in retry_statuses and attempt < self.retries:
                left = self.fence()
                if wait >= left:  # the next attempt would come after the lease may have gone
                    log.warning(
                        "API call failed; no retry within the lease",
                        extra={"method": method, "path": path, "status": status, "lease_left_s": left},
                    )
                    raise error_for(status, f"{method} {path}: {message}")
            if status in retry_statuses and attempt < self.retries:
                attempt += 1
                log.warning(
                    "API call failed; retrying",
                    extra={
                        "method": method,
                        "path": path,
                        "status": status,
                        "error": message,
                        "wait_s": wait,
                    },
                )
                self._sleep(wait)
                continue
            log.warning(
                "API call failed", extra={"method": method, "path": path, "status": status, "error": message}
            )
            raise error_for(status, f"{method} {path}: {message}")

    def get(self, path: str, query: Mapping[str, str | int | bool] | None = None) -> JSON:
        return self.request("GET", path, query)

    def patch(self, path: str, body: Any, content_type: str = MERGE_PATCH) -> JSON:
        return self.request("PATCH", path, body=body, content_type=content_type)

    def list_all(
        self, path: str, query: Mapping[str, str | int | bool] | None = None, page: int = 500
    ) -> JSON:
        """All items of a collection, in pages of ``page`` (a consistent snapshot: one resourceVersion),
        as ``{"items": [...], "resourceVersion": rv}``. Use ``list_pages`` to slim items as they come."""
        items: list[JSON] = []
        version = ""
        for chunk, rv in self.list_pages(path, query, page):
            items.extend(chunk)
            version = rv
        return {"items": items, "resourceVersion": version}

    def list_pages(
        self, path: str, query: Mapping[str, str | int | bool] | None = None, page: int = 500
    ) -> Iterator[tuple[list[JSON], str]]:
        cont = ""
        while True:
            q: dict[str, str | int | bool] = {**(query or {}), "limit": page}
            if cont:
                q["continue"] = cont
            data = self.get(path, q)
            meta = data.get("metadata") or {}
            yield list(data.get("items") or []), str(meta.get("resourceVersion") or "")
            cont = str(meta.get("continue") or "")
            if not cont:
                return

    def watch(
        self, path: str, query: Mapping[str, str | int | bool], timeout_seconds: int = 300
    ) -> Iterator[JSON]:
        """Watch events (``{"type": ..., "object": {...}}``) until the server ends the watch. Raises
        GoneError when the resourceVersion is too old, KubeError when the watch cannot start."""
        q = {**query, "watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": timeout_seconds}
        url = path + "?" + urlencode({k: _q(v) for k, v in q.items()})
        self.limiter.acquire()
        self.calls += 1
        try:
            status, chunks, close = self.transport.stream(url, timeout_seconds + 30.0)
        except Exception as exc:
            raise KubeError(0, f"watch {path}: {type(exc).__name__}: {exc}") from exc
        try:
            if not 200 <= status <= 299:
                body = b"".join(chunks).decode("utf-8", errors="replace")
                raise error_for(status, f"watch {path}: {_message(status, body, body)}")
            buffer = bytearray()
            for chunk in chunks:
                buffer.extend(chunk)
                while (nl := buffer.find(b"\n")) >= 0:
                    line = bytes(buffer[:nl])
                    del buffer[: nl + 1]
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        obj = event.get("object") or {}
                        code = int(obj.get("code") or 0)
                        raise error_for(code, f"watch {path}: {code}: {obj.get('message', '')}")
                    yield event
        finally:
            close()

    def close(self) -> None:
        self.transport.close()


def _q(v: str | int | bool) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def path_of(namespace: str, name: str, plural: str, group: str = "", sub: str = "") -> str:
    base = f"/apis/{group}" if group else "/api/v1"
    out = f"{base}/namespaces/{quote(namespace)}/{plural}/{quote(name)}"
    return out + (f"/{sub}" if sub else "")


def _load_configuration(opts: ConnectOptions) -> Any:
    from kubernetes import client, config  # type: ignore[import-untyped,unused-ignore]

    configuration = client.Configuration()
    explicit = opts.kubeconfig or os.environ.get("KUBECONFIG")
    default = Path.home() / ".kube" / "config"
    in_cluster = "KUBERNETES_SERVICE_HOST" in os.environ
    try:
        if explicit or (not in_cluster and default.exists()):
            path = explicit or str(default)
            if opts.kubeconfig and not Path(opts.kubeconfig).exists():
                raise ConnectError(f"kubeconfig {opts.kubeconfig}: no such file")
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=path, context=opts.context, client_configuration=configuration
            )
            where = f"kubeconfig {path}" + (f" (context {opts.context})" if opts.context else "")
        elif in_cluster:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            where = "in-cluster service account"
        else:
            raise ConnectError(
                "no kubeconfig: pass --kubeconfig, set KUBECONFIG, or run in a pod with a service account"
            )
    except ConnectError:
        raise
    except Exception as exc:  # the loader raises ConfigException, ValueError, yaml errors ...
        raise ConnectError(f"{opts.kubeconfig or 'kubeconfig'}: {type(exc).__name__}: {exc}") from exc
    return configuration, where


def connect(opts: ConnectOptions, probe: bool = True) -> tuple[Api, str]:
    """An Api on the cluster of the kubeconfig (or the pod's service account), and where it points.
    With ``probe``, asks the API server for /version first, so that an unreachable or refusing server
    is a ConnectError here rather than a failure later."""
    from kubernetes import client

    configuration, where = _load_configuration(opts)
    configuration.retries = False
    api_client = client.ApiClient(configuration)
    if opts.impersonate:
        api_client.set_default_header("Impersonate-User", opts.impersonate)  # type: ignore[no-untyped-call]
    api = Api(KubernetesTransport(api_client), RateLimiter(opts.qps, opts.burst), timeout=opts.timeout)
    where = f"{configuration.host} ({where})"
    if probe:
        probe_api = Api(api.transport, api.limiter, retries=1, backoff=0.5, timeout=10.0)
        try:
            with _quiet(log):  # the caller's one line says it all: no retry warnings before it
                probe_api.get("/version")
        except KubeError as exc:
            if exc.status in (401, 403):
                raise ConnectError(f"the API server at {where} refused the credentials: {exc}") from exc
            raise ConnectError(f"the API server at {where} does not answer: {exc}") from exc
    return api, where


@contextlib.contextmanager
def _quiet(logger: logging.Logger) -> Iterator[None]:
    """``logger`` silent meanwhile (at connect time no other thread logs through it)."""
    was, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = was
