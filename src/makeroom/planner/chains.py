"""What the rule against chains costs (issue 22, item 2).

A plan never moves pods to a node it empties for a pending pod, nor takes pods off a node moved pods
reach (docs/planner.md, "The rules"): the controller runs a relocation's moves in no order, so such a
chain could send a pod to room that is not free yet. The rule is a choice that can cost a node. When
the chosen plan buys one and is the exact model's optimum under the rule, the same model without the rule
(each node's room counted after its departures) says whether a plan with chains would buy less, and
at how many more moves; ``makeroom plan`` shows it. Only where OR-Tools is installed, the problem is
within the size the controller gives the exact search (``search.AUTO_EXACT_SIZE``), and no pod has a
rule that looks at other pods (topology spread, pod affinity), which the model sees only against the
cluster as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from makeroom.model.state import ClusterState
from makeroom.model.view import ClusterView
from makeroom.planner.budgets import Budgets
from makeroom.planner.context import Context
from makeroom.planner.cpsat import estimate, exact_available, optimum
from makeroom.planner.objective import of_plan
from makeroom.planner.search import AUTO_EXACT_SIZE, pending_pods
from makeroom.planner.types import Plan, Policy


@dataclass(frozen=True, slots=True)
class ChainCost:
    """A plan with chains that places the same pods as the chosen one and buys less."""

    more_moves: int  # its moves beyond the chosen plan's (0 or fewer: none more)
    new_nodes: int  # the new nodes it buys
    saved_per_hour: float  # the new nodes' price it saves (0 where the groups have no price)

    def sentence(self) -> str:
        if self.more_moves > 0:
            moves = f"{self.more_moves} more move(s)"
        else:
            moves = "no more moves" if self.more_moves == 0 else f"{-self.more_moves} move(s) fewer"
        nodes = "no new node" if self.new_nodes == 0 else f"only {self.new_nodes} new node(s)"
        saved = f" (${self.saved_per_hour:.2f}/h less)" if self.saved_per_hour > 0 else ""
        return (
            f"a plan with {moves} needs {nodes}{saved}, by moving pods to a node that pods leave: "
            "makeroom makes no such chain (its moves run in no order, so a pod could arrive before "
            "its room is free)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "more_moves": self.more_moves,
            "new_nodes": self.new_nodes,
            "saved_per_hour": round(self.saved_per_hour, 6),
            "why": self.sentence(),
        }


def chain_cost(state: ClusterState, policy: Policy, chosen: Plan) -> ChainCost | None:
    """What the rule against chains cost ``chosen`` (a plan of ``state`` under ``policy``): None when
    it bought no node, when no plan with chains places the same pods for less, or when it is not
    known (no OR-Tools, a problem past the size, nothing found within ``policy.exact_budget``)."""
    if not chosen.scale_ups or not exact_available():
        return None
    if state.anti_affine or any(p.spec.places_by_pods for p in state.pods.values()):
        return None  # the model sees rules that look at other pods only against the cluster as it is
    planned = [p.pod for p in chosen.placements] + [u.pod for u in chosen.unplaceable]
    pods = pending_pods(state, policy, planned)
    ctx = Context(ClusterView(state), policy, Budgets.of(state))
    if estimate(ctx, pods) > AUTO_EXACT_SIZE:
        return None
    mine = of_plan(state, chosen)
    strict = optimum(ctx, pods)
    if strict is None or strict.key() != mine.key():
        return None  # the model does not see the chosen plan as the best under the rule: not comparable
    best = optimum(ctx, pods, chains=True)
    if best is None or best.placed != mine.placed or best.key()[1:3] >= mine.key()[1:3]:
        return None  # the same pods placed, and less spent on new nodes (their price, then number)
    return ChainCost(best.moves - mine.moves, best.new_nodes, max(0.0, mine.cost - best.cost))
