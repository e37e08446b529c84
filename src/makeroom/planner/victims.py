"""Victims: the pods on a node that may leave to make room, grouped in classes of interchangeable pods,
and the sets of them (a count per class) that free enough room."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np

from makeroom.model import Pod, PodSpec
from makeroom.model.resources import Vector
from makeroom.model.state import Mask
from makeroom.planner.context import Context, Ledger
from makeroom.planner.options import VictimClass

ENUMERATE_UP_TO = 256  # count vectors: every minimal set is tried when a node has no more


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
    return bool(np.all(acc[need] >= deficit[need]))


def pick(classes: Sequence[VictimClass], counts: Sequence[int]) -> list[Pod]:
    return [p for c, k in zip(classes, counts, strict=True) for p in c.pods[:k]]


def victim_sets(
    classes: Sequence[VictimClass], deficit: Vector, need: Mask, capacity: Sequence[int]
) -> list[tuple[int, ...]]:
    """Candidate victim sets (a count per class), from a few greedy orders with a reprieve pass, and
    every minimal set when the node holds few enough classes to enumerate them. ``capacity`` is how
    many pods of each class existing room could take: beyond it a victim costs a new node."""
    d = np.where(need, deficit, 0)
    dn = np.maximum(d, 1)
    cover = [float((np.minimum(c.req, d) / dn)[need].sum()) for c in classes]
    items = [(ci, k) for ci, c in enumerate(classes) for k in range(len(c.pods))]

    def costly(item: tuple[int, int]) -> bool:
        return item[1] >= capacity[item[0]]

    orders = [
        sorted(items, key=lambda it: (costly(it), classes[it[0]].priority, -cover[it[0]], it)),
        sorted(items, key=lambda it: (costly(it), -cover[it[0]], classes[it[0]].priority, it)),
        sorted(items, key=lambda it: (-cover[it[0]], classes[it[0]].priority, it)),
        sorted(items, key=lambda it: (classes[it[0]].priority, -cover[it[0]], it)),
    ]
    found: list[tuple[int, ...]] = []
    for order in orders:
        counts = [0] * len(classes)
        acc = np.zeros_like(d)
        for ci, _ in order:
            if covers(acc, d, need):
                break
            counts[ci] += 1
            acc = acc + classes[ci].req
        if not covers(acc, d, need):
            continue
        # reprieve: most important first (highest priority, least useful), while P still fits
        for ci in sorted(range(len(classes)), key=lambda i: (-classes[i].priority, cover[i], i)):
            while counts[ci] > 0 and covers(acc - classes[ci].req, d, need):
                counts[ci] -= 1
                acc = acc - classes[ci].req
        t = tuple(counts)
        if t not in found:
            found.append(t)
    if space(classes) <= ENUMERATE_UP_TO:
        for t in minimal_sets(classes, d, need):
            if t not in found:
                found.append(t)
    return found


def space(classes: Sequence[VictimClass]) -> int:
    n = 1
    for c in classes:
        n *= len(c.pods) + 1
    return n


def minimal_sets(classes: Sequence[VictimClass], d: Vector, need: Mask) -> Iterable[tuple[int, ...]]:
    """Every count vector that covers the deficit and from which no single pod can be spared."""
    ranges = [range(len(c.pods) + 1) for c in classes]
    for counts in itertools.product(*ranges):
        acc = sum((c.req * k for c, k in zip(classes, counts, strict=True)), np.zeros_like(d))
        if not covers(acc, d, need):
            continue
        if any(k > 0 and covers(acc - c.req, d, need) for c, k in zip(classes, counts, strict=True)):
            continue
        yield counts


def fewest(classes: Sequence[VictimClass], d: Vector, need: Mask) -> int:
    """A lower bound on the victims any covering set needs: in each short resource, the deficit over
    the largest request there. 0 when nothing is short."""
    if not need.any():
        return 0
    if not classes:
        return 1 << 30
    biggest = np.max(np.stack([c.req for c in classes]), axis=0)
    with np.errstate(divide="ignore"):
        per = np.where(biggest[need] > 0, np.ceil(d[need] / np.maximum(biggest[need], 1)), 1 << 30)
    return int(np.max(per))
