"""Issue 20, per-namespace fairness on the adapter: a tenant's own objects (thousands of pods it marked
`makeroom.io/victim-of`) get turns from their namespace's share of the rate limit, taken only from what
room-making leaves, so they delay neither another namespace's cleanup nor a relocation. On the
in-memory API server, with the rate limiter on a virtual clock."""

from __future__ import annotations

from typing import Any

from makeroom.controller import ConsolidationConfig, ControllerConfig, Strategy
from makeroom.kube.cleanup import CleanupOptions, clean_up
from makeroom.kube.client import Api, NamespaceShares, RateLimiter
from makeroom.kube.runner import Runner, RunOptions
from tests.builders.kube import NS, namespace, pod
from tests.kube.fake import FakeApiServer
from tests.kube.test_runner import GROUPS, cluster
from tests.kube.test_store import MINE, cluster_objects

MARK = "makeroom.io/victim-of"


class Clock:
    """Virtual seconds: the limiter's waits move it on, and nothing else does."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waited = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.waited += seconds


def test_each_namespace_has_its_turns_and_the_shared_limit_keeps_its_reserve() -> None:
    clock = Clock()
    shared = RateLimiter(20.0, 30, clock, clock.sleep)
    shares = NamespaceShares(shared, qps=2.0, burst=10, keep=15)
    assert [shares.take("team-x") for _ in range(11)].count(True) == 10  # its burst, then no more
    assert shares.take("team-y")  # another namespace's turn is its own
    clock.now += 0.5
    assert [shares.take("team-x") for _ in range(3)] == [True, False, False]  # 2 a second
    for _ in range(20):
        shares.take(f"team-{_}")
    assert shared.acquire() == 0.0  # room-making never waits for what the tidying took
    assert shared.try_acquire(keep=0) and clock.waited == 0.0


def runner(server: FakeApiServer, clock: Clock) -> Runner:
    api = Api(server, RateLimiter(20.0, 30, clock, clock.sleep), sleep=clock.sleep)
    opts = RunOptions(
        config=ControllerConfig(strategy=Strategy.EVICT, consolidation=ConsolidationConfig(enabled=False)),
        groups=GROUPS,
        metrics_port=None,
        leader_elect=False,
    )
    return Runner(api, opts)


def marked(server: FakeApiServer, ns: str, count: int) -> None:
    server.put(*namespace(ns))
    for i in range(count):
        p = pod(f"spam-{i}", None, cpu="0")
        p["metadata"]["namespace"] = ns
        p["metadata"]["annotations"] = {MARK: f"{NS}/p"}
        p["spec"]["schedulingGates"] = [{"name": "team.io/wait"}]  # never placed: pods the tenant parks
        server.put(f"/api/v1/namespaces/{ns}/pods/spam-{i}", p)


def unmarked(server: FakeApiServer, ns: str, since: int) -> int:
    return sum(
        1
        for method, path, body in server.calls[since:]
        if method == "PATCH" and path.startswith(f"/api/v1/namespaces/{ns}/pods/") and body is not None
    )


def test_a_tenant_s_thousands_of_marks_delay_no_relocation_elsewhere() -> None:
    """Before: the marks were removed 50 a round through the one rate limit, which they emptied: the
    relocation of the round right after (a new pending pod wakes the loop at once) waited 0.75 s for
    the tokens they took, and one namespace took 48 of the round's 50 turns."""
    server = cluster()
    pending: dict[str, Any] = server.objects.pop(f"/api/v1/namespaces/{NS}/pods/p")
    marked(server, "team-x", 3000)
    marked(server, "team-y", 2)
    clock = Clock()
    r = runner(server, clock)
    for inf in r.cache.informers.values():
        inf.relist()
    clock.now += 10.0  # the lists' tokens back
    clock.waited, before = 0.0, len(server.calls)
    r.once()  # nothing waits for room: only the tidying
    assert unmarked(server, "team-y", before) == 2  # another tenant's marks are not crowded out
    # team-x: some of its marks, never more than its namespace's burst, only what the reserve leaves
    assert 0 < unmarked(server, "team-x", before) <= 10
    # The pending pod arrives as the round ends: its watch event wakes the loop at once.
    r.cache.informers["Pod"].apply(
        {"type": "ADDED", "object": server.put(f"/api/v1/namespaces/{NS}/pods/p", pending)}
    )
    clock.waited, before = 0.0, len(server.calls)
    r.once()
    relocation = [c for c in server.calls[before:] if c[0] != "GET" and f"/namespaces/{NS}/" in c[1]]
    assert any(path.endswith("/eviction") for _, path, _ in relocation)
    assert clock.waited == 0.0  # not one token of the relocation's was waited for
    assert unmarked(server, "team-x", before) <= 10


def test_makeroom_cleanup_takes_no_turns_it_removes_every_mark_at_once() -> None:
    """Before an uninstall nothing can wait for a later round: every mark goes in the one pass."""
    server = cluster_objects()
    marked(server, "team-x", 40)
    clock = Clock()
    api = Api(server, RateLimiter(20.0, 30, clock, clock.sleep), sleep=clock.sleep)
    result = clean_up(api, CleanupOptions(records_namespace=MINE, lease_namespace=MINE), sleep=clock.sleep)
    assert unmarked(server, "team-x", 0) == 40
    assert result.passes == 2  # one that removed them all, one that found nothing left
