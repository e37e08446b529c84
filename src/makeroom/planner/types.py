"""The planner's value types: its policy, and the plan it returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from makeroom.model import Expander, Pod


class _Described(StrEnum):
    """A reason enum whose members each carry a sentence for users (their ``__doc__``)."""

    def __new__(cls, value: str, doc: str = "") -> _Described:
        member = str.__new__(cls, value)
        member._value_ = value
        member.__doc__ = " ".join(doc.split())
        return member

    @property
    def why(self) -> str:
        return self.__doc__ or ""


class UnplaceableReason(_Described):
    """Why the planner leaves a pending pod where it is."""

    NO_COMPATIBLE_NODE = (
        "no-compatible-node",
        """No node and no node group can ever take the pod: its node selector, affinity or
        tolerations exclude them all, or its requests exceed what one whole node holds.""",
    )
    NO_ROOM_TO_MAKE = (
        "no-room-to-make",
        """Every group the pod may use is at its max, and on no node it may use would moving the
        lower-priority pods that are allowed to move free enough room.""",
    )
    NO_DESTINATION = (
        "no-destination",
        """Room could be made for the pod, but the pods that would have to leave have nowhere to go:
        no unclaimed room on another node they may use, and no group they may use can grow within
        its max (a new node of a group the pending pod could use is never taken).""",
    )
    RELOCATION_OFF = (
        "relocation-off",
        """The pod opts out of relocation (makeroom.io/make-room: "false"), so makeroom moves nothing
        for it, and every group it may use is at its max.""",
    )
    MOVE_LIMIT = (
        "move-limit",
        """Making room would take more moves than the policy allows in one plan
        (max_moves_in_flight).""",
    )
    EXACT_LIMIT = (
        "exact-limit",
        """Exact mode gave up: the search for this pod went past its step limit. Plan without
        exact mode, or on a smaller cluster.""",
    )
    CONSTRAINT = (
        "constraint",
        """Room could be made, but a step of it would break a scheduling constraint that looks at
        other pods (inter-pod affinity or anti-affinity, topology spread, host ports): kube-scheduler
        would refuse a moved pod or the pending pod there, so makeroom moves nothing for it.""",
    )
    ZONE_UNKNOWN = (
        "zone-unknown",
        """A constraint by zone (a topology spread or pod affinity on topology.kubernetes.io/zone, a
        volume's zone) of the pod, or of a pod that would move for it, needs a new node of a group
        whose nodes are in several zones, and the group's template says in which zone a new node
        comes up nowhere: makeroom cannot tell whether the scheduler would accept it there, so it
        moves nothing for the pod. Give the group's zone (one group per zone, or its
        topology.kubernetes.io/zone label in --groups).""",
    )


class NotMovable(_Described):
    """Why a pod may not be moved to make room (the victim rules of design.md)."""

    NOT_BOUND = "not-bound", "The pod is not running on a node."
    TERMINATING = "terminating", "The pod is already being deleted."
    NO_CONTROLLER = (
        "no-controller",
        "Nothing would recreate the pod elsewhere: it has no owning controller.",
    )
    MIRROR = "mirror", "A mirror pod of a static pod: it lives and dies with its node."
    DAEMON_SET = "daemonset", "A DaemonSet pod belongs to its node."
    JOB = (
        "job",
        """A Job's pod: evicted, its work is lost and its Job may fail (backoffLimit). Moved only in
        the namespaces the admin opts in (controller.moveJobsIn, --move-jobs-in).""",
    )
    PERSISTENT_VOLUME = (
        "persistent-volume",
        """A StatefulSet pod with a PersistentVolumeClaim: its volume may be local to its node or
        bound to its zone, and its replacement could never start elsewhere.""",
    )
    SYSTEM_CRITICAL = (
        "system-critical",
        "The pod is system-critical (a system priority class or priority).",
    )
    LOCAL_STORAGE = (
        "local-storage",
        "The pod keeps data on its node (an emptyDir or local volume) that a move would lose.",
    )
    OPTED_OUT = (
        "opted-out",
        "The pod opts out with the makeroom.io/do-not-move annotation.",
    )
    COOLDOWN = (
        "cooldown",
        "makeroom moved the pod recently (makeroom.io/moved-at is within the cooldown).",
    )
    DISRUPTION_BUDGET = (
        "disruption-budget",
        """The PodDisruptionBudget of the pod's workload allows no disruption now (maxUnavailable 0,
        or no more healthy replicas than it requires): its eviction would be refused.""",
    )
    PINNED = (
        "pinned",
        """The controller keeps the pod where it is: it is outside the scope the admin gave makeroom,
        or already moving (or being surged) for a relocation under way.""",
    )


class PlacementReason(_Described):
    """How a pending pod gets its room."""

    FITS_NOW = "fits-now", "The pod fits on an existing node now; the scheduler will place it."
    RELOCATION = (
        "relocation",
        "Room is made on an existing node by moving lower-priority pods that all have a destination.",
    )
    NEW_NODE = (
        "new-node",
        """The pod gets a new node of its group, which costs less than (or the same as) making room
        by moving pods, or moving pods cannot make room.""",
    )


@dataclass(frozen=True, slots=True)
class Policy:
    """What the planner may do. ``now`` is on the same clock as the pods' annotations (seconds)."""

    now: float = 0.0
    cooldown: float = 600.0  # a pod moved less than this long ago is not moved again
    max_moves_in_flight: int | None = None  # most moves one plan may hold; None: no limit
    exact: bool = False  # exact search: jointly (OR-Tools), or per pending pod with joint=False
    # the exact joint search where OR-Tools is installed and the problem within its size, seeded by
    # the default search's plan (never worse than it); else the default search
    exact_if_available: bool = False
    joint: bool = True  # plan the pending pods jointly; False: one at a time, as before issue 13
    make_before_break: bool = False  # victims' replacements are Ready before they go (migrate)
    joint_budget: int = 400  # the default search's joint improvement: candidate nodes it may examine
    max_candidates: int = 8  # heuristic: nodes with a valid plan examined per pending pod
    use_upcoming_nodes: bool = True  # victims may go to nodes still being provisioned
    skip: frozenset[str] = frozenset()  # pod keys (namespace/name) not to plan for
    recently_moved: frozenset[str] = frozenset()  # pod keys in cooldown, as the controller remembers
    pinned: frozenset[str] = frozenset()  # pod keys the controller forbids to move (scope, in flight)
    move_jobs_in: frozenset[str] = frozenset()  # namespaces whose Job (and bare) pods may be moved
    exact_step_limit: int = 2_000_000  # exact mode: search steps per candidate node before giving up
    exact_budget: float = 10.0  # exact joint mode: the solver's deterministic time limit (about seconds)
    expander: Expander = Expander.LEAST_WASTE  # the cluster-autoscaler's (the first of its chain)


