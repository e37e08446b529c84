"""The planner's rules and order of choice, one small cluster at a time."""

from __future__ import annotations

import pytest

from makeroom.model import DO_NOT_MOVE, OwnerKind, PodSpec, PreemptionPolicy, Resources
from makeroom.model.objects import MAKE_ROOM, MOVED_AT
from makeroom.planner import (
    NotMovable,
    PlacementReason,
    Policy,
    UnplaceableReason,
    not_movable,
    plan,
)
from tests.builders.state import CPU_NODE, GPU_NODE
from tests.builders.state import StateBuilder as Cluster

IRIS = {"cpu": "400m", "memory": "1Gi"}
TEXT_GEN = {"cpu": "3", "memory": "12Gi", "nvidia.com/gpu": "1"}


def seed_like(
    cpu_max: int = 1, gpu_max: int = 1, cpu_price: float = 0.17, gpu_price: float = 0.53
) -> Cluster:
    """seed-1: five iris replicas on cpu-0 and five on gpu-0; a text-generator pending."""
    c = Cluster(
        [
            Cluster.group("cpu", CPU_NODE, cpu_max, cpu_price),
            Cluster.group("gpu", GPU_NODE, gpu_max, gpu_price),
        ]
    )
    c.node("cpu")
    c.node("gpu")
    c.fill("iris", IRIS, 100, "cpu-0", 5)
    c.fill("iris", IRIS, 100, "gpu-0", 5)
    return c


def test_seed_like_relocation_and_plan_is_pure() -> None:
    c = seed_like()
    c.pod("text-gen", TEXT_GEN, 1000)
    used = c.state.used.copy()
    first = plan(c.state, Policy())
    assert (c.state.used == used).all()
    assert [(m.from_node, m.to_node) for m in first.moves] == [("gpu-0", "cpu-0")] * 3
    assert first.to_json() == plan(c.state, Policy()).to_json()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"owner": OwnerKind.DAEMON_SET}, NotMovable.DAEMON_SET),
        ({"owner": OwnerKind.NONE}, NotMovable.NO_CONTROLLER),
        ({"owner": OwnerKind.NODE}, NotMovable.MIRROR),
        ({"annotations": {DO_NOT_MOVE: "true"}}, NotMovable.OPTED_OUT),
        ({"annotations": {MOVED_AT: "950"}}, NotMovable.COOLDOWN),
        ({"local_storage": True}, NotMovable.LOCAL_STORAGE),
    ],
)
def test_protected_pods_never_move(change: dict[str, object], reason: NotMovable) -> None:
    c = Cluster([Cluster.group("cpu", CPU_NODE, 1), Cluster.group("gpu", GPU_NODE, 1)])
    c.node("cpu")
    c.node("gpu")
    blocker = c.pod("blocker", {"cpu": "3", "memory": "1Gi"}, 100, "gpu-0", **change)  # type: ignore[arg-type]
    c.pod("text-gen", TEXT_GEN, 1000)
    policy = Policy(now=1000.0, cooldown=600.0)
    assert not_movable(blocker, policy) == reason
    result = plan(c.state, policy)
    assert result.moves == ()
    assert [u.reason for u in result.unplaceable] == [UnplaceableReason.NO_ROOM_TO_MAKE]
    assert reason.why  # every reason has a sentence for users


def test_cooldown_expires() -> None:
    c = Cluster([Cluster.group("cpu", CPU_NODE, 1), Cluster.group("gpu", GPU_NODE, 1)])
    c.node("cpu")
    c.node("gpu")
    c.pod("blocker", {"cpu": "3"}, 100, "gpu-0", annotations={MOVED_AT: "100"})
    c.pod("text-gen", TEXT_GEN, 1000)
    assert len(plan(c.state, Policy(now=1000.0, cooldown=600.0)).moves) == 1


def test_equal_priority_is_never_a_victim() -> None:
    c = seed_like()
    c.pod("text-gen", TEXT_GEN, 100)
    result = plan(c.state, Policy())
    assert result.moves == () and result.unplaceable


def test_own_new_node_wins_when_cheaper_than_relocation() -> None:
    # relocation would need a new cpu node (1.00/h); a new gpu node for the pod costs 0.53/h
    c = Cluster([Cluster.group("cpu", CPU_NODE, 2, 1.0), Cluster.group("gpu", GPU_NODE, 2, 0.53)])
    c.node("cpu")
    c.node("gpu")
    c.fill("iris", IRIS, 100, "cpu-0", 10)
    c.fill("iris", IRIS, 100, "gpu-0", 5)
    c.pod("text-gen", TEXT_GEN, 1000)
    result = plan(c.state, Policy())
    assert result.moves == ()
    assert [(p.new_node_group, p.reason) for p in result.placements] == [("gpu", PlacementReason.NEW_NODE)]
    assert dict(result.scale_ups) == {"gpu": 1}


