"""The scheduler's filter rules, shared by the simulator's scheduler and the planner."""

from __future__ import annotations

from enum import StrEnum

from makeroom.model.objects import (
    UNSCHEDULABLE_TAINT,
    Node,
    PodSpec,
    Taint,
    TaintEffect,
)
from makeroom.model.resources import Resources


class FitFailure(StrEnum):
    """Why a node cannot take a pod."""

    NODE_SELECTOR = "node(s) didn't match Pod's node selector"
    """The node lacks a label the pod's nodeSelector asks for."""
    AFFINITY = "node(s) didn't match Pod's node affinity"
    """No required node-affinity term matches the node's labels."""
    TAINT = "node(s) had untolerated taint"
    """The node has a NoSchedule or NoExecute taint that the pod does not tolerate."""
    CORDONED = "node(s) were unschedulable"
    """The node is cordoned (spec.unschedulable)."""
    NOT_READY = "node(s) were not ready"
    """The node is not Ready yet (still provisioning) or is going away."""
    INSUFFICIENT = "Insufficient resources"
    """The node's free allocatable does not cover the pod's requests."""


_FILTERING_EFFECTS = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)


def untolerated_taint(spec: PodSpec, taints: tuple[Taint, ...]) -> Taint | None:
    for taint in taints:
        if taint.effect not in _FILTERING_EFFECTS:
            continue
        if not any(t.tolerates(taint) for t in spec.tolerations):
            return taint
    return None


def static_fit(spec: PodSpec, node: Node) -> FitFailure | None:
    """Every rule except resources: these depend only on the pod's spec and the node's state."""
    if not node.ready:
        return FitFailure.NOT_READY
    if node.unschedulable and untolerated_taint(
        spec, (Taint(UNSCHEDULABLE_TAINT, "", TaintEffect.NO_SCHEDULE),)
    ):
        return FitFailure.CORDONED
    return label_fit(spec, node.labels, node.taints)


def label_fit(spec: PodSpec, labels: dict[str, str], taints: tuple[Taint, ...]) -> FitFailure | None:
    """The rules a node template can answer too (used for nodes that do not exist yet)."""
    for key, value in spec.node_selector:
        if labels.get(key) != value:
            return FitFailure.NODE_SELECTOR
    if spec.required_affinity and not any(
        all(req.matches(labels) for req in term) for term in spec.required_affinity
    ):
        return FitFailure.AFFINITY
    if untolerated_taint(spec, taints) is not None:
        return FitFailure.TAINT
    return None


def resource_fit(requests: Resources, free: Resources) -> FitFailure | None:
    return None if requests.fits_in(free) else FitFailure.INSUFFICIENT
