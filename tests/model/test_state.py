"""ClusterState: the accounting of requested room per node, nominations, and what the scheduler's
filter finds feasible, kept in step through every change."""

from __future__ import annotations

import numpy as np

from makeroom.model import Resources
from tests.builders.state import CPU_NODE, GPU_NODE, GPU_TAINT, GPU_TOLERATION, StateBuilder


def two_nodes() -> StateBuilder:
    b = StateBuilder(
        [StateBuilder.group("cpu", CPU_NODE, max=3), StateBuilder.group("gpu", GPU_NODE, taints=(GPU_TAINT,))]
    )
    b.node("cpu")
    b.node("gpu")
    return b


def test_binding_and_removing_pods_keep_the_free_room_exact() -> None:
    b = two_nodes()
    state = b.state
    web = b.pod("web", {"cpu": "1500m", "memory": "1Gi"}, node="cpu-0")
    b.pod("web", {"cpu": "1", "memory": "1Gi"}, node="cpu-0")
    assert state.node_free("cpu-0") == Resources.parse({"cpu": "1500m", "memory": "14Gi", "pods": 108})
    state.remove_pod(web)
    assert state.node_free("cpu-0")["cpu"] == 3000
    assert web.node is None and web.key not in state.pods


def test_pending_pods_are_the_unbound_ones_not_leaving() -> None:
    b = two_nodes()
    bound = b.pod("web", {"cpu": "1"}, node="cpu-0")
    waiting = b.pod("web", {"cpu": "1"})
    leaving = b.pod("web", {"cpu": "1"})
    leaving.terminating = True
    assert b.state.pending() == [waiting]
    b.state.bind(waiting, "cpu-0")
    assert b.state.pending() == [] and bound.node == waiting.node == "cpu-0"


def test_feasible_applies_taints_and_room() -> None:
    b = two_nodes()
    state = b.state
    small = b.pod("api", {"cpu": "1"})
    tolerant = b.pod("llm", {"cpu": "1", "nvidia.com/gpu": "1"}, tolerations=(GPU_TOLERATION,))
    slot = state.slot_of
    assert state.feasible(small)[slot["cpu-0"]] and not state.feasible(small)[slot["gpu-0"]]
    assert state.feasible(tolerant)[slot["gpu-0"]] and not state.feasible(tolerant)[slot["cpu-0"]]
    b.fill("batch", {"cpu": "1"}, 0, "cpu-0", 4)
    assert not state.feasible(small)[slot["cpu-0"]]


def test_a_nomination_holds_room_against_lower_priority_pods_only() -> None:
    b = two_nodes()
    state = b.state
    b.fill("batch", {"cpu": "1"}, 0, "cpu-0", 2)
    held = b.pod("api", {"cpu": "2"}, priority=100)
    state.nominate(held, "cpu-0")
    low = b.pod("batch", {"cpu": "1"}, priority=0)
    high = b.pod("critical", {"cpu": "1"}, priority=1000)
    slot = state.slot_of["cpu-0"]
    assert not state.feasible(low)[slot]  # the nominated pod's 2 CPU are held against it
    assert state.feasible(high)[slot]  # a higher-priority pod may take the room
    assert int(state.free_after_nominations()[slot][state.index.position("cpu")]) == 0
    state.bind(held, "cpu-0")
    assert held.nominated_node is None and state.nominated["cpu-0"] == {}


def test_each_change_of_room_moves_the_generation_on() -> None:
    """What planning reads (room, nominations, nodes) bumps the generation the controller compares
    before it plans again; a new pending pod alone does not (the controller sees it as newly waiting)."""
    b = two_nodes()
    state = b.state
    pod = b.pod("web", {"cpu": "1"})
    seen = [state.generation]
    state.nominate(pod, "cpu-0")
    seen.append(state.generation)
    state.bind(pod, "cpu-0")
    seen.append(state.generation)
    state.nodes["gpu-0"].unschedulable = True
    state.nodes_changed()
    seen.append(state.generation)
    assert seen == sorted(set(seen)), seen


def test_removing_a_node_unbinds_its_pods_and_frees_its_slot() -> None:
    b = two_nodes()
    state = b.state
    pods = b.fill("web", {"cpu": "1"}, 0, "cpu-0", 2)
    waiting = b.pod("api", {"cpu": "1"})
    state.nominate(waiting, "cpu-0")
    orphans = state.remove_node("cpu-0")
    assert set(orphans) == set(pods) and all(p.node is None for p in pods)
    assert waiting.nominated_node is None and "cpu-0" not in state.nodes
    again = b.node("cpu")  # the freed slot is reused, empty
    assert np.all(state.used[state.slot_of[again]] == 0)
