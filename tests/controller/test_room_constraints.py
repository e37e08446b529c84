"""The controller's re-check that a moved pod's replacement has somewhere to go (controller/room.py)
runs kube-scheduler's filters that look at other pods (issue 19)."""

from __future__ import annotations

from makeroom.controller.room import somewhere_to_go
from makeroom.model import HOSTNAME_LABEL, LabelSelector, PodAffinityTerm, PodSpec, Resources
from tests.builders.state import CPU_NODE, StateBuilder

API = LabelSelector((("app", "api"),))


def cluster(anti_affinity: bool) -> tuple[StateBuilder, str]:
    """Two full-group nodes: n0 holds the replica to move, n1 another replica and room for one more."""
    b = StateBuilder([StateBuilder.group("cpu", CPU_NODE, 2)])
    for i in range(2):
        b.node("cpu", name=f"n{i}")
    terms = (PodAffinityTerm(HOSTNAME_LABEL, API),) if anti_affinity else ()
    spec = PodSpec(Resources.parse({"cpu": "1", "memory": "1Gi"}), 100, pod_anti_affinity=terms)
    moving = b.pod("api", {}, node="n0", spec=spec, labels={"app": "api"})
    b.pod("api", {}, node="n1", spec=spec, labels={"app": "api"})
    return b, moving.key


def test_room_on_a_node_with_a_replica_does_not_count_under_anti_affinity() -> None:
    b, key = cluster(anti_affinity=True)
    assert somewhere_to_go(b.state, [b.state.pods[key]], not_node="n0") is b.state.pods[key]


def test_the_same_room_counts_without_it() -> None:
    b, key = cluster(anti_affinity=False)
    assert somewhere_to_go(b.state, [b.state.pods[key]], not_node="n0") is None
