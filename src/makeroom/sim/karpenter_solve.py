"""Karpenter's scheduling simulation (``provisioning/scheduling``'s ``Solve``), which both its
provisioner and its consolidation run: where would these pods go, and which NodeClaims would be needed?

Pods are taken biggest first (CPU, then memory, then age), and each goes to the first of: an existing
node (Ready ones first, then by name; nodes still coming up count, as Karpenter's cluster state holds
them), a NodeClaim this pass already opened (those with the fewest pods first) that still has a type
holding all its pods, or a new NodeClaim of the first pool in weight order that admits it within its
limits. A pod that fits nowhere is retried after the others, while that makes progress. The cloud
launches each NodeClaim as the cheapest of its remaining types.

The constraints that look at other pods count as Karpenter's ``Topology`` counts them, through the
model's filters (``model.scheduling``) over the cluster as this pass leaves it (the pods it placed, the
pods being rescheduled taken off their nodes, each NodeClaim a node of its own hostname): topology
spread, required pod (anti-)affinity, its inverse (placed pods' anti-affinity) and host ports, on
existing nodes and on NodeClaims alike, with every zone of the pools and a new hostname counted as
an empty domain, as Karpenter counts them. A NodeClaim of a pool with zones takes a zone when a pod's
constraints need one (``NodeClaim.Add`` narrows its requirements): under a zone spread the allowed zone
with the fewest matching pods (``nextDomainTopologySpread``), else the first allowed zone in the pool's
order; an unconstrained claim is left to the cloud (the pool's round-robin). As under Karpenter's
default ``Respect`` preference policy, a pod's ``ScheduleAnyway`` spread counts as ``DoNotSchedule``
until the pod fits nowhere, then is dropped and the pod tried again (``Preferences.Relax``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from makeroom.model import InstanceType, Node, NodeGroup, OwnerKind, Pod, PodSpec, Resources
from makeroom.model.fit import label_fit, untolerated_taint
from makeroom.model.objects import (
    HOSTNAME_LABEL,
    UNSCHEDULABLE_TAINT,
    ZONE_LABEL,
    Taint,
    TaintEffect,
    UnsatisfiableAction,
)
from makeroom.model.provisioning import Headroom, admits, fitting, node_labels, pool_order
from makeroom.model.resources import CPU, MEMORY
from makeroom.model.scheduling import Placement, pod_mask
from makeroom.model.scheduling.placement import VirtualNode
from makeroom.model.scheduling.podtopologyspread import counts
from makeroom.model.state import ClusterState, Mask

_CORDON = (Taint(UNSCHEDULABLE_TAINT, "", TaintEffect.NO_SCHEDULE),)


@dataclass(slots=True)
class Claim:
    """A NodeClaim this pass opens: its pool, the types that still hold all its pods, its pods, and
    the zone its pods' constraints chose (None: the cloud's choice)."""

    group: NodeGroup
    options: tuple[InstanceType, ...]
    pods: list[Pod] = field(default_factory=list)
    requests: Resources = field(default_factory=Resources)
    zone: str | None = None

    def can_add(self, pod: Pod, requests: Resources) -> tuple[InstanceType, ...]:
        total = self.requests + requests
        return tuple(
            it for it in self.options if total.fits_in(it.capacity) and admits(self.group, pod.spec, it)
        )


@dataclass(slots=True)
class Solution:
    """Where each pod went: an existing node, a claim (its index in ``claims``), or nowhere."""

    on_node: dict[str, str] = field(default_factory=dict)  # pod key -> existing node
    on_claim: dict[str, int] = field(default_factory=dict)  # pod key -> index in claims
    failed: list[Pod] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)


def provisionable(pod: Pod) -> bool:
    """``IsProvisionable``: marked unschedulable by the scheduler, not bound, not nominated to a node,
    not a DaemonSet or mirror pod."""
    return (
        pod.unschedulable_since is not None
        and pod.node is None
        and not pod.terminating
        and pod.nominated_node is None
        and pod.owner_kind not in (OwnerKind.DAEMON_SET, OwnerKind.NODE)
    )


def reschedulable(pod: Pod) -> bool:
    """``IsReschedulable``: a pod that must run elsewhere when its node goes."""
    return not pod.terminating and pod.owner_kind not in (OwnerKind.DAEMON_SET, OwnerKind.NODE)


def karpenter_order(state: ClusterState, nodes: Iterable[str]) -> list[str]:
    """Existing nodes as Karpenter's scheduler tries them: initialized (Ready) first, then by name."""
    return sorted(nodes, key=lambda n: (not state.nodes[n].ready, n))


def _size(pod: Pod) -> tuple[int, int, float, int]:
    return (-pod.spec.requests[CPU], -pod.spec.requests[MEMORY], pod.created_at, pod.seq)


