"""When several pending pods share a node that pods leave, which of them each leaving pod moves for."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from makeroom.model import Pod
from makeroom.planner.context import Context, Ledger, wants_room
from makeroom.planner.options import Dest, NewNode


def attribute(
    ctx: Context,
    base: Ledger,
    slot: int,
    placed: list[Pod],
    moving: list[tuple[Pod, Dest]],
    new_nodes: list[NewNode],
) -> dict[int, list[tuple[Pod, Dest]]] | None:
    """Which of the pending pods placed on a node each pod leaving it moves for: a pod of higher
    priority that lets makeroom move pods, and, for a pod going to a new node, one that could not use
    that node's group. Highest priority first, each pod takes leaving pods until its own room is made
    (so that each relocation stands on its own as far as it can); the rest go to the first that may.
    None when some leaving pod may move for none of them."""
    view = ctx.view
    order = sorted(range(len(placed)), key=lambda i: (-placed[i].priority, i))

    def may(i: int, vd: tuple[Pod, Dest]) -> bool:
        p, (v, dest) = placed[i], vd
        if not wants_room(p) or v.priority >= p.priority:
            return False
        return dest.new_node < 0 or not view.admits(p.spec, new_nodes[dest.new_node].group)

    out: dict[int, list[tuple[Pod, Dest]]] = defaultdict(list)
    left = sorted(moving, key=lambda vd: vd[0].key)
    room = base.free[slot].copy()
    for i in order:
        room = room - ctx.req(placed[i].spec)
        for vd in list(left):
            if bool(np.all(room >= 0)):
                break
            if may(i, vd):
                out[i].append(vd)
                left.remove(vd)
                room = room + ctx.req(vd[0].spec)
    for vd in left:
        fit = [i for i in order if may(i, vd)]
        if not fit:
            return None
        out[fit[0]].append(vd)
    return out
