"""The shared cluster view answers as the state's own checks do, on every node, for every spec."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from makeroom.bench.midsize import midsize
from makeroom.model import Node, Pod, PodSpec, Resources
from makeroom.model.fit import label_fit
from makeroom.model.objects import Taint, TaintEffect
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


def test_a_new_view_sees_a_node_tainted_cordoned_or_unready_since_the_last_one() -> None:
    # the grouping of nodes by readiness, cordon and taints is kept on the state between views
    state = midsize(4).state
    spec = PodSpec(Resources.parse({"cpu": "100m"}), 0)
    cpu = [n for n in state.nodes.values() if n.group == "cpu" and n.ready]
    tainted, cordoned, unready = (state.slot_of[n.name] for n in cpu[:3])
    assert ClusterView(state).static(spec)[[tainted, cordoned, unready]].all()
    cpu[0].taints = (Taint("dedicated", "batch", TaintEffect.NO_SCHEDULE),)
    cpu[1].unschedulable = True
    cpu[2].ready = False
    state.nodes_changed()
    after = ClusterView(state).static(spec)
    assert not after[[tainted, cordoned, unready]].any()
    assert np.array_equal(after, state.static_mask(spec) & ClusterView(state).ready)


def test_equal_specs_hash_alike_and_a_changed_spec_hashes_afresh() -> None:
    # a spec's hash is computed once: it must still follow equality
    a = PodSpec(Resources.parse({"cpu": "1"}), 100, node_selector=(("zone", "a"),))
    b = PodSpec(Resources.parse({"cpu": "1"}), 100, node_selector=(("zone", "a"),))
    assert a == b and hash(a) == hash(b)
    c = replace(a, priority=200)
    assert c != a and {a: 1, c: 2}[replace(c)] == 2
    assert {a: "x"}.get(b) == "x"
