"""The Filter plugins that look at one node and its pods only: NodeName, NodeUnschedulable,
TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, and the volume plugins' bound-claim checks
(VolumeBinding's PV node affinity, VolumeZone's PV zone labels). Each returns None or why not."""

from __future__ import annotations

from collections.abc import Sequence

from tests.kubecheck.cluster import (
    Cluster,
    amount,
    host_ports,
    pod_namespace,
    pod_requests,
    quantity,
    spec_of,
)
from tests.kubecheck.selectors import (
    Obj,
    node_labels,
    node_name,
    node_selector_terms_match,
    required_node_affinity_matches,
    tolerates,
    untolerated_taint,
)

UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
_VOLUME_ZONE_LABELS = (
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
)
_GA_LABEL = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}


def node_name_filter(pod: Obj, node: Obj) -> str | None:
    wanted = spec_of(pod).get("nodeName")
    if wanted and wanted != node_name(node):
        return "NodeName: node(s) didn't match the requested node name"
    return None


def node_unschedulable(pod: Obj, node: Obj) -> str | None:
    if not spec_of(node).get("unschedulable"):
        return None
    if any(tolerates(t, UNSCHEDULABLE_TAINT) for t in spec_of(pod).get("tolerations") or ()):
        return None
    return "NodeUnschedulable: node(s) were unschedulable"


def taint_toleration(pod: Obj, node: Obj) -> str | None:
    taint = untolerated_taint(spec_of(node).get("taints") or (), spec_of(pod).get("tolerations") or ())
    if taint is None:
        return None
    return f"TaintToleration: node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"


def node_affinity(pod: Obj, node: Obj) -> str | None:
    if required_node_affinity_matches(pod, node):
        return None
    return "NodeAffinity: node(s) didn't match Pod's node affinity/selector"


def _port_conflict(used: Sequence[tuple[str, str, int]], ip: str, protocol: str, port: int) -> bool:
    """HostPortInfo.CheckConflict: the same protocol and port, where either side binds 0.0.0.0 or both
    the same address."""
    for u_ip, u_proto, u_port in used:
        if u_proto != protocol or u_port != port:
            continue
        if ip == "0.0.0.0" or u_ip in ("0.0.0.0", ip):
            return True
    return False


def node_ports(pod: Obj, pods_here: Sequence[Obj]) -> str | None:
    used = [p for other in pods_here for p in host_ports(other)]
    for ip, protocol, port in host_ports(pod):
        if _port_conflict(used, ip, protocol, port):
            return "NodePorts: node(s) didn't have free ports for the requested pod ports"
    return None


def _allocatable(node: Obj) -> dict[str, int]:
    status = node.get("status") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}
    return {k: amount(k, quantity(v)) for k, v in alloc.items()}


def node_resources_fit(pod: Obj, node: Obj, pods_here: Sequence[Obj]) -> str | None:
    """fitsRequest: one more pod within allocatable pods; then each requested resource (a zero request
    is not checked) within allocatable minus what the node's pods request."""
    alloc = _allocatable(node)
    if len(pods_here) + 1 > alloc.get("pods", 0):
        return "NodeResourcesFit: Too many pods"
    want = pod_requests(pod)
    used: dict[str, int] = {}
    for other in pods_here:
        for k, v in pod_requests(other).items():
            used[k] = used.get(k, 0) + v
    short = sorted(k for k, v in want.items() if v > 0 and v > alloc.get(k, 0) - used.get(k, 0))
    if short:
        return "NodeResourcesFit: " + ", ".join(f"Insufficient {k}" for k in short)
    return None


def claim_names(pod: Obj) -> list[str]:
    return [
        v["persistentVolumeClaim"].get("claimName") or ""
        for v in spec_of(pod).get("volumes") or ()
        if v.get("persistentVolumeClaim") is not None
    ]


def bound_volumes(pod: Obj, cluster: Cluster) -> tuple[list[Obj], str | None]:
    """The PVs of the pod's claims, or why the pod fits no node at all: a claim that is missing, being
    deleted or unbound (VolumeBinding's PreFilter), or bound to a missing volume."""
    volumes = []
    ns = pod_namespace(pod)
    for name in claim_names(pod):
        claim = cluster.claims.get(f"{ns}/{name}")
        if claim is None:
            return [], f"VolumeBinding: persistentvolumeclaim {name!r} not found"
        if (claim.get("metadata") or {}).get("deletionTimestamp"):
            return [], f"VolumeBinding: persistentvolumeclaim {name!r} is being deleted"
        volume_name = spec_of(claim).get("volumeName")
        if not volume_name or (claim.get("status") or {}).get("phase") != "Bound":
            return [], "VolumeBinding: pod has unbound immediate PersistentVolumeClaims"
        volume = cluster.volumes.get(volume_name)
        if volume is None:
            return [], f"VolumeBinding: persistentvolume {volume_name!r} not found"
        volumes.append(volume)
    return volumes, None


def volume_binding(volumes: Sequence[Obj], node: Obj) -> str | None:
    """storagehelpers.CheckNodeAffinity: the PV's required terms against the node's labels alone (a
    matchFields term sees an empty node name)."""
    for pv in volumes:
        required = (spec_of(pv).get("nodeAffinity") or {}).get("required")
        if required is None:
            continue
        if not node_selector_terms_match(required.get("nodeSelectorTerms") or (), node_labels(node), ""):
            return "VolumeBinding: node(s) had volume node affinity conflict"
    return None


def volume_zone(volumes: Sequence[Obj], node: Obj) -> str | None:
    """A PV's zone and region labels ("a__b" is either) must hold on a node that has any such label."""
    labels = node_labels(node)
    if not any(k in labels for k in _VOLUME_ZONE_LABELS):
        return None
    for pv in volumes:
        pv_labels = (pv.get("metadata") or {}).get("labels") or {}
        for key in _VOLUME_ZONE_LABELS:
            if key not in pv_labels:
                continue
            parts = [z.strip() for z in pv_labels[key].split("__")]
            if not all(parts):
                continue  # LabelZonesToSet refuses an empty part; the plugin then ignores the label
            allowed = set(parts)
            have = labels.get(key, labels.get(_GA_LABEL.get(key, key)))
            if have is None or have not in allowed:
                return "VolumeZone: node(s) had no available volume zone"
    return None
