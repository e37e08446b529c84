"""The objective every search is judged on, computed from a draft or from a finished plan."""

from __future__ import annotations

from collections.abc import Iterable

from makeroom.model import Pod
from makeroom.model.state import ClusterState
from makeroom.planner.context import Context
from makeroom.planner.options import Draft
from makeroom.planner.types import Objective, Plan


def levels(pods: Iterable[Pod]) -> list[int]:
    """The priorities of the pods planned for, highest first: the parts of objective (1)."""
    return sorted({p.priority for p in pods}, reverse=True)


def placed(pods: Iterable[Pod], prios: list[int]) -> tuple[tuple[int, int], ...]:
    counts = dict.fromkeys(prios, 0)
    for p in pods:
        counts[p.priority] += 1
    return tuple((q, counts[q]) for q in prios)


def of_draft(ctx: Context, draft: Draft) -> Objective:
    pods = [d.pod for d in draft.decisions]
    victims = [v for d in draft.decisions for v in d.victims]
    return Objective(
        placed([d.pod for d in draft.decisions if d.reason is not None], levels(pods)),
        sum(ctx.price(nn.group) for nn in draft.new_nodes),
        len(draft.new_nodes),
        len(victims),
        sum(v.priority for v in victims),
    )


def of_plan(state: ClusterState, plan: Plan) -> Objective:
    pods = [p.pod for p in plan.placements] + [u.pod for u in plan.unplaceable]
    return Objective(
        placed([p.pod for p in plan.placements], levels(pods)),
        sum(state.groups[g].price_per_hour * n for g, n in plan.scale_ups.items()),
        sum(plan.scale_ups.values()),
        len(plan.moves),
        sum(m.pod.priority for m in plan.moves),
    )
