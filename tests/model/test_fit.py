"""The scheduler's filter rules, which the simulator's scheduler and the planner share."""

from __future__ import annotations

from makeroom.model import (
    FitFailure,
    Node,
    NodeSelectorRequirement,
    PodSpec,
    Resources,
    Taint,
    TaintEffect,
    Toleration,
    label_fit,
    resource_fit,
    static_fit,
)
from tests.builders.state import GPU_TAINT, GPU_TOLERATION

CPU = Resources.parse({"cpu": "4", "memory": "16Gi", "pods": 110})


def node(**kw: object) -> Node:
    args: dict[str, object] = {"labels": {"makeroom.io/group": "gpu", "zone": "a"}, **kw}
    return Node("n", "gpu", CPU, **args)  # type: ignore[arg-type]


def test_a_node_selector_must_match_every_label() -> None:
    assert label_fit(PodSpec(CPU, node_selector=(("zone", "a"),)), {"zone": "a"}, ()) is None
    failure = label_fit(PodSpec(CPU, node_selector=(("zone", "a"), ("disk", "ssd"))), {"zone": "a"}, ())
    assert failure is FitFailure.NODE_SELECTOR


def test_required_affinity_terms_are_ored_and_their_requirements_anded() -> None:
    in_a = NodeSelectorRequirement("zone", "In", ("a",))
    ssd = NodeSelectorRequirement("disk", "In", ("ssd",))
    spec = PodSpec(CPU, required_affinity=((in_a, ssd), (NodeSelectorRequirement("zone", "In", ("b",)),)))
    assert label_fit(spec, {"zone": "a", "disk": "ssd"}, ()) is None
    assert label_fit(spec, {"zone": "b"}, ()) is None
    assert label_fit(spec, {"zone": "a"}, ()) is FitFailure.AFFINITY


def test_only_filtering_taints_keep_a_pod_off() -> None:
    plain = PodSpec(CPU)
    assert label_fit(plain, {}, (GPU_TAINT,)) is FitFailure.TAINT
    assert label_fit(PodSpec(CPU, tolerations=(GPU_TOLERATION,)), {}, (GPU_TAINT,)) is None
    prefer = Taint("spot", "", TaintEffect.PREFER_NO_SCHEDULE)
    assert label_fit(plain, {}, (prefer,)) is None
    evicting = Taint("broken", "", TaintEffect.NO_EXECUTE)
    assert label_fit(plain, {}, (evicting,)) is FitFailure.TAINT


def test_a_node_not_ready_or_cordoned_takes_nothing_new() -> None:
    spec = PodSpec(CPU)
    assert static_fit(spec, node()) is None
    assert static_fit(spec, node(ready=False)) is FitFailure.NOT_READY
    assert static_fit(spec, node(unschedulable=True)) is FitFailure.CORDONED
    tolerant = PodSpec(CPU, tolerations=(Toleration("node.kubernetes.io/unschedulable", "Exists"),))
    assert static_fit(tolerant, node(unschedulable=True)) is None


def test_resources_must_cover_the_requests() -> None:
    assert resource_fit(Resources.parse({"cpu": "4"}), CPU) is None
    assert resource_fit(Resources.parse({"cpu": "5"}), CPU) is FitFailure.INSUFFICIENT