def _admits_node(spec: PodSpec, node: Node) -> bool:
    """Karpenter's fit on an existing node: labels, affinity, taints (cordon included); a node that
    is still coming up counts as the node it will be."""
    if node.unschedulable and untolerated_taint(spec, _CORDON) is not None:
        return False
    return label_fit(spec, node.labels, node.taints) is None


class NodeMasks:
    """Per pod spec, the nodes (by slot) whose labels, taints and cordon admit it, kept until a node
    comes, goes or changes (``ClusterState.node_generation``)."""

    def __init__(self) -> None:
        self._masks: dict[int, tuple[PodSpec, Mask]] = {}
        self._generation = -1

    def of(self, state: ClusterState, spec: PodSpec) -> Mask:
        if self._generation != state.node_generation:
            self._masks.clear()
            self._generation = state.node_generation
        hit = self._masks.get(id(spec))
        if hit is not None:
            return hit[1]
        mask = np.zeros(len(state.alive), dtype=np.bool_)
        for name, slot in state.slot_of.items():
            mask[slot] = _admits_node(spec, state.nodes[name])
        self._masks[id(spec)] = (spec, mask)
        return mask


class _Pass:
    """The cluster as one scheduling pass leaves it, for the filters that look at other pods: the pods
    it placed, the pods it reschedules taken off their nodes, each NodeClaim a node of its own."""

    def __init__(self, state: ClusterState, pods: Iterable[Pod], groups: Iterable[NodeGroup]) -> None:
        self.state = state
        self.moved: dict[str, str | None] = {p.key: None for p in pods if p.node is not None}
        self.virtual: dict[str, VirtualNode] = {}
        # Karpenter registers every zone its pools may launch in as a domain (count 0), and a new
        # hostname is always possible: empty nodes stand for them, so a spread's least count is
        # Karpenter's (``buildDomainGroups``, ``domainMinCount``).
        self.domains = {
            name: self.claim_node(name, g, z)
            for g in groups
            for z in (g.zones or (None,))
            for name in (f"domain {g.name}/{z}",)
        }
        self.anti = bool(state.anti_affine)
        self._strict: dict[int, PodSpec | None] = {}

    def concerned(self, pod: Pod) -> bool:
        return pod.spec.places_by_pods or self.anti

    def strict(self, pod: Pod) -> Pod | None:
        """The pod with its ScheduleAnyway spread as DoNotSchedule; None when it has none."""
        key = id(pod.spec)
        if key not in self._strict:
            soft = UnsatisfiableAction.SCHEDULE_ANYWAY
            hard = tuple(
                replace(c, when_unsatisfiable=UnsatisfiableAction.DO_NOT_SCHEDULE)
                if c.when_unsatisfiable is soft
                else c
                for c in pod.spec.topology_spread
            )
            changed = any(c.when_unsatisfiable is soft for c in pod.spec.topology_spread)
            self._strict[key] = replace(pod.spec, topology_spread=hard) if changed else None
        spec = self._strict[key]
        return None if spec is None else replace(pod, spec=spec)

    def placement(self, extra: Mapping[str, VirtualNode] | None = None) -> Placement:
        return Placement(self.state, self.moved, {**self.domains, **self.virtual, **(extra or {})})

    def others(self, pod: Pod) -> Mask | None:
        """Per slot (the state's, then the claims'), where the pod passes those filters; None: all."""
        return pod_mask(self.placement(), pod) if self.concerned(pod) else None

    def record(self, pod: Pod, node: str) -> None:
        self.moved[pod.key] = node
        self.anti = self.anti or bool(pod.spec.pod_anti_affinity)

    def claim_node(self, name: str, group: NodeGroup, zone: str | None) -> VirtualNode:
        labels = {**node_labels(group, None), HOSTNAME_LABEL: name}
        if zone is not None:
            labels[ZONE_LABEL] = zone
        return labels, group.taints

    def zone_for(self, pod: Pod, name: str, group: NodeGroup, zone: str | None) -> tuple[bool, str | None]:
        """Whether the pod may go to the claim ``name`` (new or open) of ``group`` in ``zone``, and the
        zone the claim must then have: a zoned pool's claim without one takes the zone the pod's
        constraints need, or stays the cloud's choice when every zone would do."""
        needs_zone = zone is None and bool(group.zones) and (self.concerned(pod) or bool(pod.spec.volumes))
        if not needs_zone:
            if not self.concerned(pod):
                return True, zone
            where = self.placement({name: self.claim_node(name, group, zone)})
            mask = pod_mask(where, pod)
            return mask is None or bool(mask[where.slot(name)]), zone
        allowed: list[tuple[int, str]] = []
        for z in group.zones:
            node = self.claim_node(name, group, z)
            if label_fit(pod.spec, node[0], node[1]) is not None:
                continue
            where = self.placement({name: node})
            mask = pod_mask(where, pod)
            if mask is None or mask[where.slot(name)]:
                allowed.append((_zone_count(where, pod, name), z))
        if not allowed:
            return False, None
        spread_by_zone = any(c.topology_key == ZONE_LABEL for c in pod.spec.topology_spread)
        if len(allowed) == len(group.zones) and not spread_by_zone:
            return True, None
        if not spread_by_zone:
            return True, allowed[0][1]
        return True, min(allowed, key=lambda a: (a[0], group.zones.index(a[1])))[1]


