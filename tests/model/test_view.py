"""The shared cluster view answers as the state's own checks do, on every node, for every spec."""

from __future__ import annotations

import numpy as np

from makeroom.bench.midsize import midsize
from makeroom.model import Node, Pod, PodSpec, Resources
from makeroom.model.fit import label_fit
from makeroom.model.view import ClusterView


def test_the_view_agrees_with_the_state_on_fit_and_room() -> None:
    for seed in range(20):
        state = midsize(seed).state
        pods = list(state.pods.values())
        # a nomination: its room is held from the others
        waiting = [p for p in pods if p.node is None]
        gpu = next(n for n in state.nodes.values() if n.group.startswith("gpu"))
        state.nominate(waiting[0], gpu.name)
        view = ClusterView(state)
        assert np.array_equal(view.free, state.free_after_nominations())
        for pod in pods:
            assert np.array_equal(view.static(pod.spec), state.static_mask(pod.spec))
            assert np.array_equal(view.room_for(pod), state.nominated_load(pod, state.free()))
            slot = state.slot_of[gpu.name]
            assert np.array_equal(view.room_on(slot, pod), view.room_for(pod)[slot])
            for name, group in state.groups.items():
                admits = label_fit(pod.spec, group.node_labels(), group.taints) is None and (
                    PodSpec.effective(pod.spec.requests).fits_in(group.capacity)
                )
                assert view.admits(pod.spec, name) == admits
        assert not view.stale
        state.nominate(waiting[0], None)
        assert view.stale  # a view describes the state when it was made


def test_nodes_being_provisioned_and_cordoned_nodes() -> None:
    state = midsize(3).state
    g = state.groups["cpu"]
    state.add_node(Node("cpu-new", "cpu", g.capacity, g.node_labels(), g.taints, ready=False))
    state.add_node(
        Node("cpu-off", "cpu", g.capacity, g.node_labels(), g.taints, ready=False, unschedulable=True)
    )
    view = ClusterView(state)
    spec = PodSpec(Resources.parse({"cpu": "1"}), 0)
    up = view.upcoming_fit(spec)
    assert up[state.slot_of["cpu-new"]] and not up[state.slot_of["cpu-off"]]
    assert not view.static(spec)[state.slot_of["cpu-new"]]  # not Ready: the scheduler will not bind there
    assert view.group_size["cpu"] == len(state.nodes_of("cpu"))
    pod = Pod("x", spec)
    assert view.room_on(state.slot_of["cpu-new"], pod)[0] == state.alloc[state.slot_of["cpu-new"]][0]
