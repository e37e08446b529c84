"""Consolidation (cortex issue 1965): empty a costly node by moving its pods to cheaper groups.

The cluster-autoscaler removes a node only when its pods fit on the other *existing* nodes; it never
adds a cheap node to make a removal possible. This pass finds the node whose pods can all move to
cheaper groups (free room there, or new nodes within max) for less than the node costs, so that the
node empties and the autoscaler removes it. Pure: the state is never changed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field, replace

import numpy as np

from makeroom.model import DO_NOT_MOVE, AutoscalerKind, Expander, Node, NodeGroup, OwnerKind, Pod, PodSpec
from makeroom.model.objects import MOVED_AT
from makeroom.model.resources import Vector
from makeroom.model.state import ClusterState, Mask
from makeroom.model.view import ClusterView
from makeroom.planner.buying import grows_instead, would_buy
from makeroom.planner.rules import not_movable
from makeroom.planner.types import Policy


@dataclass(frozen=True, slots=True)
class ConsolidationPolicy:
    now: float = 0.0
    cooldown: float = 600.0
    recently_moved: frozenset[str] = frozenset()  # pod keys in cooldown
    max_moves: int = 10  # the budget of moves of one consolidation
    min_saving: float = 0.2  # the share of the freed node's price that must be saved
    skip_nodes: frozenset[str] = frozenset()  # nodes not to empty (say, recently given up)
    pinned: frozenset[str] = frozenset()  # pod keys the controller forbids to move (its scope)
    expander: Expander = Expander.LEAST_WASTE  # the cluster-autoscaler's, which grows a group for a moved pod


@dataclass(frozen=True, slots=True)
class Shift:
    """One pod leaving the node to be emptied, and where it goes."""

    pod: Pod
    workload: str | None
    to_node: str | None
    to_new_node_group: str | None

    def to_json(self) -> dict[str, object]:
        return {
            "pod": self.pod.name,
            "workload": self.workload,
            "from_node": self.pod.node,
            "to_node": self.to_node,
            "to_new_node_group": self.to_new_node_group,
        }


@dataclass(frozen=True, slots=True)
class Consolidation:
    node: str
    group: str
    shifts: tuple[Shift, ...]
    scale_ups: dict[str, int] = field(default_factory=dict)
    saving_per_hour: float = 0.0

    def why(self) -> str:
        added = new_nodes_text(self.scale_ups)
        return (
            f"moving {len(self.shifts)} pod(s) off {self.node} ({self.group}) with {added} "
            f"saves {self.saving_per_hour:.3f}/h"
        )


@dataclass(slots=True)
class _Cluster:
    """What every candidate node is weighed against, computed once per call."""

    view: ClusterView
    cheaper: dict[str, list[NodeGroup]]  # group -> strictly cheaper groups
    allowed: dict[str, Mask]  # group -> nodes of its cheaper groups
    nowhere: dict[tuple[int, str], bool] = field(default_factory=dict)  # (id of a spec, group) -> _nowhere


def consolidate(
    state: ClusterState, policy: ConsolidationPolicy, view: ClusterView | None = None
) -> Consolidation | None:
    """The node whose emptying saves the most, or None when none pays."""
    ctx = _context(state, view if view is not None and not view.stale else ClusterView(state))
    best: Consolidation | None = None
    for node in sorted(state.nodes.values(), key=lambda n: (-_price(state, n), n.name)):
        if not ctx.cheaper.get(node.group):
            continue  # nowhere cheaper to go: every node after it is as cheap or cheaper
        found = _try(state, ctx, node, policy)
        if found is not None and (best is None or found.saving_per_hour > best.saving_per_hour):
            best = found
    return best


def answer_key(state: ClusterState, policy: ConsolidationPolicy) -> tuple[object, ...]:
    """What ``consolidate``'s answer on this state object depends on: its generation (every placement,
    node change and nomination), the policy but its clock, and the pods whose movability their own
    fields or the clock decide (terminating, opted out, moved recently), which leave the generation
    alone. The same key on the same object, the same answer: a caller keeps a fruitless answer rather
    than search again a cluster that did not change in a way that matters."""
    rules = Policy(now=policy.now, cooldown=policy.cooldown)
    held = frozenset(
        (p.key, p.terminating, not_movable(p, rules))
        for p in state.pods.values()
        if p.terminating or DO_NOT_MOVE in p.annotations or MOVED_AT in p.annotations
    )
    return (state.generation, replace(policy, now=0.0), held)


def unpriced(state: ClusterState) -> bool:
    """No node group has a price (nor any of its instance types): no group is cheaper than another, so
    consolidation can never start. Said once by ``plan`` and ``run``, which would otherwise show
    nothing at all."""
    return bool(state.groups) and all(
        it.price_per_hour <= 0 for g in state.groups.values() for it in g.types()
    )


def _context(state: ClusterState, view: ClusterView) -> _Cluster:
    in_group: dict[str, Mask] = {}
    for name, node in state.nodes.items():
        if node.group not in in_group:
            in_group[node.group] = np.zeros(len(state.alive), dtype=np.bool_)
        in_group[node.group][state.slot_of[name]] = True
    cheaper: dict[str, list[NodeGroup]] = {}
    allowed: dict[str, Mask] = {}
    for g in state.groups.values():
        cheaper[g.name] = [h for h in state.groups.values() if h.price_per_hour < g.price_per_hour]
        mask = np.zeros(len(state.alive), dtype=np.bool_)
        for h in cheaper[g.name]:
            if h.name in in_group:
                mask |= in_group[h.name]
        allowed[g.name] = mask
    return _Cluster(view, cheaper, allowed)


def _price(state: ClusterState, node: Node) -> float:
    return state.groups[node.group].price_per_hour if node.group in state.groups else 0.0


def _try(state: ClusterState, ctx: _Cluster, node: Node, policy: ConsolidationPolicy) -> Consolidation | None:
    group = state.groups.get(node.group)
    if group is None or not node.ready or node.unschedulable or node.name in policy.skip_nodes:
        return None
    if ctx.view.group_size[group.name] <= group.min or state.nominated.get(node.name):
        return None
    pods = [p for p in state.pods_on[node.name].values() if p.owner_kind != OwnerKind.DAEMON_SET]
    if not pods or len(pods) > policy.max_moves or any(p.terminating for p in pods):
        return None
    if any(_nowhere(state, ctx, p.spec, group) for p in pods):
        return None  # what _place would find, without its search (most nodes end here, on every call)
    rules = Policy(
        now=policy.now, cooldown=policy.cooldown, recently_moved=policy.recently_moved, pinned=policy.pinned
    )
    for pod in pods:
        w = state.workloads.get(pod.workload) if pod.workload is not None else None
        if not_movable(pod, rules) is not None or w is None or w.replicas_owner is not None:
            return None  # every pod must move, make-before-break, for the node to empty
    found = _place(state, ctx, node, group, pods, policy.expander)
    if found is None or found.saving_per_hour <= max(0.0, policy.min_saving * group.price_per_hour):
        return None  # it would not pay: the cheap nodes it needs cost about what it frees
    return found


def _place(
    state: ClusterState, ctx: _Cluster, node: Node, group: NodeGroup, pods: list[Pod], expander: Expander
) -> Consolidation | None:
    # A moved pod that needs a new node waits unschedulable, and the autoscaler's expander, not this
    # plan, picks the group it grows. Should it grow one no cheaper than the freed node's, nothing is
    # saved and the next search empties that node in turn: pods moved round and round between groups
    # (docs/benchmarks.md, openb). So no group no cheaper may be one the expander could pick instead.
    cheaper = ctx.cheaper[group.name]
    names = {g.name for g in cheaper}
    dearer = [h for h in state.groups if h not in names]
    found = place(state, ctx.view, pods, ctx.allowed[group.name], cheaper, dearer, expander)
    if found is None:
        return None
    shifts, new_nodes = found
    saving = group.price_per_hour - sum(g.price_per_hour for g in new_nodes)
    return Consolidation(node.name, group.name, tuple(shifts), by_group(new_nodes), saving)


def by_group(new_nodes: list[NodeGroup]) -> dict[str, int]:
    """New nodes counted by group (a plan's scale-ups)."""
    out: dict[str, int] = {}
    for g in new_nodes:
        out[g.name] = out.get(g.name, 0) + 1
    return out


def new_nodes_text(scale_ups: dict[str, int]) -> str:
    return ", ".join(f"{n} new {g} node(s)" for g, n in scale_ups.items()) or "no new node"


def place(
    state: ClusterState,
    view: ClusterView,
    pods: list[Pod],
    allowed: Mask,
    groups: list[NodeGroup],
    avoid: Collection[str] = (),
    expander: Expander = Expander.LEAST_WASTE,
) -> tuple[list[Shift], list[NodeGroup]] | None:
    """Where each of the pods goes (largest first): free room on the ``allowed`` nodes, first in the
    nodes' order, else a new node of the cheapest of ``groups`` that may grow and takes it, unless the
    autoscaler's ``expander`` might grow one of the ``avoid`` groups for it instead, or, under
    Karpenter, Karpenter would launch it in another pool (new nodes filled before another is added).
    None when one of them has nowhere to go. Shared by consolidation and by the headroom keeper
    (planner/keep_room.py)."""
    free = view.free  # copied at the first move onto an existing node: most tries fail before
    copied = False
    new_nodes: list[tuple[NodeGroup, Vector]] = []
    shifts: list[Shift] = []
    for pod in sorted(pods, key=lambda p: -int(state.requests_of(p.spec).sum())):
        req = state.requests_of(pod.spec)
        fits = allowed & view.fits(pod.spec, free)
        hits = np.flatnonzero(fits)
        if len(hits):
            slot = int(hits[np.argmin(state.order[hits])])
            if not copied:
                free, copied = free.copy(), True
            free[slot] -= req
            target = state.node_at[slot]
            assert target is not None
            shifts.append(Shift(pod, pod.workload, target.name, None))
            continue
        placed = _on_new_node(view, pod, req, groups, new_nodes, avoid, expander)
        if placed is None:
            return None
        shifts.append(Shift(pod, pod.workload, None, placed))
    return shifts, [g for g, _ in new_nodes]


def _nowhere(state: ClusterState, ctx: _Cluster, spec: PodSpec, group: NodeGroup) -> bool:
    """Whether a pod of this spec leaving a node of ``group`` has nowhere to go: no node of a cheaper
    group has room for it now, and no cheaper group that may grow has a new node big enough. Then
    ``_place`` fails for any node holding one, for room only shrinks as it places the others (a new
    node's room starts at its group's template); known per spec, so one check serves every node."""
    key = (id(spec), group.name)
    found = ctx.nowhere.get(key)
    if found is None:
        req = state.requests_of(spec)
        view = ctx.view
        new_node = any(
            view.can_grow(g.name) and bool(np.all(view.template(g.name) >= req))
            for g in ctx.cheaper[group.name]
        )
        # the room first: the label and taint fit costs more, and most pods fail on the room
        roomy = ctx.allowed[group.name] & np.all(view.free >= req, axis=1)
        found = not new_node and not (roomy.any() and bool((roomy & view.fits(spec, view.free)).any()))
        ctx.nowhere[key] = found
    return found


def _on_new_node(
    view: ClusterView,
    pod: Pod,
    req: Vector,
    cheaper: list[NodeGroup],
    new_nodes: list[tuple[NodeGroup, Vector]],
    avoid: Collection[str],
    expander: Expander,
) -> str | None:
    for i, (g, room) in enumerate(new_nodes):
        if np.all(room >= req):
            new_nodes[i] = (g, room - req)
            return g.name
    sizes = Counter(view.group_size)
    sizes.update(h.name for h, _ in new_nodes)
    for g in sorted(cheaper, key=lambda g: g.price_per_hour):
        adding = sum(1 for h, _ in new_nodes if h.name == g.name)
        if not view.can_grow(g.name, adding) or not view.admits(pod.spec, g.name):
            continue
        if avoid and grows_instead(view, pod.spec, g.name, avoid, sizes, expander):
            continue  # the expander might grow a dearer group instead of this one
        if view.state.autoscaler is AutoscalerKind.KARPENTER and not would_buy(
            view, pod.spec, [g.name], sizes
        ):
            continue  # Karpenter launches the moved pod's node in a pool of its own choosing (weight first)
        new_nodes.append((g, view.template(g.name) - req))
        return g.name
    return None