def _zone_count(where: Placement, pod: Pod, name: str) -> int:
    """The pods that the pod's zone spread counts in the zone of node ``name`` (Karpenter launches in
    the zone with the fewest)."""
    slot = where.slot(name)
    total = 0
    for c in pod.spec.topology_spread:
        if c.topology_key != ZONE_LABEL:
            continue
        per, _, width = counts(where, pod, c, (ZONE_LABEL,))
        code = int(where.domains(ZONE_LABEL)[slot])
        if 0 <= code < width:
            total += int(per[code])
    return total


def solve(
    state: ClusterState,
    pods: Iterable[Pod],
    nodes: Collection[str],
    groups: Iterable[NodeGroup],
    room: Mapping[str, Headroom],
    may_use: Callable[[Pod, str], bool] | None = None,
    masks: NodeMasks | None = None,
) -> Solution:
    """Place ``pods`` on the existing ``nodes`` or on new claims of ``groups`` within ``room``.
    ``may_use(pod, node)`` may forbid a node to a pod (consolidation's consolidateAfter rule)."""
    pods = list(pods)
    order = karpenter_order(state, nodes)
    slots = np.array([state.slot_of[n] for n in order], dtype=np.intp)
    free = state.free()[slots] if len(order) else np.zeros((0, len(state.index)), dtype=np.int64)
    cache = masks or NodeMasks()
    pools = pool_order(groups)
    headroom = dict(room)
    out = Solution()
    topo = _Pass(state, pods, pools)

    local: dict[int, Mask] = {}

    def mask_of(spec: PodSpec) -> Mask:
        hit = local.get(id(spec))
        if hit is None:
            hit = local[id(spec)] = cache.of(state, spec)[slots]
        return hit

    def claim_name(k: int) -> str:
        return f"nodeclaim-{k}"

    def open_claim(pod: Pod, claim: Claim, k: int) -> None:
        out.claims.append(claim)
        topo.virtual[claim_name(k)] = topo.claim_node(claim_name(k), claim.group, claim.zone)
        topo.record(pod, claim_name(k))
        out.on_claim[pod.key] = k

    def place(pod: Pod, judged: Pod) -> bool:
        """Place ``pod``, its constraints read from ``judged`` (the pod, or its strict variant)."""
        req_vec = state.requests_of(pod.spec)
        fits = mask_of(pod.spec) & np.all(free >= req_vec, axis=1) if len(order) else np.zeros(0, np.bool_)
        others = topo.others(judged) if fits.any() else None
        if others is not None:
            fits &= others[slots]
        for i in np.flatnonzero(fits):
            if may_use is None or may_use(pod, order[i]):
                free[i] -= req_vec
                out.on_node[pod.key] = order[i]
                topo.record(pod, order[i])
                return True
        requests = PodSpec.effective(pod.spec.requests)
        by_size = sorted(range(len(out.claims)), key=lambda k: len(out.claims[k].pods))
        for k in by_size:
            claim = out.claims[k]
            options = claim.can_add(pod, requests)
            if not options:
                continue
            ok, zone = topo.zone_for(judged, claim_name(k), claim.group, claim.zone)
            if ok:
                claim.options, claim.requests = options, claim.requests + requests
                claim.pods.append(pod)
                if zone != claim.zone:
                    claim.zone = zone
                    topo.virtual[claim_name(k)] = topo.claim_node(claim_name(k), claim.group, zone)
                topo.record(pod, claim_name(k))
                out.on_claim[pod.key] = k
                return True
        for group in pools:
            options = fitting(group, pod.spec, requests, headroom[group.name])
            if not options:
                continue
            k = len(out.claims)
            ok, zone = topo.zone_for(judged, claim_name(k), group, None)
            if ok:
                headroom[group.name] = headroom[group.name].after(options)
                open_claim(pod, Claim(group, options, [pod], requests, zone), k)
                return True
        return False

    def place_respecting_preferences(pod: Pod) -> bool:
        strict = topo.strict(pod)
        if strict is not None and place(pod, strict):
            return True
        return place(pod, pod)

    queue = sorted(pods, key=_size)
    last_len: dict[str, int] = {}
    while queue:
        pod = queue[0]
        if last_len.get(pod.key) == len(queue):
            break  # a full round without progress
        queue = queue[1:]
        if not place_respecting_preferences(pod):
            queue.append(pod)
            last_len[pod.key] = len(queue)
    out.failed = queue
    return out
