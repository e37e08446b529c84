"""What the autoscaler would buy for a pod that no node takes: the one place the planner asks it.

The cluster-autoscaler (as the planner has always assumed): the cheapest group the pod may use that
can still grow, ties by the groups' order; a new node is the group's template. Karpenter
(``ClusterState.autoscaler``): its own choice, ``model.provisioning``: the first pool by weight that
admits the pod within its limits, launched as the cheapest of its types that fit. Karpenter chooses
among all pools, so when its choice is not one of the groups the caller allows (a victim's new node
would be of a group the pending pod could use), it buys nothing the plan may count on.

A moved replica waits unschedulable like any pod, and the autoscaler's expander, not the plan, picks
the group it grows for it. So, under the cluster-autoscaler, the plan counts on a new node for moved
replicas only where the autoscaler could not grow a group the pending pod could use instead
(``grows_instead``): only the ``priority`` expander is foreseeable (groups in preference order);
least-waste ties at random (a CPU and a GPU group of one shape waste the same) and weighs whatever
pods wait at that moment, so with it (and with price or random) any group the pending pod could use
that takes the replica and may grow rules the new node out (docs/controller.md, "Moved replicas and
the autoscaler's expander").
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from makeroom.model import AutoscalerKind, PodSpec, Resources
from makeroom.model.nodepool import NODES
from makeroom.model.provisioning import Headroom, choose
from makeroom.model.resources import DEFAULT_MAX_PODS, PODS, Vector
from makeroom.model.view import ClusterView

PRIORITY = "priority"
"""The cluster-autoscaler's expander that grows groups in a configured order (the groups' order)."""


@dataclass(frozen=True, slots=True)
class Purchase:
    """One new node: its group, its allocatable (as a vector of the state's index) and its price."""

    group: str
    capacity: Vector
    price: float


def would_buy(
    view: ClusterView,
    spec: PodSpec,
    allowed: Collection[str],
    sizes: Mapping[str, int],
    avoid: Collection[str] = (),
    expander: str = "least-waste",
) -> Purchase | None:
    """The new node the autoscaler would add for a pod of this spec, if it is of an ``allowed`` group
    that may grow; ``sizes``: each group's nodes, counting those the plan adds already. ``avoid``: the
    groups of the pending pod a moved pod makes room for, which the autoscaler must not grow for it;
    ``expander``: the cluster-autoscaler's."""
    state = view.state
    if state.autoscaler is not AutoscalerKind.KARPENTER:
        growable = [
            g
            for g in allowed
            if view.admits(spec, g)
            and sizes[g] < state.groups[g].max
            and not grows_instead(view, spec, g, avoid, sizes, expander)
        ]
        if not growable:
            return None
        name = min(growable, key=lambda g: (state.groups[g].price_per_hour, view.group_rank[g]))
        return Purchase(name, view.template(name), state.groups[name].price_per_hour)
    requests = PodSpec.effective(spec.requests)
    choice = choose(state.groups.values(), spec, requests, _room(view, sizes))
    if choice is None or choice.group.name not in allowed:
        return None
    cap = dict(choice.instance_type.capacity)
    cap.setdefault(PODS, DEFAULT_MAX_PODS * 1000)
    vec = state.index.vector({k: v for k, v in cap.items() if k in state.index.names})
    return Purchase(choice.group.name, vec, choice.instance_type.price_per_hour)


def grows_instead(
    view: ClusterView,
    spec: PodSpec,
    group: str,
    avoid: Collection[str],
    sizes: Mapping[str, int],
    expander: str,
) -> bool:
    """Whether the cluster-autoscaler, asked for a node for a moved pod of this spec, might grow one of
    the ``avoid`` groups instead of ``group``: one of its ``rivals`` that may still grow."""
    groups = view.state.groups
    return any(sizes[h] < groups[h].max for h in rivals(view, spec, group, avoid, expander))


def rivals(view: ClusterView, spec: PodSpec, group: str, avoid: Collection[str], expander: str) -> list[str]:
    """The groups of ``avoid`` that the cluster-autoscaler might grow instead of ``group`` for a moved
    pod of this spec while they are below their max: those whose new node takes the pod, unless the
    expander is priority and ``group`` comes first. None under Karpenter: its choice is foreseeable,
    and ``would_buy`` follows it."""
    if view.state.autoscaler is AutoscalerKind.KARPENTER:
        return []
    r = view.state.requests_of(spec)
    rank = view.group_rank
    return [
        h
        for h in avoid
        if view.admits(spec, h)
        and np.all(view.template(h) >= r)
        and (expander != PRIORITY or rank[h] < rank[group])
    ]


def _room(view: ClusterView, sizes: Mapping[str, int]) -> dict[str, Headroom]:
    """Each pool's limits less its nodes (the plan's new ones as its largest type, pessimistically)."""
    state = view.state
    out = {}
    for g in state.groups.values():
        nodes = state.nodes_of(g.name)
        used = sum((n.allocatable for n in nodes), start=Resources())
        size = sizes.get(g.name, len(nodes))
        extra = max(0, size - len(nodes))
        if extra and g.limits:
            largest = {n: max(it.capacity[n] for it in g.types()) for n in g.limits if n != NODES}
            used = used + Resources(largest).scaled(extra)
        limited = frozenset(n for n in g.limits if n != NODES)
        out[g.name] = Headroom(g.limits - used, limited, g.max - size)
    return out
