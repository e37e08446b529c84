"""The records the controller writes on objects: typed, round-tripped, and read from the format the
previous version wrote (a rolling upgrade hands records from one version to the other)."""

from __future__ import annotations

import json

from makeroom.controller import Strategy
from makeroom.controller.records import Consolidation, Phase, Relocation, Victim
from makeroom.controller.steps import RetryKey, RetryKind, Step


def relocation() -> Relocation:
    return Relocation(
        strategy=Strategy.MIGRATE,
        node="gpu-0",
        started=10.0,
        deadline=910.0,
        victims=[Victim("default/iris-0", "iris", "gpu-0")],
        since=10.0,
        surge={"iris": 1},
    )


def test_a_relocation_round_trips() -> None:
    record = relocation()
    again = Relocation.from_json(record.to_json())
    assert again == record
    assert again is not None and again.strategy is Strategy.MIGRATE and again.phase is Phase.HOLDING


def test_a_consolidation_keeps_the_wire_format_of_the_previous_version() -> None:
    record = Consolidation(node="gpu-0", started=0.0, deadline=900.0, victims=[], phase=Phase.EMPTY)
    raw = json.loads(record.to_json())
    assert raw["strategy"] == "consolidate" and raw["phase"] == "empty"
    assert Consolidation.from_json(record.to_json()) == record
    old = {k: v for k, v in raw.items() if k != "strategy"}
    assert Consolidation.from_json(json.dumps(old)) == record


def test_a_record_of_the_other_kind_or_damaged_is_refused() -> None:
    consolidation = Consolidation(node="n", started=0.0, deadline=1.0, victims=[]).to_json()
    assert Relocation.from_json(consolidation) is None
    assert Consolidation.from_json(relocation().to_json()) is None
    for damaged in ("{", "[]", '{"node": "n"}', relocation().to_json().replace("holding", "dancing")):
        assert Relocation.from_json(damaged) is None
        assert Consolidation.from_json(damaged) is None


def test_retry_keys_of_different_kinds_never_collide() -> None:
    # A pod in namespace "node" named like a node: as strings, its key was the node's retry key.
    assert RetryKey.pod("node/gpu-0") != RetryKey.consolidation("gpu-0")
    assert RetryKey.step(Step.PLAN) == RetryKey(RetryKind.STEP, "plan")
    assert len({RetryKey.skipped_node("a"), RetryKey.consolidation("a"), RetryKey.pod("a")}) == 3