def test_relocation_wins_when_its_new_nodes_cost_less() -> None:
    c = Cluster([Cluster.group("cpu", CPU_NODE, 2, 0.17), Cluster.group("gpu", GPU_NODE, 2, 0.53)])
    c.node("cpu")
    c.node("gpu")
    c.fill("iris", IRIS, 100, "cpu-0", 10)
    c.fill("iris", IRIS, 100, "gpu-0", 5)
    c.pod("text-gen", TEXT_GEN, 1000)
    # The GPU group may grow too: only with the priority expander (cpu first) does the autoscaler
    # foreseeably give the moved replicas a CPU node (docs/controller.md); then relocation wins.
    result = plan(c.state, Policy(expander="priority"))
    assert len(result.moves) == 3 and dict(result.scale_ups) == {"cpu": 1}
    # With least-waste the CPU and GPU nodes tie for them: not counted on, the GPU node is bought.
    result = plan(c.state, Policy())
    assert result.moves == () and dict(result.scale_ups) == {"gpu": 1}


def test_preemption_policy_never_still_gets_room_made() -> None:
    # Never stops the scheduler's own preemption; makeroom's moves, each with a destination, are
    # what such a pod is set up to wait for.
    c = seed_like()
    c.pod("text-gen", {}, spec=PodSpec(Resources.parse(TEXT_GEN), 1000, PreemptionPolicy.NEVER))
    result = plan(c.state, Policy())
    assert len(result.moves) == 3
    assert [p.reason for p in result.placements] == [PlacementReason.RELOCATION]


def test_a_pod_that_opts_out_gets_only_a_new_node() -> None:
    c = seed_like()
    c.pod("text-gen", TEXT_GEN, 1000, annotations={MAKE_ROOM: "false"})
    result = plan(c.state, Policy())
    assert result.moves == ()
    assert [u.reason for u in result.unplaceable] == [UnplaceableReason.RELOCATION_OFF]


def test_room_is_claimed_once_for_several_pending_pods() -> None:
    # two GPU nodes each with five iris; cpu-0 has room for only three more iris
    c = Cluster([Cluster.group("cpu", CPU_NODE, 1), Cluster.group("gpu", GPU_NODE, 2)])
    c.node("cpu")
    c.node("gpu")
    c.node("gpu")
    c.fill("iris", IRIS, 100, "cpu-0", 7)
    c.fill("iris", IRIS, 100, "gpu-0", 5)
    c.fill("iris", IRIS, 100, "gpu-1", 5)
    first = c.pod("text-gen", TEXT_GEN, 1000)
    second = c.pod("text-gen", TEXT_GEN, 900)
    result = plan(c.state, Policy())
    assert [p.pod for p in result.placements] == [first]
    assert [u.pod for u in result.unplaceable] == [second]
    assert len(result.moves) == 3 and all(m.for_pod is first for m in result.moves)


def test_move_limit() -> None:
    c = seed_like()
    c.pod("text-gen", TEXT_GEN, 1000)
    result = plan(c.state, Policy(max_moves_in_flight=2))
    assert result.moves == ()
    assert [u.reason for u in result.unplaceable] == [UnplaceableReason.MOVE_LIMIT]


def test_victims_may_land_on_a_node_being_provisioned() -> None:
    c = Cluster([Cluster.group("cpu", CPU_NODE, 2, 0.17), Cluster.group("gpu", GPU_NODE, 1, 0.53)])
    c.node("cpu")
    c.node("gpu")
    c.node("cpu", ready=False)  # cpu-1, on its way
    c.fill("iris", IRIS, 100, "cpu-0", 10)
    c.fill("iris", IRIS, 100, "gpu-0", 5)
    c.pod("text-gen", TEXT_GEN, 1000)
    result = plan(c.state, Policy())
    assert {m.to_node for m in result.moves} == {"cpu-1"}
    assert dict(result.scale_ups) == {}
    without = plan(c.state, Policy(use_upcoming_nodes=False))
    assert without.moves == () and without.unplaceable  # cpu is at its max: cpu-1 counts


def test_no_compatible_node() -> None:
    c = seed_like()
    c.pod("huge", {"cpu": "64"}, 1000)
    (u,) = plan(c.state, Policy()).unplaceable
    assert u.reason == UnplaceableReason.NO_COMPATIBLE_NODE


def test_fits_now_is_placed_without_moves() -> None:
    c = seed_like()
    c.pod("small", {"cpu": "100m"}, 10)
    result = plan(c.state, Policy())
    assert [p.reason for p in result.placements] == [PlacementReason.FITS_NOW] and result.moves == ()
