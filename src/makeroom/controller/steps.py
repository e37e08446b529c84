"""The steps that relocation and consolidation share: marking the pods that must leave, the
make-before-break surge of their workloads, evictions within budgets, and undoing each of these.

Each step is one idempotent call through the port, decided from what the cluster shows now, so it can
be repeated after a crash. An *anchor* names what the pods leave for: a pending pod's key
(``namespace/name``) for a relocation, ``node/<name>`` for a consolidation.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from makeroom.controller.config import ControllerConfig, Strategy
from makeroom.controller.port import (
    Clock,
    Cluster,
    ClusterError,
    EvictionBlockedError,
    EvictionRefusedError,
    NotFoundError,
)
from makeroom.controller.reasons import Fallback, ObjectKind, Reason
from makeroom.controller.records import (
    PRIOR_DELETION_COST,
    VICTIM_DELETION_COST,
    Cooldown,
    Moves,
    Record,
    RecordKind,
    Records,
    Relocation,
    Stored,
    Surge,
    Victim,
)
from makeroom.controller.scope import NamespaceLabels, Scope
from makeroom.controller.validate import Action, Command, Refusal, RefusedError, Validator
from makeroom.model import DELETION_COST, VICTIM_OF, Pod
from makeroom.model.state import ClusterState

log = logging.getLogger("makeroom.controller")

NODE_ANCHOR = "node/"


def node_anchor(node: str) -> str:
    return NODE_ANCHOR + node


class Step(StrEnum):
    """The loop's own steps, each retried on its own after a failed call."""

    PLAN = "plan"  # plan for the waiting pods and start relocations
    CONSOLIDATE = "consolidate"  # look for a node to empty and start its consolidation
    ORPHANS = "orphans"  # undo the surges and marks that no record explains
    ORPHAN_TAINTS = "orphan-taints"  # remove consolidation taints that no record explains
    COOLDOWNS = "cooldowns"  # remove the cooldown records that are over
    KEEP = "keep"  # count the headroom targets and start a move that restores one's room
    BUFFER = "buffer"  # ask the autoscaler for the CPU group's buffer (headroom.cpu_buffer)
    HEADROOM_TAINTS = "headroom-taints"  # remove headroom taints where no target keeps room


class RetryKind(StrEnum):
    """What a retry (a backoff) is kept for."""

    STEP = "step"  # one of the loop's steps (Step)
    POD = "pod"  # a pod: its relocation under way, its roll-back, or its refused eviction
    CONSOLIDATION = "consolidation"  # the consolidation under way of a node
    KEEPING = "keeping"  # the moves under way that keep a headroom target's room
    SKIPPED_NODE = "skipped-node"  # a node whose consolidation was given up: left alone a cooldown
    SKIPPED_TARGET = "skipped-target"  # a headroom target whose move was given up: left a cooldown
    HANDS_OFF = "hands-off"  # a pending pod whose relocation was rolled back: left to the autoscaler


@dataclass(frozen=True, slots=True)
class RetryKey:
    kind: RetryKind
    name: str

    @classmethod
    def step(cls, step: Step) -> RetryKey:
        return cls(RetryKind.STEP, step.value)

    @classmethod
    def pod(cls, key: str) -> RetryKey:
        return cls(RetryKind.POD, key)

    @classmethod
    def consolidation(cls, node: str) -> RetryKey:
        return cls(RetryKind.CONSOLIDATION, node)

    @classmethod
    def keeping(cls, target: str) -> RetryKey:
        return cls(RetryKind.KEEPING, target)

    @classmethod
    def skipped_node(cls, node: str) -> RetryKey:
        return cls(RetryKind.SKIPPED_NODE, node)

    @classmethod
    def skipped_target(cls, target: str) -> RetryKey:
        return cls(RetryKind.SKIPPED_TARGET, target)

    @classmethod
    def hands_off(cls, pod: str) -> RetryKey:
        return cls(RetryKind.HANDS_OFF, pod)


@dataclass(slots=True)
class Retry:
    at: float
    attempts: int