@dataclass(frozen=True, slots=True)
class Placement:
    pod: Pod
    node: str | None
    new_node_group: str | None
    reason: PlacementReason
    new_node_index: int | None = None  # which of the plan's new nodes of that group (0-based)
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pod": self.pod.name,
            "node": self.node,
            "new_node_group": self.new_node_group,
            "reason": self.reason.value,
        }
        if self.new_node_index is not None:
            out["new_node_index"] = self.new_node_index
        if self.detail:
            out["why"] = self.detail
        return out


@dataclass(frozen=True, slots=True)
class Move:
    pod: Pod
    workload: str | None
    from_node: str
    to_node: str | None
    to_new_node_group: str | None
    reason: str  # one line: for which pod, and why this destination
    for_pod: Pod
    new_node_index: int | None = None  # which of the plan's new nodes of that group (0-based)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pod": self.pod.name,
            "workload": self.workload,
            "from_node": self.from_node,
            "to_node": self.to_node,
            "to_new_node_group": self.to_new_node_group,
            "for_pod": self.for_pod.name,
            "why": self.reason,
        }
        if self.new_node_index is not None:
            out["new_node_index"] = self.new_node_index
        return out


@dataclass(frozen=True, slots=True)
class Unplaceable:
    pod: Pod
    reason: UnplaceableReason
    detail: str = ""  # what blocks, when the reason alone does not say (the constraint and its step)

    @property
    def why(self) -> str:
        return self.reason.why + (f" Blocked by: {self.detail}." if self.detail else "")

    def to_json(self) -> dict[str, Any]:
        out = {"pod": self.pod.name, "reason": self.reason.value, "why": self.reason.why}
        if self.detail:
            out["blocked_by"] = self.detail
        return out


