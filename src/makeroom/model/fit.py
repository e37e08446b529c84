"""The scheduler's filter rules, shared by the simulator's scheduler and the planner."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from makeroom.model.objects import (
    REGION_LABEL,
    UNSCHEDULABLE_TAINT,
    ZONE_LABEL,
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
    NODE_NAME = "node(s) didn't match the requested node name"
    """The pod names another node in spec.nodeName (NodeName)."""
    HOST_PORTS = "node(s) didn't have free ports for the requested pod ports"
    """A pod on the node holds one of the pod's host ports (NodePorts)."""
    VOLUME_NODE_AFFINITY = "node(s) had volume node affinity conflict"
    """A bound PersistentVolume's node affinity excludes the node (VolumeBinding)."""
    VOLUME_ZONE = "node(s) had no available volume zone"
    """A bound PersistentVolume lies in another zone or region than the node (VolumeZone)."""
    SPREAD_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
    """The node lacks the topology key of one of the pod's DoNotSchedule spread constraints."""
    SPREAD = "node(s) didn't match pod topology spread constraints"
    """Going there would make a DoNotSchedule spread's skew exceed maxSkew (PodTopologySpread)."""
    POD_AFFINITY = "node(s) didn't match pod affinity rules"
    """No pod the pod's required pod affinity asks for is in the node's domain (InterPodAffinity)."""
    POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
    """A pod the pod's required anti-affinity excludes is in the node's domain (InterPodAffinity)."""
    EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
    """A pod in the node's domain has required anti-affinity against this pod (InterPodAffinity)."""


_FILTERING_EFFECTS = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)


def untolerated_taint(spec: PodSpec, taints: tuple[Taint, ...]) -> Taint | None:
    for taint in taints:
        if taint.effect not in _FILTERING_EFFECTS:
            continue
        if not any(t.tolerates(taint) for t in spec.tolerations):
            return taint
    return None


def static_fit(spec: PodSpec, node: Node) -> FitFailure | None:
    """Every rule except resources and those that look at other pods: these depend only on the pod's
    spec and the node's state (kube-scheduler's order: NodeUnschedulable, NodeName, TaintToleration,
    NodeAffinity, then the volume plugins)."""
    if not node.ready:
        return FitFailure.NOT_READY
    if node.unschedulable and untolerated_taint(
        spec, (Taint(UNSCHEDULABLE_TAINT, "", TaintEffect.NO_SCHEDULE),)
    ):
        return FitFailure.CORDONED
    if spec.node_name and spec.node_name != node.name:
        return FitFailure.NODE_NAME
    return label_fit(spec, node.labels, node.taints, named=True)


def label_fit(
    spec: PodSpec, labels: Mapping[str, str], taints: tuple[Taint, ...], named: bool = False
) -> FitFailure | None:
    """The rules a node template can answer too (used for nodes that do not exist yet, which no
    nodeName can name: ``named`` says the caller checked the name)."""
    if spec.node_name and not named:
        return FitFailure.NODE_NAME
    if any(labels.get(k) != v for k, v in spec.node_selector):
        return FitFailure.NODE_SELECTOR
    if not node_affinity_matches(spec, labels):
        return FitFailure.AFFINITY
    if untolerated_taint(spec, taints) is not None:
        return FitFailure.TAINT
    return volume_fit(spec, labels)


def node_affinity_matches(spec: PodSpec, labels: Mapping[str, str]) -> bool:
    """nodeSelector and required node affinity (what PodTopologySpread's nodeAffinityPolicy Honor
    reads too)."""
    if any(labels.get(k) != v for k, v in spec.node_selector):
        return False
    return not spec.required_affinity or any(
        all(req.matches(labels) for req in term) for term in spec.required_affinity
    )


# VolumeZone reads these node labels (beta ones matched to their GA twins).
_VOLUME_ZONE_KEYS = {
    ZONE_LABEL: ZONE_LABEL,
    REGION_LABEL: REGION_LABEL,
    "failure-domain.beta.kubernetes.io/zone": ZONE_LABEL,
    "failure-domain.beta.kubernetes.io/region": REGION_LABEL,
}


def volume_fit(spec: PodSpec, labels: Mapping[str, str]) -> FitFailure | None:
    """VolumeBinding's node affinity of bound PersistentVolumes, then VolumeZone. A node with no zone
    or region label at all passes VolumeZone, as kube-scheduler has it."""
    for volume in spec.volumes:
        if volume.node_affinity and not any(
            all(req.matches(labels) for req in term) for term in volume.node_affinity
        ):
            return FitFailure.VOLUME_NODE_AFFINITY
    if not any(k in labels for k in _VOLUME_ZONE_KEYS):
        return None
    for volume in spec.volumes:
        for key, value in volume.zone_labels:
            if key not in _VOLUME_ZONE_KEYS:
                continue
            have = labels.get(key, labels.get(_VOLUME_ZONE_KEYS[key]))
            if have is None or have not in value.split("__"):
                return FitFailure.VOLUME_ZONE
    return None


def resource_fit(requests: Resources, free: Resources) -> FitFailure | None:
    return None if requests.fits_in(free) else FitFailure.INSUFFICIENT