@dataclass(slots=True)
class TickReport:
    """What one reconciliation did, for logs, metrics and tests."""

    started: list[str] = field(default_factory=list)
    """Pending pods for which a relocation started."""
    done: list[str] = field(default_factory=list)
    """Pending pods bound after their relocation."""
    rolled_back: list[str] = field(default_factory=list)
    """Pending pods whose relocation was rolled back."""
    consolidating: list[str] = field(default_factory=list)
    """Nodes whose consolidation started."""
    consolidated: list[str] = field(default_factory=list)
    """Nodes emptied for the autoscaler to remove."""
    consolidation_stopped: list[str] = field(default_factory=list)
    """Nodes whose consolidation was given up."""
    relocation_plan_seconds: float | None = None
    """Wall-clock seconds the planner took for the waiting pods, if it ran."""
    consolidation_plan_seconds: float | None = None
    """Wall-clock seconds the search for a node to consolidate took, if it ran."""
    moves: int = 0
    """Pods marked to leave their node (victims): each move counted once, when it is decided."""
    evictions: int = 0
    """Victims evicted through the Eviction API."""
    fallbacks: list[tuple[str, Fallback]] = field(default_factory=list)
    """Victims of a make-before-break move evicted before a replacement of theirs was Ready, and why."""
    futile: list[str] = field(default_factory=list)
    """Pending pods found to be beyond any relocation's help (reported once, not planned for again)."""
    zone_unknown: list[str] = field(default_factory=list)
    """Pending pods a plan left waiting on a new node whose zone is unknown (each reported once)."""
    waiting_for_surge: list[str] = field(default_factory=list)
    """Pending pods whose relocation waits for another's surge of the same workload to end."""
    actions: int = 0
    errors: int = 0


