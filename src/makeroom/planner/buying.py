"""What the autoscaler would buy for a pod that no node takes: the one place the planner asks it.

The cluster-autoscaler (as the planner has always assumed): the cheapest group the pod may use that can
still grow, ties by the groups' order; a new node is the group's template. Karpenter
(``ClusterState.autoscaler``): its own choice, ``model.provisioning``: the first pool by weight that
admits the pod within its limits, launched as the cheapest of its types that fit. Karpenter chooses
among all pools, so when its choice is not one of the groups the caller allows (a victim's new node
would be of a group the pending pod could use), it buys nothing the plan may count on.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from makeroom.model import AutoscalerKind, NodeGroup, PodSpec, Resources
from makeroom.model.fit import label_fit
from makeroom.model.nodepool import NODES
from makeroom.model.provisioning import Headroom, admits, choose, launchable
from makeroom.model.resources import DEFAULT_MAX_PODS, PODS, Vector
from makeroom.model.state import ClusterState


@dataclass(frozen=True, slots=True)
class Purchase:
    """One new node: its group, its allocatable (as a vector of the state's index) and its price."""

    group: str
    capacity: Vector
    price: float


def _vector(state: ClusterState, capacity: Resources) -> Vector:
    cap = dict(capacity)
    cap.setdefault(PODS, DEFAULT_MAX_PODS * 1000)
    return state.index.vector({k: v for k, v in cap.items() if k in state.index.names})


def _karpenter(state: ClusterState) -> bool:
    return state.autoscaler is AutoscalerKind.KARPENTER


def new_node_takes(state: ClusterState, group: NodeGroup, spec: PodSpec) -> bool:
    """Could a new node of the group take a pod of this spec (labels, taints and size)? A pool: a node
    of any of the types it may launch."""
    if not all(r in state.index.names for r in spec.requests):
        return False
    req = state.requests_of(spec)
    if not _karpenter(state):
        fits = label_fit(spec, group.node_labels(), group.taints) is None
        return fits and bool(np.all(_vector(state, group.capacity) >= req))
    return any(
        admits(group, spec, it) and bool(np.all(_vector(state, it.capacity) >= req))
        for it in launchable(group)
    )


def _room(state: ClusterState, sizes: Mapping[str, int]) -> dict[str, Headroom]:
    """Each pool's limits less its nodes (the plan's new ones as its largest type, pessimistically)."""
    out = {}
    for g in state.groups.values():
        nodes = state.nodes_of(g.name)
        used = sum((n.allocatable for n in nodes), start=Resources())
        extra = max(0, sizes.get(g.name, len(nodes)) - len(nodes))
        if extra and g.limits:
            largest = {n: max(it.capacity[n] for it in g.types()) for n in g.limits if n != NODES}
            used = used + Resources(largest).scaled(extra)
        limited = frozenset(n for n in g.limits if n != NODES)
        out[g.name] = Headroom(g.limits - used, limited, g.max - sizes.get(g.name, len(nodes)))
    return out


def would_buy(
    state: ClusterState,
    spec: PodSpec,
    allowed: Collection[str],
    sizes: Mapping[str, int],
    rank: Mapping[str, int],
) -> Purchase | None:
    """The new node the autoscaler would add for a pod of this spec, if it is of an ``allowed`` group;
    ``sizes``: each group's nodes counting those the plan adds already."""
    if not _karpenter(state):
        growable = [
            g
            for g in allowed
            if sizes[g] < state.groups[g].max and new_node_takes(state, state.groups[g], spec)
        ]
        if not growable:
            return None
        name = min(growable, key=lambda g: (state.groups[g].price_per_hour, rank[g]))
        group = state.groups[name]
        return Purchase(name, _vector(state, group.capacity), group.price_per_hour)
    requests = PodSpec.effective(spec.requests)
    choice = choose(state.groups.values(), spec, requests, _room(state, sizes))
    if choice is None or choice.group.name not in allowed:
        return None
    kind = choice.instance_type
    return Purchase(choice.group.name, _vector(state, kind.capacity), kind.price_per_hour)
