"""The relocation planner: ``plan(state, policy) -> Plan``. Pure: it imports only the model."""

from makeroom.planner.rules import not_movable
from makeroom.planner.search import plan
from makeroom.planner.types import (
    Move,
    NotMovable,
    Objective,
    Optimality,
    Placement,
    PlacementReason,
    Plan,
    PlanStats,
    Policy,
    Proof,
    Unplaceable,
    UnplaceableReason,
)

__all__ = [
    "Move",
    "NotMovable",
    "Objective",
    "Optimality",
    "Placement",
    "PlacementReason",
    "Plan",
    "PlanStats",
    "Policy",
    "Proof",
    "Unplaceable",
    "UnplaceableReason",
    "not_movable",
    "plan",
]
