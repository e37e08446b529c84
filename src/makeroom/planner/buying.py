"""What the autoscaler would buy for a pod that no node takes: the one place the planner asks it.

The cluster-autoscaler (as the planner has always assumed): the cheapest group the pod may use that
can still grow, ties by the groups' order; a new node is the group's template. Karpenter
(``ClusterState.autoscaler``): its own choice, ``model.provisioning``: the first pool by weight that
admits the pod within its limits, launched as the cheapest of its types that fit. Karpenter chooses
among all pools, so when its choice is not one of the groups the caller allows (a victim's new node
would be of a group the pending pod could use), it buys nothing the plan may count on.

The cluster-autoscaler's expander picks the group: under ``priority`` the highest configured
priority (``ClusterView.expander_priorities``), under ``price`` the lowest price score
(``model.expander.price_score``), ties and the other expanders the cheapest group. A moved replica
waits unschedulable like any pod, and the expander, not the plan, picks the group it grows for it. So
the plan counts on a new node for moved replicas only where the autoscaler would not grow a group the
pending pod could use instead (``grows_instead``): under ``priority`` and ``price`` only a rival the
expander ranks as high or higher is a risk (a tie may go either way); least-waste ties at random (a
CPU and a GPU group of one shape waste the same) and weighs whatever pods wait at that moment, so
with it (and with random) any group the pending pod could use that takes the replica and may grow
rules the new node out (docs/controller.md, "Moved replicas and the autoscaler's expander").
"""

from __future__ import annotations

import weakref
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from makeroom.model import AutoscalerKind, Expander, PodSpec, Resources
from makeroom.model.expander import pod_price, price_score
from makeroom.model.nodepool import NODES
from makeroom.model.provisioning import Headroom, choose
from makeroom.model.resources import CPU, DEFAULT_MAX_PODS, PODS, Vector
from makeroom.model.view import ClusterView


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
    expander: Expander = Expander.LEAST_WASTE,
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
        name = min(growable, key=lambda g: (*expander_rank(view, spec, g, expander), *cheapest(view, g)))
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
    expander: Expander,
) -> bool:
    """Whether the cluster-autoscaler, asked for a node for a moved pod of this spec, might grow one of
    the ``avoid`` groups instead of ``group``: one of its ``rivals`` that may still grow."""
    groups = view.state.groups
    return any(sizes[h] < groups[h].max for h in rivals(view, spec, group, avoid, expander))


def rivals(
    view: ClusterView, spec: PodSpec, group: str, avoid: Collection[str], expander: Expander
) -> list[str]:
    """The groups of ``avoid`` that the cluster-autoscaler might grow instead of ``group`` for a moved
    pod of this spec while they are below their max: those whose new node takes the pod, unless the
    expander (priority, price) surely picks ``group`` over them. None under Karpenter: its choice is
    foreseeable, and ``would_buy`` follows it."""
    if view.state.autoscaler is AutoscalerKind.KARPENTER:
        return []
    mine = expander_rank(view, spec, group, expander)
    # Without a foreseeable rank (least-waste, random) they do not depend on ``group``; consolidation
    # asks for every cheaper group of every pod of every node it tries, on a trace's 27 groups.
    key = (spec, group if mine else "", tuple(avoid), expander)
    memo = _RIVALS.setdefault(view, {})
    found = memo.get(key)
    if found is None:
        r = view.state.requests_of(spec)
        found = [
            h
            for h in avoid
            if view.admits(spec, h)
            and bool((view.template(h) >= r).all())
            and not (mine and mine < expander_rank(view, spec, h, expander))
        ]
        memo[key] = found
    return found


_RIVALS: weakref.WeakKeyDictionary[
    ClusterView, dict[tuple[PodSpec, str, tuple[str, ...], Expander], list[str]]
]
_RIVALS = weakref.WeakKeyDictionary()
"""``rivals`` known per view: a view is of one moment of the cluster, so they hold as long as it does."""


def expander_rank(view: ClusterView, spec: PodSpec, group: str, expander: Expander) -> tuple[float, ...]:
    """How the expander ranks growing ``group`` by one node for a pod of this spec, lowest first; ()
    for an expander whose choice is not foreseeable (least-waste, random: the cheapest is assumed)."""
    if expander is Expander.PRIORITY:
        prio = view.expander_priorities
        # unmatched groups come after every matched one (the expander passes them over)
        return (0.0, -prio[group]) if group in prio else (1.0, 0.0)
    if expander is Expander.PRICE:
        state = view.state
        template = view.template(group)
        gpus = state.index.gpu_positions()
        return (
            price_score(
                state.groups[group].price_per_hour,
                1,
                pod_price(spec.requests),
                float(template[state.index.position(CPU)]) / 1000.0,
                bool(gpus) and bool(np.any(template[gpus] > 0)),
                len(state.nodes),
            ),
        )
    return ()


def cheapest(view: ClusterView, group: str) -> tuple[float, int]:
    return (view.state.groups[group].price_per_hour, view.group_rank[group])


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
