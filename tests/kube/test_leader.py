"""Lease leader election against the in-memory API server, on a fake clock."""

from __future__ import annotations

from makeroom.kube.client import Api, RateLimiter
from makeroom.kube.leader import LeaderElector
from tests.kube.fake import FakeApiServer

LEASE = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/makeroom"


def electors(server: FakeApiServer, now: list[float]) -> tuple[LeaderElector, LeaderElector]:
    def make(identity: str) -> LeaderElector:
        api = Api(server, RateLimiter(0, 1), retries=0, sleep=lambda s: None)
        return LeaderElector(api, "ns", "makeroom", identity, clock=lambda: now[0])

    return make("a"), make("b")


def test_only_one_leader_and_the_lease_names_it() -> None:
    server, now = FakeApiServer(), [0.0]
    a, b = electors(server, now)
    assert a.step() and a.is_leader()
    assert not b.step() and not b.is_leader()
    spec = server.objects[LEASE]["spec"]
    assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 15
    for _ in range(10):  # a renews every 2 s; b never gets it
        now[0] += 2.0
        assert a.step() and not b.step()
    assert a.is_leader() and not b.is_leader()


def test_the_other_takes_over_once_the_lease_expires() -> None:
    server, now = FakeApiServer(), [0.0]
    a, b = electors(server, now)
    a.step()
    b.step()  # b observes a's record at t=0
    now[0] += 10.0  # a stops renewing (killed); its own view lapses at the renew deadline
    assert not a.is_leader()
    assert not b.step()  # 10 s < 15 s since b saw the record change
    now[0] += 5.1
    assert b.step() and b.is_leader()
    assert server.objects[LEASE]["spec"]["holderIdentity"] == "b"
    assert server.objects[LEASE]["spec"]["leaseTransitions"] == 1
    assert not a.step()  # a comes back: b holds it


def test_a_leader_that_cannot_renew_stops_within_the_renew_deadline() -> None:
    server, now = FakeApiServer(), [0.0]
    a, _ = electors(server, now)
    a.step()
    server.fail_next = [503] * 100
    now[0] += 9.9
    a.step()
    assert a.is_leader()
    now[0] += 0.2
    a.step()
    assert not a.is_leader()


def test_release_lets_the_next_candidate_in_at_once() -> None:
    server, now = FakeApiServer(), [0.0]
    a, b = electors(server, now)
    a.step()
    b.step()
    a.release()
    assert not a.is_leader()
    now[0] += 0.5
    assert b.step() and b.is_leader()


def test_a_leader_past_its_renew_deadline_still_releases_a_lease_that_names_it() -> None:
    """A replica stopping while a call hung past its renew deadline (SIGTERM during a call) gives the
    Lease up all the same; one that another replica took over is left alone."""
    server, now = FakeApiServer(), [0.0]
    a, b = electors(server, now)
    a.step()
    now[0] += 12.0  # past the renew deadline, within the lease duration
    assert not a.is_leader()
    a.release()
    assert server.objects[LEASE]["spec"]["holderIdentity"] == ""
    now[0] += 0.5
    assert b.step() and b.is_leader()
    now[0] += 12.0
    a._renewed = now[0] - 11.0  # a stale replica that once led
    a.release()
    assert server.objects[LEASE]["spec"]["holderIdentity"] == "b"


def test_conflicting_writes_make_one_winner() -> None:
    server, now = FakeApiServer(), [0.0]
    a, b = electors(server, now)
    a.step()
    now[0] += 20.0  # expired for both
    server.objects[LEASE]["spec"]["holderIdentity"] = "c"  # and someone else's write lands first
    server.put(LEASE, server.objects[LEASE])
    assert not b.step()  # a new record: b waits a full lease duration from now
