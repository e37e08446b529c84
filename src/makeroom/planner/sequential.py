"""Pending pods one at a time, highest priority first, each on the room the earlier ones left.

For a pending pod P that no Ready node takes now, the driver weighs:
- A, what the autoscaler would buy for P without relocation: room on a node being provisioned or on a
  new node this plan already adds (free), else a new node of the cheapest group P may use within max;
- B, relocation, as the per-pod search (heuristic or exact) finds it.
B wins only when its new nodes cost less than A's (price per hour, then number).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from makeroom.model import Pod, PodSpec
from makeroom.model.resources import Vector
from makeroom.planner.context import Context, Ledger, wants_room
from makeroom.planner.heuristic import Heuristic
from makeroom.planner.options import Decision, Dest, Draft, NewNode, Option, Outcome
from makeroom.planner.types import PlacementReason, UnplaceableReason


class RelocationSearch(Protocol):
    """The best relocation for one pending pod on the room the ledger has left."""

    name: str

    def best(
        self, ctx: Context, ledger: Ledger, pod: Pod, req: Vector, p_groups: set[str], outcome: Outcome
    ) -> Option | None: ...


class Sequential:
    def __init__(self, finder: RelocationSearch) -> None:
        self.finder = finder
        self.name = finder.name
        # an earlier pod of the same spec and priority found no relocation; room has only been
        # claimed since, so a later one would not find one either
        self._hopeless: dict[tuple[PodSpec, int], UnplaceableReason] = {}

    def run(self, ctx: Context, pods: list[Pod]) -> Draft:
        ledger = Ledger.start(ctx, pods)
        draft = Draft()
        self._hopeless.clear()
        for pod in pods:
            self.decide(ctx, ledger, draft, pod)
        draft.new_nodes = ledger.new_nodes
        draft.steps = draft.nodes_examined
        return draft

    def decide(self, ctx: Context, ledger: Ledger, draft: Draft, pod: Pod) -> None:
        """Place one pod on what the ledger has left, claim its room, and record the decision."""
        view = ctx.view
        req = ctx.req(pod.spec)
        ledger.touch()
        fits = view.fits(pod.spec, ledger.free)
        if fits.any():
            held = view.holds.get(pod.key)
            slot = held[0] if held is not None and fits[held[0]] else view.first(fits)
            ledger.claim_slot(slot, req)
            draft.decisions.append(Decision(pod, PlacementReason.FITS_NOW, slot=slot))
            return
        p_groups = view.groups_for(pod.spec)
        own = own_room(ctx, ledger, pod, req, p_groups)
        known = self._hopeless.get((pod.spec, pod.priority))
        if known is not None:
            if own is not None:
                draft.decisions.append(claim_own(ctx, ledger, pod, req, own))
            else:
                draft.decisions.append(Decision(pod, None, unplaceable=known))
            return
        outcome = Outcome()
        ctx.blocked = ""
        best: Option | None = None
        # preemptionPolicy Never only stops the scheduler's preemption: makeroom's relocation gives
        # every victim a destination, so it is exactly what such a pod is waiting for.
        if wants_room(pod):
            best = self.finder.best(ctx, ledger, pod, req, set(p_groups), outcome)
        draft.nodes_examined += outcome.examined
        if best is not None and (own is None or (best.cost, best.added) < (own.cost, own.added)):
            ledger.claim_relocation(ctx, best, req)
            draft.decisions.append(Decision.relocation(pod, best, None if own is None else own.cost))
        elif own is not None:
            draft.decisions.append(claim_own(ctx, ledger, pod, req, own))
        else:
            reason = why_not(ctx, pod, req, p_groups, outcome)
            if reason != UnplaceableReason.EXACT_LIMIT:
                self._hopeless[(pod.spec, pod.priority)] = reason
            if reason is UnplaceableReason.NO_DESTINATION and ctx.blocked:
                # the victims had room, but a constraint that looks at other pods keeps them off it
                draft.decisions.append(
                    Decision(pod, None, unplaceable=UnplaceableReason.CONSTRAINT, blocked=ctx.blocked)
                )
                return
            draft.decisions.append(Decision(pod, None, unplaceable=reason))


def own_room(ctx: Context, ledger: Ledger, pod: Pod, req: Vector, p_groups: list[str]) -> Option | None:
    """A, P's own room as the autoscaler would give it: a node being provisioned, a new node this plan
    adds already, or a new node of the cheapest group P may use that may grow."""
    up = ctx.upcoming(pod.spec) & np.all(ledger.free >= req, axis=1)
    if up.any():
        return Option(ctx.view.first(up), [], [], ledger.new_nodes, 0.0, 0)
    for i, nn in enumerate(ledger.new_nodes):
        if nn.group in p_groups and np.all(nn.free >= req):
            return Option(-1, [], [Dest(new_node=i, group=nn.group)], ledger.new_nodes, 0.0, 0)
    bought = ctx.buy(pod.spec, p_groups, ledger.group_size)
    if bought is None:
        return None
    return Option(-1, [], [Dest(group=bought.group)], ledger.new_nodes, bought.price, 1)


def claim_own(ctx: Context, ledger: Ledger, pod: Pod, req: Vector, own: Option) -> Decision:
    if own.slot >= 0:
        ledger.claim_slot(own.slot, req)
        return Decision(pod, PlacementReason.NEW_NODE, slot=own.slot)
    dest = own.dests[0]
    adds = dest.new_node < 0
    if adds:
        ledger.add_new_node(ctx, dest.group, False, ctx.buy(pod.spec, [dest.group], ledger.group_size))
        index = len(ledger.new_nodes) - 1
    else:
        index = dest.new_node
    nn = ledger.new_nodes[index]
    nn.free = nn.free - req
    ledger.touch()
    return Decision(pod, PlacementReason.NEW_NODE, new_node=index, adds=adds)


def why_not(ctx: Context, pod: Pod, req: Vector, p_groups: list[str], outcome: Outcome) -> UnplaceableReason:
    if outcome.exact_gave_up:
        return UnplaceableReason.EXACT_LIMIT
    could_ever = ctx.view.static(pod.spec) & np.all(ctx.view.state.alloc >= req, axis=1)
    if not p_groups and not could_ever.any():
        return UnplaceableReason.NO_COMPATIBLE_NODE
    if not wants_room(pod):
        return UnplaceableReason.RELOCATION_OFF
    if outcome.move_limited:
        return UnplaceableReason.MOVE_LIMIT
    if outcome.destination_failed:
        return UnplaceableReason.NO_DESTINATION
    return UnplaceableReason.NO_ROOM_TO_MAKE


def replay(ctx: Context, pods: list[Pod], draft: Draft) -> Ledger:
    """The ledger after every claim of a draft, whatever search made it."""
    ledger = Ledger.start(ctx, pods)
    view = ctx.view
    for nn in draft.new_nodes:
        cap = view.template(nn.group) if nn.capacity is None else nn.capacity
        ledger.new_nodes.append(
            NewNode(nn.group, nn.index, cap.copy(), nn.for_victims, nn.capacity, nn.price)
        )
        ledger.group_size[nn.group] += 1
    for d in draft.decisions:
        if d.reason is None:
            continue
        req = ctx.req(d.pod.spec)
        if d.slot >= 0:
            ledger.free[d.slot] -= req
        else:
            ledger.new_nodes[d.new_node].free -= req
        if d.victims:
            ledger.sources.add(d.slot)
        for v, dest in zip(d.victims, d.dests, strict=True):
            r = ctx.req(v.spec)
            ledger.free[d.slot] += r
            ledger.moved.add(v.key)
            if dest.slot >= 0:
                ledger.free[dest.slot] -= r
                ledger.targets.add(dest.slot)
            else:
                ledger.new_nodes[dest.new_node].free -= r
        ledger.moves += len(d.victims)
    ledger.touch()
    return ledger


def reason_for(ctx: Context, ledger: Ledger, pod: Pod) -> UnplaceableReason:
    """Why a pod that a plan leaves unplaced gets nothing on what the plan leaves."""
    req = ctx.req(pod.spec)
    p_groups = ctx.view.groups_for(pod.spec)
    outcome = Outcome()
    if wants_room(pod):
        Heuristic().best(ctx, ledger, pod, req, set(p_groups), outcome)
    return why_not(ctx, pod, req, p_groups, outcome)


def claims_fit(ctx: Context, pods: list[Pod], draft: Draft) -> bool:
    """Whether every claim of a draft fits: no node that takes a pod ends over its allocatable, no new
    node over its template, no group over its max; and its purchases for moved pods hold."""
    ledger = replay(ctx, pods, draft)
    touched: set[int] = set(ledger.targets)
    for d in draft.decisions:
        if d.reason is not None and d.slot >= 0:
            touched.add(d.slot)
    if touched and bool(np.any(ledger.free[sorted(touched)] < 0)):
        return False
    if any(bool(np.any(nn.free < 0)) for nn in ledger.new_nodes):
        return False
    groups = ctx.view.state.groups
    within = all(n <= groups[g].max or n <= ctx.view.group_size[g] for g, n in ledger.group_size.items())
    return within and purchases_hold(ctx, draft)


def purchases_hold(ctx: Context, draft: Draft) -> bool:
    """Whether each new node a draft adds for moved pods alone is still one the autoscaler would give
    them, with all of the plan's new nodes counted (``Context.grows_instead``). One pass of the
    heuristic only adds nodes, so its purchases hold; a rebuild keeps the other decisions' claims,
    whose node may have been bought while a group their pending pod could use was full with a node
    the rebuilt decision no longer adds."""
    hosts = {d.new_node for d in draft.decisions if d.reason is not None and d.new_node >= 0}
    moved_to = [
        (d, v, dest)
        for d in draft.decisions
        for v, dest in zip(d.victims, d.dests, strict=True)
        if dest.new_node >= 0
    ]
    used = hosts | {dest.new_node for _, _, dest in moved_to}
    sizes = dict(ctx.view.group_size)
    for j in used:
        sizes[draft.new_nodes[j].group] += 1
    justified = set(hosts)
    for d, v, dest in moved_to:
        if dest.new_node not in justified and not ctx.grows_instead(
            v.spec, dest.group, ctx.view.groups_for(d.pod.spec), sizes
        ):
            justified.add(dest.new_node)
    return all(dest.new_node in justified for _, _, dest in moved_to)


def fill_in(ctx: Context, pods: list[Pod], draft: Draft) -> Draft:
    """What a draft built by parts lacks: the cost of each relocated pod's own room (for its
    explanation) and each unplaced pod's reason."""
    base = Ledger.start(ctx, pods)
    ledger: Ledger | None = None
    out = []
    for d in draft.decisions:
        done = d
        if d.reason is PlacementReason.RELOCATION and d.alternative is None:
            own = own_room(ctx, base, d.pod, ctx.req(d.pod.spec), ctx.view.groups_for(d.pod.spec))
            if own is not None:
                done = Decision(d.pod, d.reason, d.slot, d.new_node, d.adds, d.victims, d.dests, own.cost)
        elif d.reason is None and d.unplaceable is None:
            if ledger is None:
                ledger = replay(ctx, pods, draft)
            done = Decision(d.pod, None, unplaceable=reason_for(ctx, ledger, d.pod))
        out.append(done)
    draft.decisions = out
    return draft