class Steps:
    def __init__(
        self, cluster: Cluster, clock: Clock, config: ControllerConfig, scope: Scope | None = None
    ) -> None:
        self.cluster = cluster
        self.clock = clock
        self.config = config
        self.scope = scope or Scope()
        self.validator = Validator(config, self.scope, cluster)
        self.retry: dict[RetryKey, Retry] = {}
        self.cooldowns: dict[str, Cooldown] = {}  # workload -> its cooldown, from the store
        self.report = TickReport()

    # --- plumbing ------------------------------------------------------------------------------
    def act(self, verb: Callable[..., None], *args: object) -> None:
        """One call through the port: an action boundary, where a controller may die."""
        verb(*args)
        self.report.actions += 1

    def gated(
        self, action: Action, record: Record, target: str, verb: Callable[..., None], *args: object
    ) -> None:
        """An action of a record, re-checked against the live cluster just before it is sent: a
        refusal raises RefusedError, and the caller rolls the whole record back."""
        self.validator.check(Command(action, record, target))
        self.act(verb, *args)

    def save(self, record: Stored) -> None:
        """The record, in makeroom's own store: written before the actions it describes."""
        self.act(self.cluster.save_record, record)

    def event(self, kind: ObjectKind, key: str, reason: Reason, message: str) -> None:
        try:
            self.cluster.emit_event(kind, key, reason, message)
        except ClusterError as exc:  # an event is worth a log line, never a failed step
            log.warning("event not recorded", extra={"object": key, "error": str(exc)})

    def back_off(self, key: RetryKey, now: float) -> float:
        retry = self.retry.get(key)
        attempts = retry.attempts + 1 if retry else 1
        wait = min(self.config.max_backoff, self.config.backoff * 2.0 ** (attempts - 1))
        self.retry[key] = Retry(now + wait, attempts)
        return float(wait)

    def waiting(self, key: RetryKey, now: float) -> bool:
        retry = self.retry.get(key)
        return retry is not None and retry.at > now

    def skipped_nodes(self, state: ClusterState, now: float) -> frozenset[str]:
        """The nodes whose consolidation was given up less than a cooldown ago (read off the retries,
        not asked of every node: a round in a large cluster has few)."""
        return frozenset(
            key.name
            for key, retry in self.retry.items()
            if key.kind is RetryKind.SKIPPED_NODE and retry.at > now and key.name in state.nodes
        )

    def guarded(self, what: RetryKey, step: Callable[..., object], *args: object) -> None:
        """Run a step; a failed cluster call is logged and the step retried after a backoff."""
        if self.waiting(what, self.clock.now()):
            return
        try:
            step(*args)
        except ClusterError as exc:
            self.report.errors += 1
            wait = self.back_off(what, self.clock.now())
            log.warning(
                "step failed; retrying", extra={"object": what.name, "error": str(exc), "wait_s": wait}
            )
        else:
            self.retry.pop(what, None)

    # --- the pods that leave -------------------------------------------------------------------
    def mark_victim(
        self, state: ClusterState, record: Record, victim: Victim, anchor: str, label: str, lowest_cost: bool
    ) -> None:
        p = state.pods.get(victim.pod)
        if p is None or p.terminating or p.annotations.get(VICTIM_OF) == anchor:
            return
        changes: dict[str, str | None] = {VICTIM_OF: anchor}
        if lowest_cost:
            changes[DELETION_COST] = VICTIM_DELETION_COST
            if DELETION_COST in p.annotations:
                changes[PRIOR_DELETION_COST] = p.annotations[DELETION_COST]
        try:
            self.gated(Action.MARK, record, victim.pod, self.cluster.annotate_pod, victim.pod, changes)
        except NotFoundError:
            return  # gone since the snapshot was taken (a cache a little behind): nothing to mark
        self.report.moves += 1
        self.event(
            ObjectKind.POD, victim.pod, Reason.MOVING, f"moving off {victim.node} to make room for {label}"
        )

    def scalable(self, state: ClusterState, victims: list[Victim]) -> set[str]:
        """The victims' workloads that a surge may scale: no other controller sets their replicas, and
        each is the Deployment that controls its victims by owner references (never by name)."""
        out = set()
        for workload in {v.workload for v in victims if v.workload is not None}:
            w = state.workloads.get(workload)
            if w is None or w.replicas_owner is not None:
                continue
            if all(self.cluster.deployment_of(v.pod) == workload for v in victims if v.workload == workload):
                out.add(workload)
        return out

    def pinned(self, state: ClusterState, records: Records, namespaces: NamespaceLabels) -> frozenset[str]:
        """Pods no new plan may move: outside the admin's scope, moving for a record under way, or of a
        workload that a record surges now."""
        surging = records.surging()
        held = {p.key for p in state.pods.values() if p.workload in surging} if surging else set()
        return self.scope.move.outside(state.pods, namespaces) | records.moving() | held

    @staticmethod
    def others_ready(state: ClusterState, workload: str, victims: set[str]) -> int:
        """Ready pods of the workload other than the victims: what a surge waits for."""
        return sum(
            1
            for p in state.pods.values()
            if p.workload == workload and p.ready and not p.terminating and p.key not in victims
        )

    def plan_surges(self, state: ClusterState, victims: list[Victim], scalable: set[str]) -> dict[str, Surge]:
        """The surge of each workload of ``scalable`` with victims: by its victims, from the replicas
        it has now, done once that many more Ready pods than it has now (the victims aside) are up."""
        by: dict[str, int] = {}
        for v in victims:
            if v.workload is not None and v.workload in scalable:
                by[v.workload] = by.get(v.workload, 0) + 1
        keys = {v.pod for v in victims}
        return {
            w: Surge(by=n, base=state.workloads[w].replicas, need_ready=self.others_ready(state, w, keys) + n)
            for w, n in by.items()
        }

    def surge(self, state: ClusterState, record: Record, anchor: str, label: str) -> bool:
        """Scale each victim's workload up by its victims, the victims given the lowest deletion
        cost; True once every replacement is Ready (make-before-break)."""
        victims = {v.pod for v in record.victims}
        ready = True
        for workload, surge in record.surge.items():
            w = state.workloads.get(workload)
            if w is None:
                continue
            for v in record.victims:
                if v.workload == workload:
                    self.mark_victim(state, record, v, anchor, label, lowest_cost=True)
            if w.replicas == surge.base:
                self.gated(
                    Action.SURGE, record, workload, self.cluster.scale, workload, surge.base + surge.by
                )
            elif w.replicas != surge.base + surge.by:
                raise RefusedError(
                    Refusal.REPLICAS_CHANGED,
                    f"{workload} has {w.replicas} replicas; makeroom surged it from {surge.base}",
                )
            ready = ready and self.others_ready(state, workload, victims) >= surge.need_ready
        return ready

    def shrink(self, state: ClusterState, record: Moves) -> None:
        """Back to the replicas wanted; the ReplicaSet removes the victims first, for their deletion
        cost is the lowest."""
        for workload, surge in record.surge.items():
            self.undo_surge(state, record, workload, surge)

    def evict_victims(self, state: ClusterState, record: Record, anchor: str, label: str, now: float) -> None:
        make_before_break = not (isinstance(record, Relocation) and record.strategy is Strategy.EVICT)
        for victim in record.victims:
            p = state.pods.get(victim.pod)
            retry = RetryKey.pod(victim.pod)
            if p is None or p.terminating or p.node != victim.node or self.waiting(retry, now):
                continue
            if not make_before_break:
                # migrate and consolidation marked their victims when they surged
                self.mark_victim(state, record, victim, anchor, label, lowest_cost=False)
            fallback = self.fallback(state, record, victim) if make_before_break else None
            try:
                self.gated(Action.EVICT, record, victim.pod, self.cluster.evict, victim.pod)
            except EvictionBlockedError:
                wait = self.back_off(retry, now)
                log.info(
                    "eviction refused by its budget; retrying", extra={"pod": victim.pod, "wait_s": wait}
                )
                continue
            except EvictionRefusedError as exc:
                raise RefusedError(Refusal.EVICTION_REFUSED, f"{victim.pod}: {exc}") from exc
            except NotFoundError:
                continue
            self.retry.pop(retry, None)
            self.report.evictions += 1
            self.event(ObjectKind.POD, victim.pod, Reason.EVICTED, f"evicted to make room for {label}")
            if fallback is not None:
                self.report.fallbacks.append((victim.pod, fallback))
                self.event(
                    ObjectKind.POD,
                    victim.pod,
                    Reason.FELL_BACK_TO_EVICTION,
                    f"evicted within its budget before a replacement was Ready: {fallback.why}",
                )
                log.warning(
                    "make-before-break fell back to eviction",
                    extra={"pod": victim.pod, "why": fallback.value},
                )

    def fallback(self, state: ClusterState, record: Record, victim: Victim) -> Fallback | None:
        """Why evicting this victim of a make-before-break move would break before it makes (None when
        a replacement of its is Ready: the workload keeps its Ready replicas without it)."""
        w = state.workloads.get(victim.workload) if victim.workload is not None else None
        if w is None:
            return Fallback.NO_WORKLOAD
        if victim.workload not in record.surge:
            if w.replicas_owner is not None:
                return Fallback.REPLICAS_OWNED
            return Fallback.NOT_A_DEPLOYMENT
        if self.others_ready(state, victim.workload, {victim.pod}) >= w.replicas:
            return None
        return Fallback.NOT_REPLACED

    # --- undoing -------------------------------------------------------------------------------
    def undo_moves(self, state: ClusterState, record: Moves) -> None:
        """Unmark the victims still there and shrink every surged workload back: the common end of
        a release, a roll-back and a consolidation given up."""
        self.clean_victims(state, record)
        self.shrink(state, record)

    def clean_victims(self, state: ClusterState, record: Moves) -> None:
        for victim in record.victims:
            p = state.pods.get(victim.pod)
            if p is not None and not p.terminating:
                self.unmark(p)

    def unmark(self, p: Pod) -> None:
        changes: dict[str, str | None] = {}
        if VICTIM_OF in p.annotations:
            changes[VICTIM_OF] = None
        if p.annotations.get(DELETION_COST) == VICTIM_DELETION_COST:
            changes[DELETION_COST] = p.annotations.get(PRIOR_DELETION_COST)
            changes[PRIOR_DELETION_COST] = None
        if changes:
            self.act(self.cluster.annotate_pod, p.key, changes)

    def undo_surge(self, state: ClusterState, record: Moves, workload: str, surge: Surge) -> None:
        """Back to the replicas before the surge, only if nobody changed them since (and only by what
        the record's own victims account for: a record that says more is not makeroom's)."""
        w = state.workloads.get(workload)
        if w is None or w.replicas != surge.base + surge.by or surge.by == 0:
            return
        live = self.validator.live
        owner = live.records.surge_owners_but(record).get(workload) if live is not None else None
        if owner is not None:  # another record's surge now: never scaled back from under it
            log.warning(
                "surge not undone: another record surges it", extra={"workload": workload, "for": owner}
            )
            return
        if w.replicas_owner is not None:
            # an HPA (or the like) took the replicas over meanwhile: its count now, not makeroom's
            log.warning(
                "surge not undone: another controller sets the replicas now",
                extra={"workload": workload, "owner": w.replicas_owner},
            )
            return
        if surge.by != sum(1 for v in record.victims if v.workload == workload):
            log.warning("surge not undone: it does not match its victims", extra={"workload": workload})
            return
        self.act(self.cluster.scale, workload, surge.base)

    def collect_orphans(
        self, state: ClusterState, live: set[str], marked: list[Pod], limit: int | None = None
    ) -> None:
        """Victim marks that no record explains (a controller died between two actions, or a tenant
        wrote them): removed, at most ``limit`` a call, taken in turn from each namespace so that one
        tenant's thousands of marks neither take the whole round nor hold back another's; with a
        ``limit`` (a round's), each only on its namespace's turn (``may_tidy``), else in a later round.
        Without one (``makeroom cleanup``, before an uninstall), all of them now."""
        orphans = [p for p in marked if p.annotations.get(VICTIM_OF) not in live and not p.terminating]
        for p in fair_share(orphans, limit):
            if limit is None or self.cluster.may_tidy(p.namespace):
                self.unmark(p)

    # --- the cooldown ------------------------------------------------------------------------------
    def see(self, records: Records) -> None:
        """The cooldowns as the store has them this round (the store is the truth: a new leader reads
        the same)."""
        self.cooldowns = {w: c for w, c in records.cooldowns.items() if c is not None}

    def cooling(self, state: ClusterState, records: Records, now: float) -> frozenset[str]:
        """Pods that a relocation brought up (the replacements) stay put for the cooldown: those a
        relocation under way brought up so far, and those its cooldown record names once it ended.
        (A consolidation's replacements are not held for a pod that waits: relocation comes first.)"""
        out: set[str] = set()
        for record in records.relocations.values():
            if record is not None:
                for pods in replacements(state, record).values():
                    out |= pods
        for c in self.cooldowns.values():
            if now < c.until:
                out.update(c.pods)
        return frozenset(out)

    def cool_down(self, state: ClusterState, record: Moves, now: float) -> None:
        """At the end of a record (done, rolled back, given up): a cooldown naming the pods its moves
        brought up, so that they stay put for ``cooldown`` from now, whichever replica leads then.
        Written before the record is removed (what a fresh controller resumes)."""
        for workload, brought_up in sorted(replacements(state, record, left_only=True).items()):
            pods, until = set(brought_up), now + self.config.cooldown
            old = self.cooldowns.get(workload)
            if old is not None and now < old.until:
                pods |= set(old.pods)
                until = max(until, old.until)
            fresh = Cooldown(workload=workload, pods=sorted(pods), until=until)
            if fresh != old:
                self.save(fresh)
                self.cooldowns[workload] = fresh

    def sweep_cooldowns(self, records: Records, now: float) -> None:
        """Cooldowns that are over (or unreadable) are removed from the store."""
        for workload, c in records.cooldowns.items():
            if c is None or now >= c.until:
                self.act(self.cluster.delete_record, RecordKind.COOLDOWN, workload)
                self.cooldowns.pop(workload, None)


