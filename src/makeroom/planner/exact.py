"""Exact mode: for one pending pod and one candidate node, every minimal victim set, each with its
cheapest possible destinations (an exhaustive branch-and-bound over rooms and new nodes).

The search is exact per pending pod, in the same order as the heuristic (highest priority first), and
over every candidate node; it is meant for small clusters and as the oracle of the property tests. A
step limit keeps it from running away: past it, the pod is reported with ``EXACT_LIMIT``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from makeroom.model import Pod
from makeroom.model.resources import Vector
from makeroom.planner.buying import would_buy

if TYPE_CHECKING:
    from makeroom.planner.search import Option, Planner, _Klass, _Outcome


class Steps:
    def __init__(self, limit: int) -> None:
        self.left = limit

    def tick(self, n: int = 1) -> None:
        from makeroom.planner.search import ExactLimitError

        self.left -= n
        if self.left < 0:
            raise ExactLimitError


def _minimal(
    classes: Sequence[_Klass], d: Vector, need: np.ndarray, steps: Steps
) -> Iterator[tuple[int, ...]]:
    ranges = [range(len(c.pods) + 1) for c in classes]
    for counts in itertools.product(*ranges):
        steps.tick()
        acc = np.zeros_like(d)
        for c, k in zip(classes, counts, strict=True):
            if k:
                acc = acc + c.req * k
        if np.any(acc[need] < d[need]):
            continue
        if any(
            k > 0 and np.all((acc - c.req)[need] >= d[need]) for c, k in zip(classes, counts, strict=True)
        ):
            continue
        yield counts


def exact_on_node(
    planner: Planner,
    slot: int,
    *,
    classes: Sequence[_Klass],
    deficit: Vector,
    p_groups: set[str],
    outcome: _Outcome,
) -> Option | None:
    from makeroom.planner.search import option_key

    need = deficit > 0
    d = np.where(need, deficit, 0)
    steps = Steps(planner.policy.exact_step_limit)
    best: Option | None = None
    for counts in _minimal(classes, d, need, steps):
        victims = [p for c, k in zip(classes, counts, strict=True) for p in c.pods[:k]]
        limit = planner.policy.max_moves_in_flight
        if limit is not None and len(planner.moves) + len(victims) > limit:
            outcome.move_limited = True
            continue
        option = cheapest_destinations(planner, victims, slot, p_groups, steps)
        if option is None:
            outcome.destination_failed = True
            continue
        option.key = option_key(option)
        if best is None or option.key < best.key:
            best = option
    return best


def cheapest_destinations(
    planner: Planner, victims: list[Pod], source: int, p_groups: set[str], steps: Steps
) -> Option | None:
    """The destinations of least (cost, new nodes) for these victims, by exhaustive search."""
    from makeroom.planner.search import Dest, NewNode, Option

    state = planner.state
    victims = sorted(victims, key=lambda p: (p.workload or "", p.key))
    reqs = [state.requests_of(v.spec) for v in victims]
    same_as_prev = [i > 0 and victims[i].spec is victims[i - 1].spec for i in range(len(victims))]
    slot_choices: list[list[int]] = []
    for v in victims:
        ok = planner.static(v.spec) | planner.upcoming_mask(v.spec)
        slot_choices.append([int(s) for s in np.flatnonzero(ok) if int(s) != source])
    free = {s: planner.free[s].copy() for choices in slot_choices for s in choices}
    base_new = [NewNode(nn.group, nn.index, nn.free.copy(), nn.for_victims) for nn in planner.new_nodes]
    sizes = dict(planner.group_size)
    growable = [g for g in state.groups if g not in p_groups]

    best: list[tuple[float, int, list[Dest], list[NewNode]]] = []
    nodes: list[NewNode] = list(base_new)
    chosen: list[Dest] = []
    idents: list[tuple[int, int]] = []

    def search(i: int, cost: float, added: int) -> None:
        steps.tick()
        if best and (round(cost, 9), added) >= (round(best[0][0], 9), best[0][1]):
            return
        if i == len(victims):
            snapshot = [NewNode(nn.group, nn.index, nn.free.copy(), nn.for_victims) for nn in nodes]
            best[:] = [(cost, added, list(chosen), snapshot)]
            return
        v, r = victims[i], reqs[i]
        floor = idents[i - 1] if same_as_prev[i] else (-1, -1)
        for s in slot_choices[i]:
            if (0, s) < floor or not np.all(free[s] >= r):
                continue
            free[s] -= r
            chosen.append(Dest(slot=s))
            idents.append((0, s))
            search(i + 1, cost, added)
            idents.pop()
            chosen.pop()
            free[s] += r
        for j, nn in enumerate(nodes):
            if (1, j) < floor or nn.group in p_groups or not planner.admits(v.spec, nn.group):
                continue
            if not np.all(nn.free >= r):
                continue
            nn.free = nn.free - r
            chosen.append(Dest(new_node=j, group=nn.group))
            idents.append((1, j))
            search(i + 1, cost, added)
            idents.pop()
            chosen.pop()
            nn.free = nn.free + r
        for g in growable:
            if not planner.admits(v.spec, g) or sizes[g] >= state.groups[g].max:
                continue
            bought = would_buy(state, v.spec, [g], sizes, planner.group_rank)
            if bought is None:
                continue  # Karpenter would launch another pool's node for it
            index = sum(1 for nn in nodes if nn.group == g)
            nodes.append(NewNode(g, index, bought.capacity - r, True))
            sizes[g] += 1
            chosen.append(Dest(new_node=len(nodes) - 1, group=g))
            idents.append((1, len(nodes) - 1))
            search(i + 1, cost + bought.price, added + 1)
            idents.pop()
            chosen.pop()
            sizes[g] -= 1
            nodes.pop()

    search(0, 0.0, 0)
    if not best:
        return None
    cost, added, dests, new_nodes = best[0]
    return Option(source, victims, dests, new_nodes, cost, added)
