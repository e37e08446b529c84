"""Candidate nodes for a pending pod: Ready nodes it may use whose allocatable could hold it, most
promising first, and what is missing on each."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from makeroom.model import Pod
from makeroom.model.resources import Vector
from makeroom.model.state import Mask
from makeroom.planner.context import Context, Ledger
from makeroom.planner.options import Outcome, VictimClass
from makeroom.planner.victims import classes_on


def candidate_slots(ctx: Context, ledger: Ledger, pod: Pod, req: Vector) -> npt.NDArray[np.intp]:
    """Ready nodes the pod may use and could fit on, by how little is missing (the pod's shortfall on
    the node relative to its request), then group order. Nodes moved pods reach are left out."""
    view = ctx.view
    cand = view.static(pod.spec) & np.all(view.state.alloc >= req, axis=1)
    slots = np.flatnonzero(cand)
    if ledger.targets and len(slots):
        slots = slots[~np.isin(slots, list(ledger.targets))]
    if len(slots) == 0:
        return slots
    deficit = np.maximum(req - ledger.free[slots], 0)
    score = (deficit / np.maximum(req, 1)).sum(axis=1)
    order = np.lexsort((slots, view.slot_rank[slots], score))
    result: npt.NDArray[np.intp] = slots[order]
    return result


@dataclass(slots=True)
class Shortfall:
    """What the pod lacks on one node, and the pods there that may leave for it."""

    slot: int
    classes: list[VictimClass]
    deficit: Vector
    need: Mask  # the resources that are short


def shortfall(
    ctx: Context, ledger: Ledger, below: int, req: Vector, slot: int, outcome: Outcome
) -> Shortfall | None:
    """What room ``req`` lacks on the node and the pods of priority below ``below`` that may leave;
    None when even all of them leaving would not make the room."""
    outcome.examined += 1
    deficit = req - ledger.free[slot]
    need = deficit > 0
    classes = classes_on(ctx, ledger, slot, below)
    if not classes:
        return None
    total = sum((c.req * len(c.pods) for c in classes), np.zeros_like(req))
    if np.any(total[need] < deficit[need]):
        return None
    outcome.room_possible = True
    return Shortfall(slot, classes, deficit, need)


def within_move_limit(ctx: Context, ledger: Ledger, n: int) -> bool:
    limit = ctx.policy.max_moves_in_flight
    return limit is None or ledger.moves + n <= limit
