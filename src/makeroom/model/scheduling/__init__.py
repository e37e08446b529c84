"""kube-scheduler's filters, one module per plugin, behind one entry point.

- ``filter_nodes(state, pod)``: every node -> None when the default profile's filters would let the
  pod go there now, else the first reason it fails (a ``FitFailure`` with kube-scheduler's message).
- ``pod_mask(placement, pod)``: the node slots that pass the filters that look at other pods
  (InterPodAffinity, PodTopologySpread, NodePorts), under a placement that may have pods moved; None
  when none of them can fail for this pod (most pods: then callers keep their per-spec masks as is).
- ``pod_failures(placement, pod)``: the same, as (reason, failing slots) in kube-scheduler's order.

The rules that read only the node (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity,
VolumeBinding's PersistentVolume node affinity, VolumeZone) are ``model.fit.static_fit``, cached per
spec by the state and the view.
"""

from __future__ import annotations

import numpy as np

from makeroom.model.fit import FitFailure, resource_fit, static_fit
from makeroom.model.objects import Pod
from makeroom.model.scheduling.interpodaffinity import affinity_failures
from makeroom.model.scheduling.nodeports import port_failures
from makeroom.model.scheduling.placement import Placement
from makeroom.model.scheduling.podtopologyspread import spread_failures
from makeroom.model.state import ClusterState, Mask

__all__ = ["Placement", "filter_nodes", "pod_failures", "pod_mask"]


def pod_failures(placement: Placement, pod: Pod) -> list[tuple[FitFailure, Mask]]:
    """The filters that look at other pods, in kube-scheduler's order (NodePorts, PodTopologySpread,
    InterPodAffinity); the pod itself is not counted where it stands."""
    if not pod.spec.places_by_pods and not placement.any_anti_affine():
        return []
    where = placement.without(pod)
    return port_failures(where, pod) + spread_failures(where, pod) + affinity_failures(where, pod)


def pod_mask(placement: Placement, pod: Pod) -> Mask | None:
    failures = pod_failures(placement, pod)
    if not failures:
        return None
    ok = np.ones(len(placement.state.alive), dtype=np.bool_)
    for _, bad in failures:
        ok &= ~bad
    return ok


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