def fair_share(pods: list[Pod], limit: int | None) -> list[Pod]:
    """Up to ``limit`` of the pods, one of each namespace in turn (namespaces and pods in name order,
    so a round is the same whatever the cache's order)."""
    by_namespace: dict[str, list[Pod]] = {}
    for p in sorted(pods, key=lambda p: p.key):
        by_namespace.setdefault(p.namespace, []).append(p)
    queues = [by_namespace[ns] for ns in sorted(by_namespace)]
    out: list[Pod] = []
    depth = 0
    while queues and (limit is None or len(out) < limit):
        for queue in queues:
            if depth < len(queue) and (limit is None or len(out) < limit):
                out.append(queue[depth])
        queues = [q for q in queues if len(q) > depth + 1]
        depth += 1
    return out


def replacements(state: ClusterState, record: Moves, left_only: bool = False) -> dict[str, set[str]]:
    """The pods a record's moves brought up, by workload: the newest pods of each workload with
    victims, created since the record started, as many as it has victims (``left_only``: victims
    that left). Creation times are to the second on a real cluster, and pods made before the record
    may share its second; the count keeps those out (they are older than the replacements)."""
    wanted: dict[str, int] = {}
    keys = {v.pod for v in record.victims}
    for v in record.victims:
        if v.workload is None:
            continue
        p = state.pods.get(v.pod)
        if left_only and p is not None and not p.terminating and p.node == v.node:
            continue
        wanted[v.workload] = wanted.get(v.workload, 0) + 1
    if not wanted:
        return {}
    since = math.floor(record.started)
    found: dict[str, list[Pod]] = {w: [] for w in wanted}
    for p in state.pods.values():
        if p.workload in found and not p.terminating and p.created_at >= since and p.key not in keys:
            found[p.workload].append(p)
    out: dict[str, set[str]] = {}
    for workload, pods in found.items():
        pods.sort(key=lambda p: (p.created_at, p.seq, p.name), reverse=True)
        if pods:
            out[workload] = {p.key for p in pods[: wanted[workload]]}
    return out
