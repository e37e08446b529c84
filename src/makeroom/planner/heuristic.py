"""The per-pod heuristic: for one pending pod, a few victim sets on the most promising nodes, each with
greedy destinations; the best by ``option_key``.

For each candidate node the pods that may move are grouped in classes (same workload and spec).
Victim sets come from four greedy orders, each followed by a reprieve pass, and every minimal set
when a node holds few enough classes to enumerate them. At most ``Policy.max_candidates`` nodes with
a valid relocation are compared, and a lower bound on the victims a node needs skips nodes that
cannot win.
"""

from __future__ import annotations

import numpy as np

from makeroom.model import Pod
from makeroom.model.resources import Vector
from makeroom.planner.candidates import Shortfall, candidate_slots, shortfall, within_move_limit
from makeroom.planner.context import Context, Ledger
from makeroom.planner.destinations import Sharers, assign, existing_capacity
from makeroom.planner.options import Option, Outcome, option_key
from makeroom.planner.victims import fewest, pick, victim_sets


class Heuristic:
    """Relocation for one pod, fast: the default search's per-pod step."""

    name = "heuristic"

    def best(
        self, ctx: Context, ledger: Ledger, pod: Pod, req: Vector, p_groups: set[str], outcome: Outcome
    ) -> Option | None:
        best: Option | None = None
        for slot in candidate_slots(ctx, ledger, pod, req):
            option = self.on_node(ctx, ledger, pod, req, int(slot), p_groups, outcome, best)
            if option is None:
                continue
            outcome.options += 1
            if best is None or option.key < best.key:
                best = option
            if outcome.options >= ctx.policy.max_candidates:
                break
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
        best: Option | None = None,
    ) -> Option | None:
        """The best relocation on one node, or None (also when it cannot beat ``best``)."""
        return self.on_node_for(ctx, ledger, req, pod.priority, slot, p_groups, outcome, best)

    def on_node_for(
        self,
        ctx: Context,
        ledger: Ledger,
        req: Vector,
        below: int,
        slot: int,
        p_groups: set[str],
        outcome: Outcome,
        best: Option | None = None,
        sharers: Sharers | None = None,
    ) -> Option | None:
        """The best relocation on one node for room ``req``, moving pods of priority below ``below``
        and never to a new node of ``p_groups`` (of the groups ``sharers`` bars, per moved pod)."""
        short = shortfall(ctx, ledger, below, req, slot, outcome)
        if short is None:
            return None
        if best is not None:
            lb = fewest(short.classes, np.where(short.need, short.deficit, 0), short.need)
            if (0.0, 0, lb) > best.key[:3]:
                return None
        found = self.all_on(ctx, ledger, short, slot, p_groups, outcome, sharers)
        return min(found, key=lambda o: o.key) if found else None

    def all_on(
        self,
        ctx: Context,
        ledger: Ledger,
        short: Shortfall,
        slot: int,
        p_groups: set[str],
        outcome: Outcome,
        sharers: Sharers | None = None,
    ) -> list[Option]:
        """A relocation for each victim set tried on the node, with greedy destinations."""
        capacity = existing_capacity(ctx, ledger, short.classes, slot)
        found: list[Option] = []
        for counts in victim_sets(short.classes, short.deficit, short.need, capacity):
            victims = pick(short.classes, counts)
            if not within_move_limit(ctx, ledger, len(victims)):
                outcome.move_limited = True
                continue
            option = assign(ctx, ledger, victims, slot, p_groups, sharers)
            if option is None:
                outcome.destination_failed = True
                continue
            option.key = option_key(option)
            found.append(option)
        return found