@dataclass(frozen=True, slots=True)
class PlanStats:
    moves: int = 0
    new_nodes: int = 0
    plan_ms: float = 0.0  # filled in by the caller, who owns the clock
    pending: int = 0  # pending pods considered
    nodes_examined: int = 0  # candidate nodes whose pods were looked at
    exact: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "moves": self.moves,
            "new_nodes": self.new_nodes,
            "plan_ms": round(self.plan_ms, 3),
            "pending": self.pending,
            "nodes_examined": self.nodes_examined,
            "exact": self.exact,
        }


@dataclass(frozen=True, slots=True)
class Objective:
    """A plan's value on the objective, in its order: (1) the pending pods placed, by priority,
    highest first; (2) the cost per hour of new nodes, then their number; (3) the pods moved; (4) the
    sum of the moved pods' priorities. ``key`` orders plans, best first."""

    placed: tuple[tuple[int, int], ...] = ()  # (priority, pods placed), highest priority first
    cost: float = 0.0
    new_nodes: int = 0
    moves: int = 0
    moved_priority: int = 0

    def key(self) -> tuple[tuple[int, ...], float, int, int, int]:
        return (
            tuple(-n for _, n in self.placed),
            round(self.cost, 6),
            self.new_nodes,
            self.moves,
            self.moved_priority,
        )

    def level(self, other: Objective) -> str | None:
        """The first part of the objective on which the two differ (None when equal)."""
        a, b = self.key(), other.key()
        for name, x, y in zip(LEVELS, a, b, strict=True):
            if x != y:
                return name
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "placed": {str(q): n for q, n in self.placed},
            "cost_per_hour": round(self.cost, 6),
            "new_nodes": self.new_nodes,
            "moves": self.moves,
            "moved_priority": self.moved_priority,
        }

    def human(self) -> str:
        placed = ", ".join(f"{n} at priority {q}" for q, n in self.placed) or "none"
        return (
            f"placed {placed}; {self.new_nodes} new node(s) at ${self.cost:.2f}/h; "
            f"{self.moves} move(s), priorities summing to {self.moved_priority}"
        )


LEVELS = ("placed", "cost_per_hour", "new_nodes", "moves", "moved_priority")


class Proof(_Described):
    """How far a plan is known to be optimal."""

    OPTIMAL = "optimal", "No plan is better on the objective: the search proved it."
    BEST_FOUND = (
        "best-found",
        """The best plan the search found within its budget; no plan can be better than the bound.""",
    )


@dataclass(frozen=True, slots=True)
class Optimality:
    """Whether the plan is proven optimal, and the bound: no plan is better than ``bound`` (on the
    objective's order; for the pods placed it is an upper bound, for the rest a lower bound)."""

    proof: Proof
    search: str  # the search that made the plan
    objective: Objective
    bound: Objective
    steps: int = 0  # the search's work units spent

    @property
    def gap(self) -> str | None:
        """The first part of the objective where the plan may be beaten (None when proven)."""
        return None if self.proof is Proof.OPTIMAL else self.objective.level(self.bound)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.proof.value,
            "search": self.search,
            "objective": self.objective.to_json(),
            "bound": self.bound.to_json(),
            "gap": self.gap,
            "steps": self.steps,
        }


@dataclass(frozen=True, slots=True)
class Plan:
    placements: tuple[Placement, ...] = ()
    moves: tuple[Move, ...] = ()
    scale_ups: Mapping[str, int] = field(default_factory=dict)
    unplaceable: tuple[Unplaceable, ...] = ()
    stats: PlanStats = field(default_factory=PlanStats)
    optimality: Optimality | None = None

    def with_plan_ms(self, ms: float) -> Plan:
        return replace(self, stats=replace(self.stats, plan_ms=ms))

    def moves_for(self, pod: Pod) -> list[Move]:
        return [m for m in self.moves if m.for_pod is pod]

    def to_json(self) -> dict[str, Any]:
        """The plan object of spec/scenario-v1.md, plus optional extras (``why``, ``for_pod``,
        ``optimality``)."""
        out = {
            "placements": [p.to_json() for p in self.placements],
            "moves": [m.to_json() for m in self.moves],
            "scale_ups": dict(self.scale_ups),
            "unplaceable": [u.to_json() for u in self.unplaceable],
            "stats": self.stats.to_json(),
        }
        if self.optimality is not None:
            out["optimality"] = self.optimality.to_json()
        return out
