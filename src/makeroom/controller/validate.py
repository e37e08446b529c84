"""Every action re-checked against the live cluster just before it runs (as Karpenter's disruption
Validator re-checks a command before it executes it).

A record says what makeroom decided; the cluster may have changed since, and a record must never be
trusted further than the cluster bears it out. So each tick the whole record is checked (``record``),
and each state-changing command is checked again at the moment it is sent (``command``): the pending
pod and the victims inside the admin's scope, each victim below the pending pod's priority, still
movable and still a pod of the workload the record names, the workload a Deployment that controls the
victims by owner references (never by a matching name) whose replicas no other controller owns, the
move budgets, and somewhere for the victims to go. A refusal rolls the whole relocation (or
consolidation) back; nothing partial is carried on.

The checks are a list of small functions, each for the actions it concerns: a new guard is one more
entry in ``CHECKS``. (Leadership is fenced below the port, on every HTTP attempt: ``kube.client``.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from makeroom.controller.config import ControllerConfig, Strategy
from makeroom.controller.port import Cluster
from makeroom.controller.records import Keeping, Phase, Record, Records, Relocation
from makeroom.controller.room import somewhere_to_go as room_for_replacements
from makeroom.controller.scope import NamespaceLabels, Scope
from makeroom.model import Pod
from makeroom.model.objects import MAKE_ROOM
from makeroom.model.state import ClusterState
from makeroom.planner import Policy, not_movable


class Refusal(StrEnum):
    """Why a command is not carried out (the whole relocation or consolidation is rolled back)."""

    OUT_OF_SCOPE = "out-of-scope"
    """The pending pod is not one makeroom makes room for, or a pod to move is not one it may move
    (the admin's scope: namespaces, their labels, PriorityClasses)."""
    NOT_LOWER_PRIORITY = "not-lower-priority"
    """A pod to move does not have a lower priority than the pending pod."""
    NOT_MOVABLE = "not-movable"
    """A pod to move may not be moved (the victim rules: no controller, DaemonSet, mirror,
    system-critical, local storage, makeroom.io/do-not-move)."""
    OWNER_CHANGED = "owner-changed"
    """A pod to move is no longer a pod of the workload the record names, or not on its node."""
    NOT_A_DEPLOYMENT = "not-a-deployment"
    """The workload to scale is not a Deployment that controls the pods to move through its
    ReplicaSet, by owner references with their uids."""
    REPLICAS_OWNED = "replicas-owned"
    """Another controller (a HorizontalPodAutoscaler, KEDA...) sets the workload's replicas."""
    REPLICAS_CHANGED = "replicas-changed"
    """Someone changed the workload's replicas while makeroom surged it: makeroom does not fight them."""
    OVER_BUDGET = "over-budget"
    """The record moves more pods than one relocation (max_moves_in_flight) or consolidation
    (consolidation.max_moves) may, or surges a workload by other than its pods to move."""
    NO_DESTINATION = "no-destination"
    """A pod to move has nowhere to go: no room on another node it may use, none coming, and no
    group it may use can grow."""
    MAKE_ROOM_OFF = "make-room-off"
    """The pending pod opts out of relocation (makeroom.io/make-room: "false")."""
    EVICTION_REFUSED = "eviction-refused"
    """The API server refuses a victim's eviction for good as things are (the pod is under more than
    one PodDisruptionBudget, which the Eviction API does not support): no retry can succeed."""
    SURGE_TAKEN = "surge-taken"
    """Another relocation or consolidation under way surges the workload: one owner of a workload's
    surge at a time, so that two never scale it against each other."""
    RESERVATION_LOST = "reservation-lost"
    """The pending pod is nominated to another node than the one makeroom holds for it (the
    scheduler's preemption, or someone else, placed it elsewhere): the room makeroom keeps is no longer
    the pod's."""


class Action(StrEnum):
    """A state-changing command of a relocation or a consolidation."""

    HOLD = "hold"  # the room kept for the pending pod (nomination, scale-up delay)
    MARK = "mark"  # a pod marked to leave (victim mark, lowest deletion cost)
    SURGE = "surge"  # a workload scaled up so the replacements come first
    EVICT = "eviction"  # a pod evicted through the Eviction API
    TAINT = "taint"  # the node being emptied tainted


@dataclass(frozen=True, slots=True)
class Live:
    """The cluster as the validator sees it now, with makeroom's records as read this round."""

    state: ClusterState
    namespaces: NamespaceLabels
    now: float
    records: Records = field(default_factory=Records)


@dataclass(frozen=True, slots=True)
class Command:
    action: Action
    record: Record
    target: str  # a pod's key (HOLD, MARK, EVICT), a workload (SURGE), a node (TAINT)


class RefusedError(Exception):
    """A command (or the record it belongs to) failed a check: roll back, never carry on."""

    def __init__(self, refusal: Refusal, detail: str) -> None:
        super().__init__(f"{detail} ({refusal.value})")
        self.refusal = refusal
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Context:
    """What a check may read."""

    config: ControllerConfig
    scope: Scope
    cluster: Cluster
    live: Live

    @property
    def state(self) -> ClusterState:
        return self.live.state

    def pending(self, record: Record) -> Pod | None:
        return self.state.pods.get(record.pod) if isinstance(record, Relocation) else None


Check = Callable[[Command, Context], RefusedError | None]

_OFF = frozenset({"false", "no", "0", "off"})  # as the planner reads makeroom.io/make-room


# --- the checks --------------------------------------------------------------------------------------
def pending_in_scope(command: Command, ctx: Context) -> RefusedError | None:
    pod = ctx.pending(command.record)
    if pod is None:
        return None
    why = ctx.scope.room_for.refuses(pod, ctx.live.namespaces)
    if why is not None:
        return RefusedError(Refusal.OUT_OF_SCOPE, f"makeroom does not make room for {pod.key}: {why}")
    if pod.annotations.get(MAKE_ROOM, "").strip().lower() in _OFF:
        return RefusedError(Refusal.MAKE_ROOM_OFF, f"{pod.key} opts out of relocation")
    return None


def within_budget(command: Command, ctx: Context) -> RefusedError | None:
    record = command.record
    if isinstance(record, Relocation):
        limit = ctx.config.max_moves_in_flight
    elif isinstance(record, Keeping):
        limit = ctx.config.headroom.max_moves_per_hour
    else:
        limit = ctx.config.consolidation.max_moves
    if len(record.victims) > limit:
        return RefusedError(Refusal.OVER_BUDGET, f"{len(record.victims)} pods to move, at most {limit}")
    for workload, surge in record.surge.items():
        mine = sum(1 for v in record.victims if v.workload == workload)
        if surge.by != mine or mine == 0:
            return RefusedError(
                Refusal.OVER_BUDGET, f"{workload} surged by {surge.by} for {mine} pod(s) to move"
            )
    return None


def victim_still_fits_the_record(command: Command, ctx: Context) -> RefusedError | None:
    """For each pod still to move: on the record's node, of the record's workload, movable, in scope,
    below the pending pod."""
    record = command.record
    one = command.action in (Action.MARK, Action.EVICT)
    targets = [v for v in record.victims if not one or v.pod == command.target]
    pending = ctx.pending(record)
    # the cooldown was the plan's to judge
    rules = Policy(now=ctx.live.now, cooldown=0.0, move_jobs_in=frozenset(ctx.config.move_jobs_in))
    for victim in targets:
        pod = ctx.state.pods.get(victim.pod)
        if pod is None or pod.terminating or pod.node != victim.node:
            continue  # gone already: nothing left to do to it
        if victim.node != record.node and not _same_group(ctx.state, record, victim.node):
            return RefusedError(
                Refusal.OWNER_CHANGED, f"{victim.pod} is on {victim.node}, not on {record.node}"
            )
        if pod.workload != victim.workload:
            return RefusedError(
                Refusal.OWNER_CHANGED, f"{victim.pod} belongs to {pod.workload}, not to {victim.workload}"
            )
        why = ctx.scope.move.refuses(pod, ctx.live.namespaces)
        if why is not None:
            return RefusedError(Refusal.OUT_OF_SCOPE, f"makeroom may not move {pod.key}: {why}")
        reason = not_movable(pod, rules)
        if reason is not None:
            return RefusedError(Refusal.NOT_MOVABLE, f"{pod.key} may not move: {reason.why}")
        if pending is not None and pod.priority >= pending.priority:
            return RefusedError(
                Refusal.NOT_LOWER_PRIORITY,
                f"{pod.key} has priority {pod.priority}, not below {pending.key}'s {pending.priority}",
            )
    return None


def scalable(command: Command, ctx: Context) -> RefusedError | None:
    """A surge scales a Deployment (by owner references) that no other controller scales."""
    workload = command.target
    w = ctx.state.workloads.get(workload)
    if w is None:
        return RefusedError(Refusal.NOT_A_DEPLOYMENT, f"{workload} is gone")
    if w.replicas_owner is not None:
        return RefusedError(Refusal.REPLICAS_OWNED, f"{w.replicas_owner} sets the replicas of {workload}")
    for victim in command.record.victims:
        if victim.workload != workload:
            continue
        pod = ctx.state.pods.get(victim.pod)
        if pod is None or pod.terminating:
            continue
        owner = ctx.cluster.deployment_of(victim.pod)
        if owner != workload:
            return RefusedError(
                Refusal.NOT_A_DEPLOYMENT,
                f"{victim.pod} is not controlled by the Deployment {workload}"
                + (f" but by {owner}" if owner else ""),
            )
    return None


def replicas_unchanged(command: Command, ctx: Context) -> RefusedError | None:
    """The replicas are those the record saw (before the surge) or those it set (after): anything
    else is someone else's change (an operator, a new HPA), which makeroom never reverts."""
    surge = command.record.surge.get(command.target)
    w = ctx.state.workloads.get(command.target)
    if surge is None or w is None:
        return None
    if w.replicas not in (surge.base, surge.base + surge.by):
        return RefusedError(
            Refusal.REPLICAS_CHANGED,
            f"{command.target} has {w.replicas} replicas; makeroom surged it from {surge.base}",
        )
    return None


def surges_still_ours(command: Command, ctx: Context) -> RefusedError | None:
    """While a record surges its workloads, each still has the replicas the record saw or set, and
    no other controller took its replicas over (a new HPA): makeroom then stops, and never scales it
    back against that controller."""
    record = command.record
    if record.phase is not Phase.HOLDING:
        return None
    for workload, surge in record.surge.items():
        w = ctx.state.workloads.get(workload)
        if w is None:
            continue  # gone: nothing to scale back (its pods go with it)
        if w.replicas_owner is not None:
            return RefusedError(Refusal.REPLICAS_OWNED, f"{w.replicas_owner} sets the replicas of {workload}")
        if w.replicas not in (surge.base, surge.base + surge.by):
            return RefusedError(
                Refusal.REPLICAS_CHANGED,
                f"{workload} has {w.replicas} replicas; makeroom surged it from {surge.base}",
            )
    return None


def surge_not_taken(command: Command, ctx: Context) -> RefusedError | None:
    """No other record under way surges the workload (one owner of a workload's surge at a time)."""
    owner = ctx.live.records.surge_owners_but(command.record).get(command.target)
    if owner is not None:
        return RefusedError(Refusal.SURGE_TAKEN, f"{command.target} is surged for {owner} already")
    return None


def reservation_ours(command: Command, ctx: Context) -> RefusedError | None:
    """The pending pod is held on the record's node, or on none yet: never on another."""
    pod = ctx.pending(command.record)
    if pod is None or pod.node is not None or pod.nominated_node in (None, command.record.node):
        return None
    return RefusedError(
        Refusal.RESERVATION_LOST,
        f"{pod.key} is nominated to {pod.nominated_node}, not to {command.record.node}",
    )


def somewhere_to_go(command: Command, ctx: Context) -> RefusedError | None:
    """Before replacements are asked for (a surge) or a pod is evicted without one (evict): room on
    another node the pod may use, a node coming up with room, or a group it may use that may grow (a
    new node of the group the pending pod needs is never taken), once the pods already waiting (an
    earlier eviction's replacement, another surge's) and the replacements before it have theirs."""
    record = command.record
    if command.action is Action.EVICT and not (
        isinstance(record, Relocation) and record.strategy is Strategy.EVICT
    ):
        return None  # migrate and consolidation evict only once the replacements are Ready
    targets = [
        v
        for v in record.victims
        if (v.workload == command.target if command.action is Action.SURGE else v.pod == command.target)
    ]
    leaving: list[Pod] = []
    for victim in targets:
        pod = ctx.state.pods.get(victim.pod)
        if pod is not None and not pod.terminating and pod.node == victim.node:
            leaving.append(pod)
    held = ctx.state.nodes.get(record.node)
    needed = held.group if held is not None and isinstance(record, Relocation) else None
    stuck = room_for_replacements(
        ctx.state, leaving, not_node=record.node, not_group=needed, skip=(record.subject,)
    )
    if stuck is not None:
        return RefusedError(Refusal.NO_DESTINATION, f"{stuck.key} has nowhere to go")
    return None


def _same_group(state: ClusterState, record: Record, node: str) -> bool:
    """A headroom move's pods leave several nodes of one group (the record names the first)."""
    if not isinstance(record, Keeping):
        return False
    first, other = state.nodes.get(record.node), state.nodes.get(node)
    return first is not None and other is not None and first.group == other.group


CHECKS: tuple[tuple[frozenset[Action], Check], ...] = (
    (frozenset(Action), pending_in_scope),
    (frozenset(Action), within_budget),
    (frozenset({Action.HOLD, Action.MARK, Action.SURGE, Action.EVICT}), victim_still_fits_the_record),
    (frozenset({Action.HOLD}), reservation_ours),
    (frozenset({Action.HOLD}), surges_still_ours),
    (frozenset({Action.SURGE}), scalable),
    (frozenset({Action.SURGE}), replicas_unchanged),
    (frozenset({Action.SURGE}), surge_not_taken),
    (frozenset({Action.SURGE, Action.EVICT}), somewhere_to_go),
)
"""Each check with the actions it guards. HOLD is checked once per tick for the whole record."""


class Validator:
    def __init__(self, config: ControllerConfig, scope: Scope, cluster: Cluster) -> None:
        self.config, self.scope, self.cluster = config, scope, cluster
        self.live: Live | None = None

    def see(self, live: Live) -> None:
        """The cluster of this tick, against which the commands are checked."""
        self.live = live

    def check(self, command: Command) -> None:
        """Raise RefusedError when the command must not run."""
        assert self.live is not None, "see() the cluster first"
        ctx = Context(self.config, self.scope, self.cluster, self.live)
        for actions, check in CHECKS:
            if command.action in actions:
                refused = check(command, ctx)
                if refused is not None:
                    raise refused

    def record(self, record: Record) -> None:
        """The whole record, once per tick before anything of it is carried on."""
        self.check(Command(Action.HOLD, record, record.subject))


__all__ = ["CHECKS", "Action", "Command", "Live", "Refusal", "RefusedError", "Validator"]
