"""A bound on the objective that no plan can beat, from a relaxation that needs no search: each pending
pod alone, on the room before any plan, and without the victims' destinations.

- (1) At most the pods that could get room at all are placed (a pod that fits now, has room on a node
  being provisioned or a group it may use that can grow, or has a node where the pods below its
  priority that may move would free enough), and no more of them than the places can hold: each node
  (and each group that may grow) takes at most as many as its allocatable holds of their smallest
  requests. Taken highest priority first, as a matching of pods to places, this bounds the pods
  placed at each priority.
- (2) Plans that place all of them buy new nodes for the pods whose only way is a new node: at least
  as many as their requests fill on the largest template of their groups, each at the lowest price.
- (3, 4) Pods whose only way is a relocation move at least the fewest victims any of their nodes
  needs (with the lowest sum of priorities among those sets); summed over the pods when no node can
  hold two of them (their victims are then distinct), else the largest of them.

The bound is met exactly by many plans (a single pending pod, plans with no new node and few moves):
the plan is then proven optimal without any search. On large clusters (more than ``DETAIL_UP_TO``
candidate nodes in all) the pods on each node are not looked at: every node a pod may use counts as a
place for it, and nothing is bounded beyond the pods placed.
"""

from __future__ import annotations

import numpy as np

from makeroom.model import Pod
from makeroom.planner.context import Context, Ledger, wants_room
from makeroom.planner.objective import levels, placed
from makeroom.planner.types import Objective
from makeroom.planner.victims import classes_on, fewest, fewest_search

STEPS = 2_000  # per candidate node, for the fewest victims (past it, a cheaper bound)
DETAIL_UP_TO = 64  # candidate nodes of all pods together, for looking at the pods on each


def bound(ctx: Context, pods: list[Pod]) -> Objective:
    view = ctx.view
    state = view.state
    base = Ledger.start(ctx, pods)
    possible: list[Pod] = []
    new_only: list[Pod] = []
    must_move: list[tuple[Pod, tuple[int, int]]] = []
    places: dict[str, list[tuple[str, int]]] = {}
    # pods may leave a node for any pending pod placed there, so a pod may get room made by pods of a
    # higher priority than its own moving for another: the highest priority that may want each node
    top = np.full(len(state.alive), -(1 << 62), dtype=np.int64)
    for pod in pods:
        if wants_room(pod):
            mask = view.static(pod.spec) & np.all(state.alloc >= ctx.req(pod.spec), axis=1)
            top[mask] = np.maximum(top[mask], pod.priority)
    candidates = {
        p.key: np.flatnonzero(view.static(p.spec) & np.all(state.alloc >= ctx.req(p.spec), axis=1))
        for p in pods
    }
    detailed = sum(len(c) for c in candidates.values()) <= DETAIL_UP_TO
    for pod in pods:
        mine: list[tuple[str, int]] = []
        req = ctx.req(pod.spec)
        groups = [g for g in view.groups_for(pod.spec) if view.can_grow(g)]
        now = view.fits(pod.spec, base.free) | (ctx.upcoming(pod.spec) & np.all(base.free >= req, axis=1))
        mine += [("n", int(s)) for s in np.flatnonzero(now)]
        mine += [("g", view.group_rank[g]) for g in groups]
        free_way = bool(mine)
        least: tuple[int, int] | None = None
        if not detailed:
            mine += [("n", int(s)) for s in candidates[pod.key] if top[s] > -(1 << 62)]
        elif wants_room(pod) or bool((top > -(1 << 62)).any()):
            for slot in candidates[pod.key]:
                deficit = req - base.free[int(slot)]
                need = deficit > 0
                if not need.any():
                    continue
                if top[slot] == -(1 << 62):
                    continue
                classes = classes_on(ctx, base, int(slot), int(top[slot]))
                total = sum((c.req * len(c.pods) for c in classes), np.zeros_like(req))
                if np.any(total[need] < deficit[need]):
                    continue
                d = np.where(need, deficit, 0)
                counts, finished = fewest_search(classes, d, need, STEPS)
                if counts is not None and finished:
                    here = (sum(counts), sum(c.priority * k for c, k in zip(classes, counts, strict=True)))
                else:
                    n = fewest(classes, d, need)
                    here = (n, n * min(0, *(c.priority for c in classes)))
                least = here if least is None else min(least, here)
                mine.append(("n", int(slot)))
        if not mine:
            continue
        places[pod.key] = mine
        possible.append(pod)
        if not detailed:
            continue
        if not free_way:
            assert least is not None
            must_move.append((pod, least))
        elif least is None and groups and not _room_now(ctx, base, pod):
            new_only.append(pod)
    most = _matching(ctx, base, possible, places)
    if len(most) < len(possible) or not detailed:
        # which pods a best plan places is open, or was not looked at: nothing is known of the rest
        return Objective(placed(most, levels(pods)), 0.0, 0, 0, 0)
    nodes, cost = _new_nodes(ctx, new_only)
    moves, prio = _moves(ctx, must_move, possible)
    return Objective(placed(possible, levels(pods)), cost, nodes, moves, prio)


