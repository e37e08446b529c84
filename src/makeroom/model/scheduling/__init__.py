"""kube-scheduler's filters, one module per plugin, behind one entry point.

- ``filter_nodes(state, pod)``: every node -> None when the default profile's filters would let the
  pod go there now, else the first reason it fails (a ``FitFailure`` with kube-scheduler's message).
- ``pod_mask(placement, pod)``: the node slots that pass the filters that look at other pods
  (InterPodAffinity, PodTopologySpread, NodePorts), under a placement that may have pods moved; None
  when none of them can fail for this pod (most pods: then callers keep their per-spec masks as is).
- ``pod_failures(placement, pod)``: the same, as (reason, failing slots) in kube-scheduler's order;
  ``refusal`` says in words why one slot fails, ``blocking`` names the pod's own constraint.
- ``feasible(state, pod)``: ``ClusterState.feasible`` (node rules, resources) and those filters, as the
  simulator's scheduler uses it; ``concerned(state, pod)``: whether other pods can restrict the pod.
- ``score``: the soft rules (PodTopologySpread's and InterPodAffinity's scores).

The rules that read only the node (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity,
VolumeBinding's PersistentVolume node affinity, VolumeZone) are ``model.fit.static_fit``, cached per
spec by the state and the view.
"""

from __future__ import annotations

import numpy as np

from makeroom.model.fit import FitFailure, resource_fit, static_fit
from makeroom.model.objects import ZONE_LABEL, NodeGroup, Pod, PodSpec, UnsatisfiableAction
from makeroom.model.scheduling.interpodaffinity import affinity_failures
from makeroom.model.scheduling.nodeports import port_failures
from makeroom.model.scheduling.placement import Placement
from makeroom.model.scheduling.podtopologyspread import spread_failures
from makeroom.model.state import ClusterState, Mask

__all__ = [
    "Placement",
    "blocking",
    "concerned",
    "feasible",
    "filter_nodes",
    "pod_failures",
    "pod_mask",
    "refusal",
    "unzoned_groups",
    "zone_bound",
]


def concerned(state: ClusterState, pod: Pod) -> bool:
    """Whether other pods can restrict where this pod goes: its own constraints, or a placed pod's
    anti-affinity whose terms may match its labels (cheap: an index lookup)."""
    return pod.spec.places_by_pods or (
        bool(state.anti_affine) and next(Placement(state).anti_affine(pod.labels), None) is not None
    )


def pod_failures(placement: Placement, pod: Pod, itself: bool = False) -> list[tuple[FitFailure, Mask]]:
    """The filters that look at other pods, in kube-scheduler's order (NodePorts, PodTopologySpread,
    InterPodAffinity). The pod itself is not counted where it stands, unless ``itself`` (for a
    replica of it that comes while it is still there, as under make-before-break)."""
    if not pod.spec.places_by_pods and not placement.any_anti_affine():
        return []
    where = placement if itself else placement.without(pod)
    return port_failures(where, pod) + spread_failures(where, pod) + affinity_failures(where, pod)


def pod_mask(placement: Placement, pod: Pod, itself: bool = False) -> Mask | None:
    failures = pod_failures(placement, pod, itself)
    if not failures:
        return None
    ok = np.ones(placement.size, dtype=np.bool_)
    for _, bad in failures:
        ok &= ~bad
    return ok


def feasible(state: ClusterState, pod: Pod, placement: Placement | None = None) -> Mask:
    """``ClusterState.feasible`` (node rules and resources) and the rules that look at other pods."""
    mask = state.feasible(pod)
    extra = pod_mask(placement if placement is not None else Placement(state), pod) if mask.any() else None
    return mask if extra is None else mask & extra[: len(mask)]


