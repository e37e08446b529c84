"""The relocation planner: ``plan(state, policy) -> Plan``. Pure: it imports only the model."""

from makeroom.planner.rules import not_movable
from makeroom.planner.search import plan
from makeroom.planner.types import (
    Move,
    NotMovable,
    Placement,
    PlacementReason,
    Plan,
    PlanStats,
    Policy,
    Unplaceable,
    UnplaceableReason,
)

__all__ = [
    "Move",
    "NotMovable",
    "Placement",
    "PlacementReason",
    "Plan",
    "PlanStats",
    "Policy",
    "Unplaceable",
    "UnplaceableReason",
    "not_movable",
    "plan",
]
