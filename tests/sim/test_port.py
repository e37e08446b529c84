"""The simulator's side of the controller's port: every Event reason has its timeline kind."""

from __future__ import annotations

from makeroom.controller import ObjectKind, Reason
from makeroom.sim.port import GENERIC_KIND, TIMELINE_KINDS, SimCluster
from tests.builders.scenario import group, run, scenario, workload


def test_every_reason_has_a_timeline_kind() -> None:
    assert set(TIMELINE_KINDS) == set(Reason)
    relocation = {r for r in Reason if r.name.startswith("CONSOLIDAT")} ^ set(Reason)
    assert GENERIC_KIND not in {TIMELINE_KINDS[r] for r in relocation}


def test_an_event_lands_in_the_timeline_with_its_reason_and_object() -> None:
    sim, _ = run(scenario([group("cpu")], [workload("web", 1)]), until=0.0)
    SimCluster(sim.world).emit_event(ObjectKind.NODE, "cpu-0", Reason.CONSOLIDATED, "empty")
    last = sim.recorder.events[-1]
    assert last.to_json() == {
        "t": 0.0,
        "kind": GENERIC_KIND,
        "reason": "Consolidated",
        "object": "Node/cpu-0",
        "message": "empty",
    }
