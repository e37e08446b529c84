"""The fault plan of the e2e fault proxy (no binaries needed, not marked e2e): which request gets
which fault is fixed by the seed, only while armed, and the Lease is never touched."""

from __future__ import annotations

from makeroom_e2e.faults import WRITE_CYCLE, Fault, FaultPlan

EVICT = "/api/v1/namespaces/a/pods/p/eviction"


def writes(plan: FaultPlan, n: int) -> list[Fault | None]:
    return [plan.decide("POST", EVICT, watch=False)[0] for _ in range(n)]


def test_nothing_is_injected_until_armed_and_after_disarmed() -> None:
    plan = FaultPlan()
    assert writes(plan, 6) == [None] * 6
    plan.arm()
    assert any(writes(plan, 6))
    plan.disarm()
    assert writes(plan, 6) == [None] * 6


def test_every_third_write_gets_the_next_fault_of_the_cycle() -> None:
    plan = FaultPlan(every=3)
    plan.arm()
    got = writes(plan, 3 * len(WRITE_CYCLE))
    assert got[2::3] == list(WRITE_CYCLE)
    assert [f for i, f in enumerate(got) if i % 3 != 2] == [None] * (2 * len(WRITE_CYCLE))


def test_reads_fail_now_and_then_and_watches_are_cut_within_their_life() -> None:
    plan = FaultPlan(every_read=7, watch_life=(2.0, 6.0))
    plan.arm()
    reads = [plan.decide("GET", "/api/v1/pods", watch=False)[0] for _ in range(14)]
    assert reads.count(Fault.READ_ERROR) == 2 and reads[6] is Fault.READ_ERROR
    lives = [plan.decide("GET", "/api/v1/pods", watch=True) for _ in range(20)]
    assert all(f is Fault.DROPPED_WATCH and 2.0 <= life <= 6.0 for f, life in lives)
    again = FaultPlan(every_read=7, watch_life=(2.0, 6.0))
    again.arm()
    for _ in range(14):
        again.decide("GET", "/api/v1/pods", watch=False)
    assert [again.decide("GET", "/api/v1/pods", watch=True) for _ in range(20)] == lives  # seeded


def test_the_lease_is_left_alone() -> None:
    plan = FaultPlan(every=1)
    plan.arm()
    lease = "/apis/coordination.k8s.io/v1/namespaces/m/leases/makeroom"
    assert {plan.decide(m, lease, watch=False)[0] for m in ("GET", "PUT", "POST")} == {None}