def _floor(ctx: Context, moves: int) -> int:
    """The least ``moves`` moved pods' priorities can sum to (priorities may be negative)."""
    if moves == 0:
        return 0
    lowest = min((p.priority for p in ctx.view.state.pods.values() if p.node is not None), default=0)
    return moves * min(0, lowest)


def _matching(
    ctx: Context, base: Ledger, pods: list[Pod], places: dict[str, list[tuple[str, int]]]
) -> list[Pod]:
    """The pods a matching to places takes, highest priority first (a greedy over a transversal
    matroid: at each priority, as many as any plan can place)."""
    if not pods:
        return []
    view = ctx.view
    reqs = np.stack([ctx.req(p.spec) for p in pods])
    smallest = reqs.min(axis=0)
    dims = smallest > 0
    groups = list(view.state.groups)

    def room(vec: np.ndarray) -> int:
        return int(np.min(vec[dims] // smallest[dims])) if dims.any() else len(pods)

    # per node, how many of the pods its allocatable holds (a node being provisioned: its free room)
    space = np.where(view.ready[:, None], view.state.alloc, base.free)
    per_node = (
        np.min(space[:, dims] // smallest[dims], axis=1) if dims.any() else np.full(len(space), len(pods))
    )
    cap: dict[tuple[str, int], int] = {}
    for mine in places.values():
        for place in mine:
            if place in cap:
                continue
            kind, i = place
            if kind == "g":
                g = groups[i]
                spare = view.state.groups[g].max - view.group_size[g]
                cap[place] = spare * room(view.template(g))
            else:
                cap[place] = int(per_node[i])
    load: dict[tuple[str, int], list[str]] = {p: [] for p in cap}
    taken: list[Pod] = []

    def augment(key: str, seen: set[tuple[str, int]]) -> bool:
        for place in places[key]:
            if place in seen or cap[place] <= 0:
                continue
            seen.add(place)
            if len(load[place]) < cap[place]:
                load[place].append(key)
                return True
            for other in list(load[place]):
                load[place].remove(other)
                if augment(other, seen):
                    load[place].append(key)
                    return True
                load[place].append(other)
        return False

    for pod in pods:  # highest priority first
        if augment(pod.key, set()):
            taken.append(pod)
    return taken


def _room_now(ctx: Context, base: Ledger, pod: Pod) -> bool:
    req = ctx.req(pod.spec)
    return bool(ctx.view.fits(pod.spec, base.free).any()) or bool(
        (ctx.upcoming(pod.spec) & np.all(base.free >= req, axis=1)).any()
    )


def _new_nodes(ctx: Context, pods: list[Pod]) -> tuple[int, float]:
    """The fewest new nodes the pods need, and the least they cost."""
    if not pods:
        return 0, 0.0
    view = ctx.view
    groups = sorted({g for p in pods for g in view.groups_for(p.spec) if view.can_grow(g)})
    biggest = np.max(np.stack([view.template(g) for g in groups]), axis=0)
    total = sum((ctx.req(p.spec) for p in pods), np.zeros_like(biggest))
    used = total > 0
    nodes = max(1, int(np.max(np.ceil(total[used] / np.maximum(biggest[used], 1)))))
    return nodes, nodes * min(ctx.price(g) for g in groups)


def _moves(ctx: Context, must: list[tuple[Pod, tuple[int, int]]], pods: list[Pod]) -> tuple[int, int]:
    if not must:
        return 0, 0
    alloc = ctx.view.state.alloc[ctx.view.state.alive]
    apart = True  # no node holds two of the pods: each pod's room is made by its own victims
    for i in range(len(pods)):
        for j in range(i + 1, len(pods)):
            both = ctx.req(pods[i].spec) + ctx.req(pods[j].spec)
            if bool(np.any(np.all(alloc >= both, axis=1))):
                apart = False
    if apart:  # no node holds two of them: their victims are distinct
        return sum(m for _, (m, _) in must), sum(s for _, (_, s) in must)
    m = max(least for _, (least, _) in must)
    return m, _floor(ctx, m)
