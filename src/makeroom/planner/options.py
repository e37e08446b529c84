"""The searches' value types: new nodes a plan adds, where a victim goes, one way to give a pending pod
room (an option), the interchangeable victims on a node, and the per-pod decisions of a whole plan
(a draft, which ``commit`` turns into a Plan with its explanations)."""

from __future__ import annotations

from dataclasses import dataclass, field

from makeroom.model import Pod, PodSpec
from makeroom.model.resources import Vector
from makeroom.planner.types import Objective, PlacementReason, UnplaceableReason

# (cost per hour, new nodes, victims, sum of victim priorities, highest victim priority, workloads touched)
Key = tuple[float, int, int, int, int, int]
INF_KEY: Key = (float("inf"), 1 << 30, 1 << 30, 1 << 62, 1 << 62, 1 << 30)


@dataclass(slots=True)
class NewNode:
    """A node the plan adds (not in the cluster yet): its group and the room left on it."""

    group: str
    index: int  # 0-based among the plan's new nodes of this group
    free: Vector
    for_victims: bool  # added for moved pods (False: for a pending pod itself)
    capacity: Vector | None = None  # its allocatable, when not the group's template (a pool's type)
    price: float | None = None  # its price, when not the group's (a pool's type)

    def copy(self) -> NewNode:
        return NewNode(self.group, self.index, self.free.copy(), self.for_victims, self.capacity, self.price)


@dataclass(frozen=True, slots=True)
class Dest:
    """Where one victim (or a pending pod) goes: a node slot, or one of the plan's new nodes."""

    slot: int = -1  # >= 0: a node of the cluster (Ready, or upcoming)
    new_node: int = -1  # >= 0: position in the plan's list of new nodes
    group: str = ""  # with new_node -1 and slot -1: a new node of this group, not added yet


@dataclass(slots=True)
class Option:
    """One way to give P room: relocation on ``slot``, or its own room (a new or upcoming node)."""

    slot: int
    victims: list[Pod]
    dests: list[Dest]
    new_nodes: list[NewNode]  # the plan's list of new nodes after this option (copies)
    cost: float
    added: int  # new nodes this option adds
    key: Key = INF_KEY


def option_key(option: Option) -> Key:
    """Order of choice among relocations: cheapest new nodes, fewest victims, lowest victim
    priorities (their sum, then the highest), fewest workloads touched."""
    prios = [v.priority for v in option.victims]
    return (
        round(option.cost, 9),
        option.added,
        len(option.victims),
        sum(prios),
        max(prios, default=0),
        len({(v.namespace, v.workload) for v in option.victims}),
    )


@dataclass(slots=True)
class VictimClass:
    """Pods on one node that are interchangeable as victims: same workload and same spec."""

    workload: str | None
    spec: PodSpec
    pods: list[Pod]
    req: Vector
    priority: int


@dataclass(slots=True)
class Outcome:
    """What one pending pod's search ran into, for the reason it is left unplaced."""

    options: int = 0
    room_possible: bool = False  # some node could fit P if its movable pods left
    destination_failed: bool = False
    move_limited: bool = False
    exact_gave_up: bool = False
    examined: int = 0  # candidate nodes whose pods were looked at


@dataclass(frozen=True, slots=True)
class Decision:
    """Where one pending pod goes in a plan, and what moves for it.

    ``reason`` None: unplaceable (``unplaceable`` says why). For a relocation or a fit, ``slot`` is the
    node; for its own room, ``slot`` is an upcoming node or ``new_node`` one of the draft's new nodes
    (``adds`` when this pod's placement is what adds it)."""

    pod: Pod
    reason: PlacementReason | None
    slot: int = -1
    new_node: int = -1
    adds: bool = False
    victims: tuple[Pod, ...] = ()
    dests: tuple[Dest, ...] = ()
    alternative: float | None = None  # what a new node for the pod would cost (None: no group can grow)
    unplaceable: UnplaceableReason | None = None
    blocked: str = ""  # for UnplaceableReason.CONSTRAINT: the constraint and the step it refuses

    @classmethod
    def relocation(cls, pod: Pod, option: Option, alternative: float | None = None) -> Decision:
        """``pod`` placed by the relocation ``option`` (its node, victims and their destinations)."""
        return cls(
            pod,
            PlacementReason.RELOCATION,
            slot=option.slot,
            victims=tuple(option.victims),
            dests=tuple(option.dests),
            alternative=alternative,
        )


@dataclass(slots=True)
class Draft:
    """A whole plan as decisions, in planning order, with the new nodes it adds, and what the search
    that made it knows of its optimality (``proven``; ``bound``: no plan is better)."""

    decisions: list[Decision] = field(default_factory=list)
    new_nodes: list[NewNode] = field(default_factory=list)
    nodes_examined: int = 0
    proven: bool = False
    bound: Objective | None = None
    steps: int = 0
    search: str = ""  # set when the search that made it is not the one asked for (a fallback)
