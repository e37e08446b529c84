"""The controller on the shared state builder and the fake port: the dry run's preview is the plan a
reconciliation carries out, the policy leaves out what the real run leaves out, and each move is
counted once."""

from __future__ import annotations

from makeroom.controller import ConsolidationConfig, Controller, ControllerConfig, Strategy
from makeroom.controller.records import Consolidation, RecordKind, Relocation, Surge, Victim
from makeroom.controller.steps import RetryKey
from tests.builders.port import FakeCluster
from tests.builders.state import CPU_NODE, GPU_NODE, StateBuilder

IRIS = {"cpu": "400m", "memory": "1Gi"}
TEXT_GEN = {"cpu": "3", "memory": "12Gi", "nvidia.com/gpu": "1"}
EVICT = ControllerConfig(strategy=Strategy.EVICT, consolidation=ConsolidationConfig(enabled=False))


def seed_like() -> tuple[StateBuilder, FakeCluster]:
    """seed-1 in small: iris fills half of both nodes, a text-generator waits for the GPU."""
    b = StateBuilder([StateBuilder.group("cpu", CPU_NODE), StateBuilder.group("gpu", GPU_NODE)])
    b.node("cpu")
    b.node("gpu")
    b.fill("iris", IRIS, 100, "cpu-0", 5)
    b.fill("iris", IRIS, 100, "gpu-0", 5)
    pending = b.pod("text-gen", TEXT_GEN, 1000)
    pending.unschedulable_since = 0.0
    return b, FakeCluster(b.state, time=10.0)


def test_the_preview_is_the_plan_a_reconciliation_carries_out() -> None:
    b, port = seed_like()
    controller = Controller(port, port, EVICT)
    preview = controller.preview(b.state)
    (placement,) = preview.placements
    report = controller.tick()
    assert report.started == ["text-gen-0"]
    record = port.record(RecordKind.RELOCATION, "default/text-gen-0")
    assert isinstance(record, Relocation) and record.node == placement.node
    assert sorted(v.pod for v in record.victims) == sorted(m.pod.key for m in preview.moves)


def test_the_policy_leaves_out_pods_in_backoff_and_the_new_pods_of_a_surge() -> None:
    b, port = seed_like()
    controller = Controller(port, port, EVICT)
    controller.steps.back_off(RetryKey.pod("default/text-gen-0"), port.now())
    assert controller.preview(b.state).placements == ()
    assert controller.tick().started == []

    b2, port2 = seed_like()  # a consolidation under way surges text-gen: its pending pod waits by design
    surging = Consolidation(
        node="cpu-0",
        started=0.0,
        deadline=900.0,
        victims=[Victim("default/text-gen-9", "text-gen", "cpu-0")],
        surge={"text-gen": Surge(by=1, base=1, need_ready=1)},
    )
    port2.save_record(surging)
    assert Controller(port2, port2, EVICT).preview(b2.state).placements == ()


def test_each_move_is_counted_once_when_it_is_decided() -> None:
    _, port = seed_like()
    controller = Controller(port, port, EVICT)
    first = controller.tick()
    evicted = [target for verb, target in port.calls if verb == "evict"]
    assert first.moves == len(evicted) == first.evictions == 3
    port.time += EVICT.interval
    again = controller.tick()
    assert again.moves == 0 and again.evictions == 0
