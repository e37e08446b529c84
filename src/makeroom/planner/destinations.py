"""Destinations: where moved pods go. Unclaimed room on another node they may use (Ready, or being
provisioned), room on a new node the plan adds, or a new node of the cheapest group they may use
within its max, never of a group the pending pod could use nor where the autoscaler might grow one
of those instead (planner/buying.py). A node that pods leave takes no moved
pod (and, see the searches, a node moved pods reach gives up none): a plan never shuffles pods
through a node it is emptying."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from makeroom.model import Pod, PodSpec
from makeroom.model.resources import PODS, Vector
from makeroom.model.scheduling import Placement, concerned, pod_mask, refusal
from makeroom.planner.context import Context, Ledger
from makeroom.planner.options import Dest, NewNode, Option, VictimClass
from makeroom.planner.virtual import virtual_nodes


def rooms_for(ctx: Context, ledger: Ledger, spec: PodSpec) -> npt.NDArray[np.intp]:
    """Ready and upcoming nodes that take this spec with room for one pod now, best first: Ready
    before upcoming, nodes of groups later in the order of preference after earlier ones (a stand-in
    for nodes the pending pod cannot use), then the tightest fit. Nodes pods leave are left out."""
    rooms = ledger.rooms.get(spec)
    if rooms is None:
        view = ctx.view
        r = ctx.req(spec)
        ready = view.static(spec)
        slots = np.flatnonzero(ready | ctx.upcoming(spec))
        slots = slots[np.all(ledger.free[slots] >= r, axis=1)]
        if ledger.sources:
            keep = np.ones(len(ready), dtype=np.bool_)
            keep[list(ledger.sources)] = False
            slots = slots[keep[slots]]
        dims = (r > 0) & (np.arange(len(r)) != view.state.index.position(PODS))
        alloc = np.maximum(view.state.alloc[slots][:, dims], 1)
        leftover = ((ledger.free[slots][:, dims] - r[dims]) / alloc).sum(axis=1)
        order = np.lexsort((slots, leftover, view.slot_rank[slots], ~ready[slots]))
        rooms = slots[order]
        ledger.rooms[spec] = rooms
    return rooms


@dataclass(frozen=True, slots=True)
class Sharers:
    """The pending pods that share one node, as (priority, groups it may use): a pod leaving that node
    moves for one of higher priority only, so a new node for it is barred when every pod it may move
    for could use that node's group (issue 22: choosing destinations under the weakest pod's limit
    sent pods only the highest could move to a new node only the lowest could justify)."""

    pods: tuple[tuple[int, frozenset[str]], ...]

    def avoid(self, victim: Pod, p_groups: set[str]) -> set[str]:
        mine = [groups for priority, groups in self.pods if victim.priority < priority]
        return set(frozenset.intersection(*mine)) if mine else p_groups


def existing_capacity(ctx: Context, ledger: Ledger, classes: Sequence[VictimClass], slot: int) -> list[int]:
    """How many pods of each class existing rooms could take (each class alone, other than slot)."""
    out = []
    for c in classes:
        cached = ledger.capacity.get(c.spec)
        if cached is None:
            rooms = rooms_for(ctx, ledger, c.spec)
            dims = c.req > 0
            per = np.min(ledger.free[rooms][:, dims] // c.req[dims], axis=1).clip(min=0)
            # per slot (0 where no room), so that leaving one node out costs a lookup, not a scan
            by_slot = np.zeros(len(ledger.free), dtype=np.int64)
            by_slot[rooms] = per
            cached = ledger.capacity[c.spec] = (int(per.sum()), by_slot)
        total, by_slot = cached
        out.append(total - int(by_slot[slot]))
    return out


def assign(
    ctx: Context,
    ledger: Ledger,
    victims: list[Pod],
    source: int,
    p_groups: set[str],
    sharers: Sharers | None = None,
) -> Option | None:
    """Greedy destinations, largest victim first (by its share of the source node); when that needs
    new nodes, also largest-first by each resource the victims request, keeping the cheapest. With
    ``sharers``, the victims barred from more groups come first (they need the existing room most)."""
    avoid = [p_groups if sharers is None else sharers.avoid(v, p_groups) for v in victims]
    reqs = [ctx.req(v.spec) for v in victims]
    alloc = np.maximum(ctx.view.state.alloc[source], 1)
    orders = [
        sorted(
            range(len(victims)),
            key=lambda i: (-len(avoid[i]), -float((reqs[i] / alloc).sum()), victims[i].key),
        )
    ]
    best = assign_in_order(ctx, ledger, victims, orders[0], source, avoid)
    if best is not None and best.added == 0:
        return best
    if len(victims) > 1:
        for dim in np.flatnonzero(np.any(np.stack(reqs) > 0, axis=0)):
            order = sorted(
                range(len(victims)), key=lambda i: (-len(avoid[i]), -int(reqs[i][dim]), victims[i].key)
            )
            if order in orders:
                continue
            orders.append(order)
            option = assign_in_order(ctx, ledger, victims, order, source, avoid)
            if option is not None and (
                best is None or (round(option.cost, 9), option.added) < (round(best.cost, 9), best.added)
            ):
                best = option
    return best


def option_placement(
    ctx: Context, victims: list[Pod], before: list[int], placed: dict[int, Dest], new_nodes: list[NewNode]
) -> Placement:
    """The cluster once the victims ``before`` have gone to their destinations (slots, then the
    option's new nodes, as virtual nodes after the state's slots)."""
    view = ctx.view
    virtual = virtual_nodes(ctx, new_nodes)
    names = list(virtual)
    moved: dict[str, str | None] = {}
    for k in before:
        dest = placed[k]
        moved[victims[k].key] = view.name(dest.slot) if dest.slot >= 0 else names[dest.new_node]
    return Placement(view.state, moved, virtual)


def assign_in_order(
    ctx: Context, ledger: Ledger, victims: list[Pod], order: list[int], source: int, avoid: list[set[str]]
) -> Option | None:
    """Destinations in this order: existing room first (best first), then the plan's new nodes, then
    a new node of the cheapest group the victim may use, never one of a group P could use (``avoid``,
    per victim; nor one the autoscaler might not give it: ``Context.buy``)."""
    view = ctx.view
    groups = view.state.groups
    overlay: dict[int, Vector] = {}
    new_nodes = [nn.copy() for nn in ledger.new_nodes]
    sizes = dict(ledger.group_size)
    cost = 0.0
    added = 0
    placed: dict[int, Dest] = {}
    for i in order:
        v = victims[i]
        p_groups = avoid[i]
        r = ctx.req(v.spec)
        dest = None
        # the filters that look at other pods, exactly for this victim after the ones before it
        allowed = where = None
        if concerned(view.state, v):
            where = option_placement(ctx, victims, order[: order.index(i)], placed, new_nodes)
            allowed = pod_mask(where, v, itself=ctx.policy.make_before_break)
        for room_slot in rooms_for(ctx, ledger, v.spec):
            s = int(room_slot)
            if s == source:
                continue
            if allowed is not None and where is not None and not allowed[s]:
                if not ctx.blocked:
                    why = refusal(where, v, s, itself=ctx.policy.make_before_break)
                    ctx.blocked = f"{v.name} cannot go to {view.name(s)}: {why}"
                continue
            used = overlay.get(s)
            room = ledger.free[s] if used is None else ledger.free[s] - used
            if (room >= r).all():
                overlay[s] = r.copy() if used is None else used + r
                dest = Dest(slot=s)
                break
        if dest is None:
            for j, nn in enumerate(new_nodes):
                if allowed is not None and not allowed[len(view.state.alive) + j]:
                    continue
                if nn.group not in p_groups and view.admits(v.spec, nn.group) and (nn.free >= r).all():
                    nn.free = nn.free - r
                    dest = Dest(new_node=j, group=nn.group)
                    break
        if dest is None:
            bought = ctx.buy(v.spec, [g for g in groups if g not in p_groups], sizes, avoid=p_groups)
            if bought is None:
                return None
            g = bought.group
            sizes[g] += 1
            index = sum(1 for nn in new_nodes if nn.group == g)
            new_nodes.append(NewNode(g, index, bought.capacity - r, True, bought.capacity, bought.price))
            cost += bought.price
            added += 1
            dest = Dest(new_node=len(new_nodes) - 1, group=g)
        placed[i] = dest
    dests = [placed[i] for i in range(len(victims))]
    return Option(source, victims, dests, new_nodes, cost, added)
