"""The records the controller keeps in its own store: typed, round-tripped through their plain fields,
and refused (None) when damaged or of the other kind."""

from __future__ import annotations

import json

from makeroom.controller import Strategy
from makeroom.controller.records import (
    Consolidation,
    Phase,
    RecordKind,
    Records,
    Relocation,
    Surge,
    Victim,
)
from makeroom.controller.steps import RetryKey, RetryKind, Step


def relocation(phase: Phase = Phase.HOLDING) -> Relocation:
    return Relocation(
        pod="default/text-generator-0",
        strategy=Strategy.MIGRATE,
        node="gpu-0",
        started=10.0,
        deadline=910.0,
        victims=[Victim("default/iris-0", "iris", "gpu-0"), Victim("default/job-1", None, "gpu-0")],
        phase=phase,
        since=10.0,
        surge={"iris": Surge(by=1, base=10, need_ready=10)},
        why="making room on gpu-0",
    )


def test_a_relocation_round_trips_through_its_fields_and_json() -> None:
    record = relocation()
    again = Relocation.from_fields(json.loads(json.dumps(record.to_fields())))
    assert again == record
    assert again is not None and again.strategy is Strategy.MIGRATE and again.phase is Phase.HOLDING
    assert record.kind is RecordKind.RELOCATION and record.subject == "default/text-generator-0"


def test_a_consolidation_is_keyed_by_its_node() -> None:
    record = Consolidation(node="gpu-0", started=0.0, deadline=900.0, victims=[], phase=Phase.EMPTY)
    assert Consolidation.from_fields(record.to_fields()) == record
    assert record.kind is RecordKind.CONSOLIDATION and record.subject == "gpu-0"


def test_a_record_of_the_other_kind_or_damaged_is_refused() -> None:
    assert (
        Relocation.from_fields(Consolidation(node="n", started=0, deadline=1, victims=[]).to_fields()) is None
    )
    none = {**relocation().to_fields(), "strategy": "none"}
    assert Relocation.from_fields(none) is None  # not a strategy that relocates
    assert Relocation.from_fields({**relocation().to_fields(), "pod": ""}) is None
    good = relocation().to_fields()
    damaged = [
        {},
        {**good, "phase": "dancing"},
        {**good, "started": "soon"},
        {**good, "started": True},
        {**good, "node": None},
        {**good, "victims": [{"pod": 3, "workload": None, "node": "n"}]},
        {**good, "victims": "iris-0"},
        {**good, "surge": {"iris": {"by": -1, "base": 1, "need_ready": 1}}},
        {**good, "surge": {"iris": {"by": 1}}},
    ]
    for fields in damaged:  # the fields both kinds share
        assert Relocation.from_fields(fields) is None, fields
        assert Consolidation.from_fields(fields) is None, fields


def test_the_store_says_what_is_surging_moving_and_in_flight() -> None:
    records = Records(
        relocations={"default/a": relocation(), "default/b": relocation(Phase.DRAINING), "default/c": None},
        consolidations={"cpu-0": Consolidation(node="cpu-0", started=0, deadline=1, victims=[])},
    )
    assert records.surging() == {"iris"}  # the draining one has shrunk back already
    assert records.moving() == {"default/iris-0", "default/job-1"}
    assert records.moves_in_flight() == 4


def test_retry_keys_of_different_kinds_never_collide() -> None:
    # A pod in namespace "node" named like a node: as strings, its key was the node's retry key.
    assert RetryKey.pod("node/gpu-0") != RetryKey.consolidation("gpu-0")
    assert RetryKey.step(Step.PLAN) == RetryKey(RetryKind.STEP, "plan")
    assert len({RetryKey.skipped_node("a"), RetryKey.consolidation("a"), RetryKey.pod("a")}) == 3
