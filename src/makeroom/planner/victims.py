"""Victims: the pods on a node that may leave to make room, grouped in classes of interchangeable pods,
and the sets of them (a count per class) that free enough room."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from makeroom.model import Pod, PodSpec
from makeroom.model.resources import Vector
from makeroom.model.state import Mask
from makeroom.planner.context import Context, Ledger
from makeroom.planner.options import VictimClass

ENUMERATE_UP_TO = 256  # count vectors: every minimal set is tried when a node has no more
LIGHT_UP_TO = 16  # classes: a light set is tried too on nodes with no more


def classes_on(ctx: Context, ledger: Ledger, slot: int, below: int) -> list[VictimClass]:
    """The pods on the node that may move for a pod of priority ``below``, lowest priority first."""
    state = ctx.view.state
    by_key: dict[tuple[str | None, PodSpec], VictimClass] = {}
    for other in state.pods_on[ctx.view.name(slot)].values():
        if other.priority >= below or other.key in ledger.moved or ctx.movable(other) is not None:
            continue
        k = (other.workload, other.spec)
        klass = by_key.get(k)
        if klass is None:
            klass = VictimClass(other.workload, other.spec, [], ctx.req(other.spec), other.priority)
            by_key[k] = klass
        klass.pods.append(other)
    classes = list(by_key.values())
    for klass in classes:
        klass.pods.sort(key=lambda p: p.key)
    classes.sort(key=lambda c: (c.priority, c.workload or "", c.pods[0].key))
    return classes


def covers(acc: Vector, deficit: Vector, need: Mask) -> bool:
    return bool((acc[need] >= deficit[need]).all())


def pick(classes: Sequence[VictimClass], counts: Sequence[int]) -> list[Pod]:
    return [p for c, k in zip(classes, counts, strict=True) for p in c.pods[:k]]


def victim_sets(
    classes: Sequence[VictimClass], deficit: Vector, need: Mask, capacity: Sequence[int]
) -> list[tuple[int, ...]]:
    """Candidate victim sets (a count per class), from a few greedy orders with a reprieve pass, and
    every minimal set when the node holds few enough classes to enumerate them. ``capacity`` is how
    many pods of each class existing room could take: beyond it a victim costs a new node."""
    d = np.where(need, deficit, 0)
    # The short resources as plain integers: these vectors are a few long, and numpy's per-call cost
    # on them dominated the plan (each step of a greedy order asked whether the set covers yet).
    dims = [int(k) for k in np.flatnonzero(need)]
    short = [int(d[k]) for k in dims]
    reqs = [[int(c.req[k]) for k in dims] for c in classes]
    cover = [sum(min(r, x) / max(x, 1) for r, x in zip(req, short, strict=True)) for req in reqs]
    items = [(ci, k) for ci, c in enumerate(classes) for k in range(len(c.pods))]

    def costly(item: tuple[int, int]) -> bool:
        return item[1] >= capacity[item[0]]

    def covered(acc: list[int]) -> bool:
        return all(a >= x for a, x in zip(acc, short, strict=True))

    orders = [
        sorted(items, key=lambda it: (costly(it), classes[it[0]].priority, -cover[it[0]], it)),
        sorted(items, key=lambda it: (costly(it), -cover[it[0]], classes[it[0]].priority, it)),
        sorted(items, key=lambda it: (-cover[it[0]], classes[it[0]].priority, it)),
        sorted(items, key=lambda it: (classes[it[0]].priority, -cover[it[0]], it)),
    ]
    found: list[tuple[int, ...]] = []
    for order in orders:
        counts = [0] * len(classes)
        acc = [0] * len(dims)
        for ci, _ in order:
            if covered(acc):
                break
            counts[ci] += 1
            acc = [a + r for a, r in zip(acc, reqs[ci], strict=True)]
        if not covered(acc):
            continue
        # reprieve: most important first (highest priority, least useful), while P still fits
        for ci in sorted(range(len(classes)), key=lambda i: (-classes[i].priority, cover[i], i)):
            while counts[ci] > 0 and all(a - r >= x for a, r, x in zip(acc, reqs[ci], short, strict=True)):
                counts[ci] -= 1
                acc = [a - r for a, r in zip(acc, reqs[ci], strict=True)]
        t = tuple(counts)
        if t not in found:
            found.append(t)
    if len(classes) <= LIGHT_UP_TO:
        light = lightest_set(classes, d, need)
        if light is not None and light not in found:
            found.append(light)
    if space(classes) <= ENUMERATE_UP_TO:
        for t in minimal_sets(classes, d, need):
            if t not in found:
                found.append(t)
    elif not found or min(sum(t) for t in found) > fewest(classes, d, need):
        # the greedy sets may hold more victims than needed: search for the fewest
        least = fewest_set(classes, d, need)
        if least is not None and least not in found:
            found.append(least)
    return found


def space(classes: Sequence[VictimClass]) -> int:
    n = 1
    for c in classes:
        n *= len(c.pods) + 1
    return n


def minimal_sets(classes: Sequence[VictimClass], d: Vector, need: Mask) -> list[tuple[int, ...]]:
    """Every count vector that covers the deficit and from which no single pod can be spared, in
    the order of ``itertools.product`` over the counts (computed for all count vectors at once)."""
    ranges = [np.arange(len(c.pods) + 1) for c in classes]
    grid = np.stack(np.meshgrid(*ranges, indexing="ij"), axis=-1).reshape(-1, len(classes))
    reqs = np.stack([c.req for c in classes])[:, need]
    acc = grid @ reqs
    dn = d[need]
    ok = np.all(acc >= dn, axis=1)
    for i in range(len(classes)):
        spare = (grid[:, i] > 0) & np.all(acc - reqs[i] >= dn, axis=1)
        ok &= ~spare
    return [tuple(int(k) for k in row) for row in grid[ok]]


def fewest_set(
    classes: Sequence[VictimClass], d: Vector, need: Mask, steps: int = 2_000
) -> tuple[int, ...] | None:
    """The covering set with the fewest victims, then the lowest sum of their priorities, by a small
    branch and bound over the counts per class (the most useful first); the best found within
    ``steps``. Plain integers: the vectors are short and this runs often."""
    return fewest_search(classes, d, need, steps)[0]


def fewest_search(
    classes: Sequence[VictimClass], d: Vector, need: Mask, steps: int
) -> tuple[tuple[int, ...] | None, bool]:
    """``fewest_set``, and whether the search finished (its answer is then the minimum)."""
    dims = [int(i) for i in np.flatnonzero(need)]
    order = sorted(range(len(classes)), key=lambda i: -float(np.minimum(classes[i].req, d)[need].sum()))
    reqs = [tuple(int(classes[i].req[k]) for k in dims) for i in order]
    caps = [len(classes[i].pods) for i in order]
    prios = [classes[i].priority for i in order]
    tail = [tuple(0 for _ in dims)] * (len(order) + 1)
    low = [0] * (len(order) + 1)  # the lowest priority from position i on (for the bound on the sum)
    for i in range(len(order) - 1, -1, -1):
        tail[i] = tuple(max(a, b) for a, b in zip(tail[i + 1], reqs[i], strict=True))
        low[i] = prios[i] if i == len(order) - 1 else min(low[i + 1], prios[i])
    best: list[tuple[tuple[int, int], list[int]]] = []
    counts = [0] * len(order)
    left = [steps]

    def go(i: int, rem: tuple[int, ...], n: int, prio: int) -> None:
        left[0] -= 1
        if left[0] < 0:
            return
        short = [k for k, r in enumerate(rem) if r > 0]
        if not short:
            if not best or (n, prio) < best[0][0]:
                best[:] = [((n, prio), list(counts))]
            return
        if i == len(order):
            return
        lb = 0
        for k in short:
            big = tail[i][k]
            if big <= 0:
                return
            lb = max(lb, -(-rem[k] // big))
        if best and (n + lb, prio + lb * low[i]) >= best[0][0]:
            return
        r = reqs[i]
        top = caps[i] if any(r[k] > 0 for k in short) else 0
        for c in range(top, -1, -1):
            counts[i] = c
            go(i + 1, tuple(a - b * c for a, b in zip(rem, r, strict=True)), n + c, prio + prios[i] * c)
        counts[i] = 0

    go(0, tuple(int(d[k]) for k in dims), 0, 0)
    finished = left[0] >= 0
    if not best:
        return None, finished
    out = [0] * len(classes)
    for pos, i in enumerate(order):
        out[i] = best[0][1][pos]
    return tuple(out), finished


def lightest_set(classes: Sequence[VictimClass], d: Vector, need: Mask) -> tuple[int, ...] | None:
    """A covering set that takes little room where its pods go: greedily the pod that covers the
    most of what is still missing for its size, then the largest given back while P still fits."""
    if not classes:
        return None
    scale = np.maximum(d, 1)
    size = [float((c.req[need] / scale[need]).sum()) + 1e-9 for c in classes]
    counts = [0] * len(classes)
    acc = np.zeros_like(d)
    while not covers(acc, d, need):
        rem = np.maximum(d - acc, 0)
        best, gain = -1, 0.0
        for i, c in enumerate(classes):
            if counts[i] < len(c.pods):
                g = float((np.minimum(c.req, rem)[need] / scale[need]).sum()) / size[i]
                if g > gain:
                    best, gain = i, g
        if best < 0:
            return None
        counts[best] += 1
        acc = acc + classes[best].req
    for i in sorted(range(len(classes)), key=lambda i: -size[i]):
        while counts[i] > 0 and covers(acc - classes[i].req, d, need):
            counts[i] -= 1
            acc = acc - classes[i].req
    return tuple(counts)


def fewest(classes: Sequence[VictimClass], d: Vector, need: Mask) -> int:
    """A lower bound on the victims any covering set needs: in each short resource, the deficit over
    the largest request there. 0 when nothing is short. (Plain integers: it runs for every candidate
    node, on vectors a few long.)"""
    dims = [int(k) for k in np.flatnonzero(need)]
    if not dims:
        return 0
    if not classes:
        return 1 << 30
    most = 0
    for k in dims:
        biggest = max(int(c.req[k]) for c in classes)
        most = max(most, math.ceil(int(d[k]) / biggest) if biggest > 0 else 1 << 30)
    return most
