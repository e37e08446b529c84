"""Issue 20 on the Kubernetes adapter: what a tenant's own objects make of the snapshot (gates,
matchFields, several budgets, volume claims), the eviction the API server refuses for good, and the
metrics endpoint a stolen token or an idle connection could abuse."""

from __future__ import annotations

import copy
import json
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from makeroom.controller.port import EvictionRefusedError
from makeroom.kube import metrics as health
from makeroom.kube.client import Api, RateLimiter, Transport
from makeroom.kube.metrics import HealthServer, Metrics, MetricsAuth
from makeroom.kube.slim import Interner, slim_pod
from makeroom.model import static_fit
from makeroom.snapshot import state_from_objects
from tests.builders.http import scrape
from tests.builders.kube import NS, node, pod, pod_path
from tests.kube.test_store import GROUPS, cluster_objects, kube


def snapshot(*objects: dict[str, Any]) -> Any:
    """The state makeroom plans on, from the slimmed objects as the watch cache keeps them."""
    interner = Interner()
    objects = (node("g1", "gpu"), *objects)
    slim = [o if o["kind"] != "Pod" else slim_pod(o, interner) for o in objects]
    return state_from_objects([o for o in slim if o is not None], GROUPS, source="test")


def pending_with(name: str, **spec: Any) -> dict[str, Any]:
    p = pod(name, None)
    p["spec"].update(spec)
    return p


# --- what the snapshot reads ---------------------------------------------------------------------------
def test_a_gated_pod_is_not_pending_for_makeroom() -> None:
    state = snapshot(node("n1"), pending_with("gated", schedulingGates=[{"name": "team.io/wait"}]))
    assert state.pods[f"{NS}/gated"].gated and state.pending() == []


def test_match_fields_pins_a_pod_to_the_nodes_it_names() -> None:
    """Before: a term with only matchFields read as "matches every node", so makeroom made room for a
    pod the scheduler would only place on one node (an honest DaemonSet-style pod too)."""

    def terms(*t: dict[str, Any]) -> dict[str, Any]:
        required = {"nodeSelectorTerms": list(t)}
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}

    affinity = terms({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]})
    empty = terms({})
    state = snapshot(
        node("n1"),
        node("n2"),
        pending_with("pinned", affinity=affinity),
        pending_with("empty-term", affinity=empty),
    )
    fits = {
        p: {n for n in state.nodes if static_fit(state.pods[f"{NS}/{p}"].spec, state.nodes[n]) is None}
        for p in ("pinned", "empty-term")
    }
    assert fits == {"pinned": {"n2"}, "empty-term": set()}


def test_every_budget_over_a_pod_is_kept() -> None:
    def budget(name: str) -> dict[str, Any]:
        return {
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"maxUnavailable": 5, "selector": {"matchLabels": {"app": "web"}}},
        }

    state = snapshot(node("n1"), pod("a", "n1"), budget("one"), budget("two"))
    (web,) = state.workloads.values()
    assert web.pdb is not None and len(web.more_pdbs) == 1


def test_a_claim_survives_the_slimming() -> None:
    p = pod("db-0", "n1")
    p["metadata"]["ownerReferences"] = [{"kind": "StatefulSet", "name": "db", "controller": True, "uid": "s"}]
    p["spec"]["volumes"].append({"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}})
    state = snapshot(node("n1"), p)
    assert state.pods[f"{NS}/db-0"].spec.claims_volume


# --- the eviction the API server refuses for good -----------------------------------------------------
def test_an_eviction_answered_500_for_several_budgets_is_a_refusal_and_not_retried() -> None:
    server = cluster_objects()
    kc = kube(server)
    real = server.request

    def several(method: str, path: str, body: Any, headers: Mapping[str, str], timeout: float) -> Any:
        if path.endswith("/eviction"):
            server.calls.append((method, path, body))
            message = (
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
                "not support."
            )
            return 500, json.dumps({"kind": "Status", "code": 500, "message": message}).encode()
        return real(method, path, body, headers, timeout)

    server.request = several  # type: ignore[method-assign]
    with pytest.raises(EvictionRefusedError):
        kc.evict(f"{NS}/a")
    assert len([c for c in server.calls if c[1].endswith("/eviction")]) == 1
    assert pod_path("a") in server.objects


# --- /metrics, /healthz --------------------------------------------------------------------------------
class Reviews(Transport):
    """The API server's TokenReview and SubjectAccessReview: ``tokens`` maps a token to its user;
    ``readers`` are the users who may get /metrics."""

    def __init__(self, tokens: dict[str, str], readers: set[str]) -> None:
        self.tokens, self.readers = tokens, readers
        self.calls: list[str] = []

    def request(
        self, method: str, path: str, body: Any, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, bytes]:
        self.calls.append(path)
        answer = copy.deepcopy(body)
        if path.endswith("/tokenreviews"):
            user = self.tokens.get(body["spec"]["token"])
            answer["status"] = {"authenticated": user is not None, "user": {"username": user} if user else {}}
        else:
            attrs = body["spec"]["nonResourceAttributes"]
            allowed = body["spec"]["user"] in self.readers and attrs == {"path": "/metrics", "verb": "get"}
            answer["status"] = {"allowed": allowed}
        return 201, json.dumps(answer).encode()

    def stream(self, path: str, timeout: float) -> tuple[int, Iterator[bytes], Callable[[], None]]:
        raise NotImplementedError


def test_metrics_need_a_token_the_api_server_lets_read_them() -> None:
    """Before: /metrics answered anyone who could reach the port."""
    reviews = Reviews({"prom": "system:serviceaccount:monitoring:prometheus", "other": "mallory"}, set())
    reviews.readers.add("system:serviceaccount:monitoring:prometheus")
    auth = MetricsAuth(Api(reviews, RateLimiter(0, 1), retries=0))
    server = HealthServer(0, Metrics(), lambda: True, lambda: True, "127.0.0.1", auth)
    server.start()
    try:
        assert scrape(server.port, None) == 401
        assert scrape(server.port, "stolen-nothing") == 403
        assert scrape(server.port, "other") == 403  # authenticated, but not allowed to read
        assert scrape(server.port, "prom") == 200
        calls = len(reviews.calls)
        assert scrape(server.port, "prom") == 200 and len(reviews.calls) == calls  # the answer is kept
        health_status = urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5).status
        assert health_status == 200  # probes need no token
    finally:
        server.stop()


def test_an_idle_connection_is_closed_and_connections_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: each idle connection held a thread for ever, with no cap."""
    monkeypatch.setattr(health, "TIMEOUT", 0.5)
    monkeypatch.setattr(health, "MAX_CONNECTIONS", 2)
    server = HealthServer(0, Metrics(), lambda: True, lambda: True, "127.0.0.1")
    server.start()
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(2)]
    try:
        closed = threading.Event()
        extra = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        assert extra.recv(1) == b""  # over the cap: closed at once, never queued
        closed.set()
        extra.close()
        for s in idle:
            assert s.recv(1) == b""  # the server hung up on the idle ones
        assert scrape(server.port, None) == 200  # and serves again
    finally:
        for s in idle:
            s.close()
        server.stop()
