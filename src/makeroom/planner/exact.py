"""The per-pod exact search: for one pending pod, every candidate node, every minimal victim set on it,
and for each set the cheapest destinations by an exhaustive branch and bound over rooms and new nodes.

Exact for one pending pod on the room the plan has left; pods are taken one at a time, highest
priority first, so for several pods at once it is not the joint optimum (the joint search is). A step
limit per candidate node keeps it bounded: a node past it is given up, and a pod left without a
plan because of that is reported with ``EXACT_LIMIT``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from makeroom.model import Pod
from makeroom.model.resources import Vector
from makeroom.model.state import Mask
from makeroom.planner.candidates import candidate_slots, shortfall, within_move_limit
from makeroom.planner.context import Context, Ledger
from makeroom.planner.options import Dest, NewNode, Option, Outcome, VictimClass, option_key
from makeroom.planner.victims import pick


class ExactLimitError(Exception):
    """The exact search went past its step limit."""


class Steps:
    def __init__(self, limit: int) -> None:
        self.left = limit

    def tick(self, n: int = 1) -> None:
        self.left -= n
        if self.left < 0:
            raise ExactLimitError


class ExactPerPod:
    """Relocation for one pod, exhaustively."""

    name = "exact-per-pod"

    def best(
        self, ctx: Context, ledger: Ledger, pod: Pod, req: Vector, p_groups: set[str], outcome: Outcome
    ) -> Option | None:
        best: Option | None = None
        for slot in candidate_slots(ctx, ledger, pod, req):
            try:
                steps = Steps(ctx.policy.exact_step_limit)
                option = self.on_node(ctx, ledger, pod, req, int(slot), p_groups, outcome, steps)
            except ExactLimitError:
                outcome.exact_gave_up = True
                continue
            if option is None:
                continue
            outcome.options += 1
            if best is None or option.key < best.key:
                best = option
        return best

    def on_node(
        self,
        ctx: Context,
        ledger: Ledger,
        pod: Pod,
        req: Vector,
        slot: int,
        p_groups: set[str],
        outcome: Outcome,
        steps: Steps,
    ) -> Option | None:
        short = shortfall(ctx, ledger, pod.priority, req, slot, outcome)
        if short is None:
            return None
        d = np.where(short.need, short.deficit, 0)
        best: Option | None = None
        for counts in _minimal(short.classes, d, short.need, steps):
            victims = pick(short.classes, counts)
            if not within_move_limit(ctx, ledger, len(victims)):
                outcome.move_limited = True
                continue
            option = cheapest_destinations(ctx, ledger, victims, slot, p_groups, steps)
            if option is None:
                outcome.destination_failed = True
                continue
            option.key = option_key(option)
            if best is None or option.key < best.key:
                best = option
        return best


def _minimal(
    classes: Sequence[VictimClass], d: Vector, need: Mask, steps: Steps
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


def cheapest_destinations(
    ctx: Context, ledger: Ledger, victims: list[Pod], source: int, p_groups: set[str], steps: Steps
) -> Option | None:
    """The destinations of least (cost, new nodes) for these victims, by exhaustive search."""
    view = ctx.view
    groups = view.state.groups
    victims = sorted(victims, key=lambda p: (p.workload or "", p.key))
    reqs = [ctx.req(v.spec) for v in victims]
    same_as_prev = [i > 0 and victims[i].spec is victims[i - 1].spec for i in range(len(victims))]
    slot_choices: list[list[int]] = []
    for v in victims:
        ok = view.static(v.spec) | ctx.upcoming(v.spec)
        slot_choices.append(
            [int(s) for s in np.flatnonzero(ok) if int(s) != source and int(s) not in ledger.sources]
        )
    free = {s: ledger.free[s].copy() for choices in slot_choices for s in choices}
    sizes = dict(ledger.group_size)
    growable = [g for g in groups if g not in p_groups]

    best: list[tuple[float, int, list[Dest], list[NewNode]]] = []
    nodes: list[NewNode] = [nn.copy() for nn in ledger.new_nodes]
    chosen: list[Dest] = []
    idents: list[tuple[int, int]] = []

    def search(i: int, cost: float, added: int) -> None:
        steps.tick()
        if best and (round(cost, 9), added) >= (round(best[0][0], 9), best[0][1]):
            return
        if i == len(victims):
            best[:] = [(cost, added, list(chosen), [nn.copy() for nn in nodes])]
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
            if (1, j) < floor or nn.group in p_groups or not view.admits(v.spec, nn.group):
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
            if not view.admits(v.spec, g) or sizes[g] >= groups[g].max:
                continue
            bought = ctx.buy(v.spec, [g], sizes, avoid=p_groups)
            if bought is None:
                continue  # another group's node for it (Karpenter's pool, or a group P could use)
            index = sum(1 for nn in nodes if nn.group == g)
            nodes.append(NewNode(g, index, bought.capacity - r, True, bought.capacity, bought.price))
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
