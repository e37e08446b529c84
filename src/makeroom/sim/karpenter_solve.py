"""Karpenter's scheduling simulation (``provisioning/scheduling``'s ``Solve``), which both its
provisioner and its consolidation run: where would these pods go, and which NodeClaims would be needed?

Pods are taken biggest first (CPU, then memory, then age), and each goes to the first of: an existing
node (Ready ones first, then by name; nodes still coming up count, as Karpenter's cluster state holds
them), a NodeClaim this pass already opened (those with the fewest pods first) that still has a type
holding all its pods, or a new NodeClaim of the first pool in weight order that admits it within its
limits. A pod that fits nowhere is retried after the others, while that makes progress. The cloud
launches each NodeClaim as the cheapest of its remaining types.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from makeroom.model import InstanceType, Node, NodeGroup, OwnerKind, Pod, PodSpec, Resources
from makeroom.model.fit import label_fit, untolerated_taint
from makeroom.model.objects import UNSCHEDULABLE_TAINT, Taint, TaintEffect
from makeroom.model.provisioning import Headroom, admits, fitting, pool_order
from makeroom.model.resources import CPU, MEMORY
from makeroom.model.state import ClusterState, Mask

_CORDON = (Taint(UNSCHEDULABLE_TAINT, "", TaintEffect.NO_SCHEDULE),)


@dataclass(slots=True)
class Claim:
    """A NodeClaim this pass opens: its pool, the types that still hold all its pods, its pods."""

    group: NodeGroup
    options: tuple[InstanceType, ...]
    pods: list[Pod] = field(default_factory=list)
    requests: Resources = field(default_factory=Resources)

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
    order = karpenter_order(state, nodes)
    slots = np.array([state.slot_of[n] for n in order], dtype=np.intp)
    free = state.free()[slots] if len(order) else np.zeros((0, len(state.index)), dtype=np.int64)
    cache = masks or NodeMasks()
    pools = pool_order(groups)
    headroom = dict(room)
    out = Solution()

    local: dict[int, Mask] = {}

    def mask_of(spec: PodSpec) -> Mask:
        hit = local.get(id(spec))
        if hit is None:
            hit = local[id(spec)] = cache.of(state, spec)[slots]
        return hit

    def place(pod: Pod) -> bool:
        req_vec = state.requests_of(pod.spec)
        fits = mask_of(pod.spec) & np.all(free >= req_vec, axis=1) if len(order) else np.zeros(0, np.bool_)
        for i in np.flatnonzero(fits):
            if may_use is None or may_use(pod, order[i]):
                free[i] -= req_vec
                out.on_node[pod.key] = order[i]
                return True
        requests = PodSpec.effective(pod.spec.requests)
        by_size = sorted(range(len(out.claims)), key=lambda k: len(out.claims[k].pods))
        for k in by_size:
            claim = out.claims[k]
            options = claim.can_add(pod, requests)
            if options:
                claim.options, claim.requests = options, claim.requests + requests
                claim.pods.append(pod)
                out.on_claim[pod.key] = k
                return True
        for group in pools:
            options = fitting(group, pod.spec, requests, headroom[group.name])
            if options:
                out.claims.append(Claim(group, options, [pod], requests))
                headroom[group.name] = headroom[group.name].after(options)
                out.on_claim[pod.key] = len(out.claims) - 1
                return True
        return False

    queue = sorted(pods, key=_size)
    last_len: dict[str, int] = {}
    while queue:
        pod = queue[0]
        if last_len.get(pod.key) == len(queue):
            break  # a full round without progress
        queue = queue[1:]
        if not place(pod):
            queue.append(pod)
            last_len[pod.key] = len(queue)
    out.failed = queue
    return out