def blocking(pod: Pod, reason: FitFailure) -> str:
    """The pod's own constraint behind a reason, as users write it (e.g. "topology spread on
    topology.kubernetes.io/zone, maxSkew 1")."""
    spec = pod.spec
    if reason in (FitFailure.SPREAD, FitFailure.SPREAD_LABEL):
        hard = [c for c in spec.topology_spread if c.when_unsatisfiable == "DoNotSchedule"]
        return "; ".join(f"topology spread on {c.topology_key}, maxSkew {c.max_skew}" for c in hard)
    if reason is FitFailure.POD_ANTI_AFFINITY:
        keys = ", ".join(dict.fromkeys(t.topology_key for t in spec.pod_anti_affinity))
        return f"required pod anti-affinity on {keys}"
    if reason is FitFailure.POD_AFFINITY:
        keys = ", ".join(dict.fromkeys(t.topology_key for t in spec.pod_affinity))
        return f"required pod affinity on {keys}"
    if reason is FitFailure.EXISTING_ANTI_AFFINITY:
        return "the required anti-affinity of pods already placed"
    if reason is FitFailure.HOST_PORTS:
        ports = ", ".join(f"{p.protocol}/{p.port}" for p in spec.host_ports)
        return f"host port(s) {ports}"
    return reason.value


def refusal(placement: Placement, pod: Pod, slot: int, itself: bool = False) -> str | None:
    """The constraint that keeps the pod off the node slot, in words with kube-scheduler's reason."""
    for reason, bad in pod_failures(placement, pod, itself):
        if bad[slot]:
            return f"{blocking(pod, reason)} ({reason.value})"
    return None


def filter_nodes(
    state: ClusterState, pod: Pod, placement: Placement | None = None
) -> dict[str, FitFailure | None]:
    """Every node's verdict for the pod as kube-scheduler's filters give it now: None where it may go,
    else the first failing reason (node rules, then resources after the room nominated pods of equal
    or higher priority hold, then the rules that look at other pods)."""
    where = placement if placement is not None else Placement(state)
    failures = pod_failures(where, pod)
    room = state.nominated_load(pod, state.free())
    requests = state.requests_of(pod.spec)
    out: dict[str, FitFailure | None] = {}
    for name, node in state.nodes.items():
        slot = state.slot_of[name]
        verdict = static_fit(pod.spec, node)
        if verdict is None and not bool(np.all(room[slot] >= requests)):
            verdict = resource_fit(state.index.resources(requests), state.index.resources(room[slot]))
        if verdict is None:
            verdict = next((reason for reason, bad in failures if bad[slot]), None)
        out[name] = verdict
    return out


def zone_bound(spec: PodSpec) -> str | None:
    """The pod's own constraint that a node without a zone label cannot satisfy (a DoNotSchedule
    spread or a required pod affinity by zone: kube-scheduler refuses a node lacking the key), or a
    bound volume's zone (the node's zone decides), in words; None when the zone does not matter."""
    hard = UnsatisfiableAction.DO_NOT_SCHEDULE
    for c in spec.topology_spread:
        if c.topology_key == ZONE_LABEL and c.when_unsatisfiable is hard:
            return f"topology spread on {ZONE_LABEL}, maxSkew {c.max_skew}"
    if any(t.topology_key == ZONE_LABEL for t in spec.pod_affinity):
        return f"required pod affinity on {ZONE_LABEL}"
    for volume in spec.volumes:
        if volume.zone_labels:
            return f"the zone of volume {volume.name}"
    return None


def unzoned_groups(state: ClusterState) -> dict[str, tuple[str, ...]]:
    """Groups whose nodes are in several zones while their template (labels, ``zones``) gives a new
    node none, with the zones their nodes are in: where such a group adds a node is unknown."""
    seen: dict[str, set[str]] = {}
    for node in state.nodes.values():
        zone = node.labels.get(ZONE_LABEL)
        group = state.groups.get(node.group)
        if zone is not None and group is not None and not _template_zoned(group):
            seen.setdefault(node.group, set()).add(zone)
    return {name: tuple(sorted(zones)) for name, zones in seen.items() if len(zones) > 1}


def _template_zoned(group: NodeGroup) -> bool:
    return bool(group.zones) or ZONE_LABEL in group.labels
