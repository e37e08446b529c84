"""Headroom: room for GPU pods kept free ahead of demand (docs/headroom.md).

Each round with nothing waiting and nothing relocating, every target is counted (planner.keep_room)
and its ``KeptRoom`` record says what room it holds and for whom. When a target's room is short, the
CPU-only pods that hold it move off its GPU nodes make-before-break, as a consolidation's do (a
``Keeping`` record by target: surge, deletion cost, evict within budgets, scale back). While the
replacements come up, those nodes carry ``makeroom.io/headroom:NoSchedule`` (as a consolidation's node
does), so that a replacement waits for the CPU room planned for it rather than take the room back;
then, and on every node that holds kept room, ``makeroom.io/headroom:PreferNoSchedule``, so that
kube-scheduler's TaintToleration score steers CPU pods elsewhere while a GPU pod still lands. The
moves of the last hour and each workload's cooldown are kept in the target's record, so that a new
leader honours them.
"""

from __future__ import annotations

import logging

from makeroom.controller.config import RoomTarget
from makeroom.controller.port import BuffersUnavailableError
from makeroom.controller.reasons import ObjectKind, Reason
from makeroom.controller.records import HEADROOM_TAINT, Keeping, KeptRoom, Phase, RecordKind, Records, Victim
from makeroom.controller.steps import Retry, RetryKey, Steps
from makeroom.controller.validate import Action, Live, RefusedError
from makeroom.model import Node, OwnerKind, Pod, Resources, Taint, TaintEffect
from makeroom.model.state import ClusterState
from makeroom.model.view import ClusterView
from makeroom.planner.keep_room import KeepPolicy, Kept, Wanted, default_targets, gpu_group, keep_room

log = logging.getLogger("makeroom.controller")

TAINT = Taint(HEADROOM_TAINT, "", TaintEffect.PREFER_NO_SCHEDULE)
MOVING_TAINT = Taint(HEADROOM_TAINT, "", TaintEffect.NO_SCHEDULE)
HOUR = 3600.0
KEEP_ANCHOR = "headroom/"


def keep_anchor(target: str) -> str:
    return KEEP_ANCHOR + target


def wanted_of(target: RoomTarget) -> Wanted:
    requests = Resources(dict(target.requests)) if target.requests else None
    return Wanted(target.name, target.group, target.count, target.priority_class, target.workload, requests)


class Keepers:
    def __init__(self, steps: Steps) -> None:
        self.s = steps
        self._buffer: tuple[str, Resources, int] | None = None  # the buffer last asked for
        self._defaults: tuple[ClusterState, tuple[object, ...], list[Wanted]] | None = None

    def targets(self, state: ClusterState) -> list[Wanted]:
        configured = self.s.config.headroom.targets
        if configured:
            return [wanted_of(t) for t in configured]
        # The default targets weigh every GPU workload against every group (a tenth of a second on
        # the DLRM trace, twice a round): kept while the same state holds the same specs and pods.
        key = (state.generation, state.node_generation, *(w.spec for w in state.workloads.values()))
        cached = self._defaults
        if cached is not None and cached[0] is state and _same(cached[1], key):
            return list(cached[2])
        found = default_targets(state)
        self._defaults = (state, key, found)
        return list(found)

    @staticmethod
    def active(records: Records) -> list[tuple[str, Keeping | None]]:
        return sorted(records.keepings.items())

    def _window(self) -> float:
        return max(HOUR, self.s.config.headroom.cooldown)

    def moved(self, records: Records, now: float, target: str | None = None) -> list[tuple[float, str]]:
        """The pods moved to keep room still counted, one (when, workload) each: within the hour (the
        limit) or the cooldown; of every target, or of ``target`` only."""
        return sorted(
            m
            for name, r in records.headroom.items()
            if r is not None and target in (None, name)
            for m in r.moved
            if now - m[0] < self._window()
        )

    def keep(self, live: Live, records: Records) -> str | None:
        """Count every target, record what it holds, and start the move that restores the first
        short one (one move under way at a time). Returns the target a move started for."""
        state, now = live.state, live.now
        config = self.s.config.headroom
        moved = self.moved(records, now)
        policy = KeepPolicy(
            now=now,
            cooldown=self.s.config.cooldown,
            recently_moved=self.s.cooling(state, records, now),
            pinned=self.s.pinned(state, records, live.namespaces),
            cooling=frozenset(w for at, w in moved if now - at < config.cooldown),
            budget=config.max_moves_per_hour - sum(1 for at, _ in moved if now - at < HOUR),
            max_price_per_hour=config.max_price_per_hour,
            move_jobs_in=frozenset(self.s.config.move_jobs_in),
            expander=self.s.config.autoscaler_expander,
        )
        busy = bool(records.keepings)
        started: str | None = None
        # One view of the cluster for every target (a fleet of GPU groups has a target each); a move
        # or a taint changes the state, and the next target is counted on a fresh view.
        view = ClusterView(state)
        for wanted in self.targets(state):
            view = view if not view.stale else ClusterView(state)
            kept = keep_room(state, wanted, policy, view)
            move = kept.move if not busy and started is None else None
            if move is not None and self.s.waiting(RetryKey.skipped_target(wanted.name), now):
                move = None  # given up lately: left alone a cooldown
            own = self.moved(records, now, wanted.name)
            self._record(records, kept, own, moving=move is not None or busy)
            if move is None:
                self._protect(state, kept.count.holding, records)
                continue
            victims = [Victim(s.pod.key, s.workload, s.pod.node or "") for s in move.shifts]
            record = Keeping(
                node=move.nodes[0],
                started=now,
                deadline=now + self.s.config.timeout,
                victims=victims,
                since=now,
                surge=self.s.plan_surges(state, victims, self.s.scalable(state, victims)),
                why=move.why(),
                target=wanted.name,
            )
            self.s.save(record)
            fresh = own + [(now, v.workload) for v in victims if v.workload is not None]
            self._record(records, kept, fresh, moving=True)
            for node in move.nodes:
                self.s.event(ObjectKind.NODE, node, Reason.KEEPING_ROOM, move.why())
            log.info("keeping room", extra={"nodes": move.nodes, "target": wanted.name})
            self.advance(state, wanted.name, record, now, [])
            started = wanted.name
        return started

    def forget(self, records: Records, targets: set[str], now: float) -> None:
        """The record of a target no longer kept (the top GPU workload of a default target changed,
        a configured one went), once none of its moves counts against the hourly limit or a
        cooldown: so that the store does not grow with every target there ever was."""
        for name, record in list(records.headroom.items()):
            if name not in targets and (record is None or not self.moved(records, now, name)):
                self.s.act(self.s.cluster.delete_record, RecordKind.HEADROOM, name)
                del records.headroom[name]

    def _protect(self, state: ClusterState, nodes: tuple[str, ...], records: Records) -> None:
        """The PreferNoSchedule taint on each node that holds kept room (not on those a move under
        way holds NoSchedule)."""
        moving = {v.node for r in records.keepings.values() if r is not None for v in r.victims}
        for name in nodes:
            node = state.nodes.get(name)
            if node is not None and name not in moving:
                self._set_taint(node, TAINT)

    def _set_taint(self, node: Node, taint: Taint, record: Keeping | None = None) -> None:
        """The headroom taint of ``taint``'s effect on the node (the other effect replaced)."""
        mine = [t for t in node.taints if t.key == HEADROOM_TAINT]
        if mine and all(t.effect is taint.effect for t in mine):
            return
        if mine:
            self.s.act(self.s.cluster.untaint_node, node.name, HEADROOM_TAINT)
        if record is not None:
            self.s.gated(Action.TAINT, record, node.name, self.s.cluster.taint_node, node.name, taint)
        else:
            self.s.act(self.s.cluster.taint_node, node.name, taint)

    def _record(self, records: Records, kept: Kept, moved: list[tuple[float, str]], moving: bool) -> None:
        c = kept.count
        state = "kept" if c.free >= c.wanted else "moving" if moving else "short"
        fresh = KeptRoom(
            target=c.name,
            group=c.group,
            whom=c.whom,
            wanted=c.wanted,
            free=c.free,
            state=state,
            why=kept.why_not if state == "short" else "",
            moved=list(moved),
        )
        if records.headroom.get(c.name) != fresh:
            self.s.save(fresh)
            records.headroom[c.name] = fresh

    def advance(
        self, state: ClusterState, name: str, record: Keeping | None, now: float, waiting: list[Pod]
    ) -> None:
        if record is None:
            self.give_up(state, name, None, "its record is unreadable", now)
            return
        if now > record.deadline:
            self.give_up(state, name, record, "timed out", now)
            return
        if record.phase is Phase.HOLDING and waiting:
            # Relocation comes first: the waiting pod's cure may need these pods or their room.
            self.give_up(state, name, record, f"{len(waiting)} pod(s) wait to be scheduled", now)
            return
        try:
            self.s.validator.record(record)
            self._carry_on(state, record, now)
        except RefusedError as refused:
            self.give_up(state, name, record, f"refused: {refused}", now)

    def _carry_on(self, state: ClusterState, record: Keeping, now: float) -> None:
        anchor = keep_anchor(record.target)
        label = f"headroom {record.target}"
        nodes = [n for n in (state.nodes.get(v) for v in sorted({v.node for v in record.victims})) if n]
        holding = record.phase is Phase.HOLDING
        for node in nodes:
            self._set_taint(node, MOVING_TAINT if holding else TAINT, record)
        if record.phase is Phase.HOLDING:
            if not self.s.surge(state, record, anchor, label):
                return
            record.phase, record.since = Phase.DRAINING, now
            self.s.save(record)
            for node in nodes:  # the replacements are Ready elsewhere: GPU pods may land, CPU pods not
                self._set_taint(node, TAINT, record)
        self.s.shrink(state, record)
        if now - record.since >= 2 * self.s.config.interval:
            self.s.evict_victims(state, record, anchor, label, now)
        if not _victims_left(state, record):
            self.s.clean_victims(state, record)
            self.s.cool_down(state, record, now)
            self.s.act(self.s.cluster.delete_record, RecordKind.KEEPING, record.target)
            for left in sorted({v.node for v in record.victims}):
                self.s.event(ObjectKind.NODE, left, Reason.ROOM_KEPT, f"room kept for {record.target}")
            log.info("room kept", extra={"target": record.target})

    def give_up(self, state: ClusterState, name: str, record: Keeping | None, why: str, now: float) -> None:
        if record is not None:
            self.s.undo_moves(state, record)
            self.s.cool_down(state, record, now)
            for node in sorted({v.node for v in record.victims}):
                found = state.nodes.get(node)
                if found is not None and any(t == MOVING_TAINT for t in found.taints):
                    self.s.act(self.s.cluster.untaint_node, node, HEADROOM_TAINT)
        self.s.act(self.s.cluster.delete_record, RecordKind.KEEPING, name)
        self.s.retry[RetryKey.skipped_target(name)] = Retry(now + self.s.config.cooldown, 1)
        for node in sorted({v.node for v in record.victims}) if record is not None else ():
            if node in state.nodes:
                self.s.event(ObjectKind.NODE, node, Reason.KEEPING_STOPPED, f"stopped: {why}")
        log.info("keeping room stopped", extra={"target": name, "reason": why})

    def collect_orphans(self, state: ClusterState, records: Records, keeping: bool, now: float) -> None:
        """A headroom taint that nothing explains: where no target keeps room (the strategy changed,
        a target went), or NoSchedule with no move under way (a controller died between two
        actions), and the records of targets no longer kept (all of them when the keeper does not
        run), once their moves no longer count. ``keeping``: the keeper runs."""
        targets = self.targets(state) if keeping else []
        groups = {w.group for w in targets}

        def orphans(store: Records) -> list[str]:
            moving = {v.node for r in store.keepings.values() if r is not None for v in r.victims}
            out = []
            for node in state.nodes.values():
                mine = [t for t in node.taints if t.key == HEADROOM_TAINT]
                if not mine or node.name in moving:
                    continue
                if node.group not in groups or any(
                    t.effect is not TaintEffect.PREFER_NO_SCHEDULE for t in mine
                ):
                    out.append(node.name)
            return out

        found = orphans(records)
        if found and keeping:  # a move this round started is in the store, not in the round's first read
            found = orphans(self.s.cluster.records())
        for name in found:
            self.s.act(self.s.cluster.untaint_node, name, HEADROOM_TAINT)
        self.forget(records, {w.name for w in targets}, now)  # last: a failed call leaves taints done

    def buffer(self, state: ClusterState) -> None:
        """The CPU group's buffer for moved replicas, when ``headroom.cpu_buffer`` asks for one: room
        for that many pods of the largest CPU-only workload on the targets' GPU nodes."""
        count = self.s.config.headroom.cpu_buffer
        if count <= 0:
            return
        groups = {w.group for w in self.targets(state)}
        cpu_pods = [
            p
            for g in groups
            for n in state.nodes_of(g)
            for p in state.pods_on[n.name].values()
            if not p.spec.requests.requests_gpu() and p.owner_kind != OwnerKind.DAEMON_SET
        ]
        cpu_groups = sorted(
            (g for g in state.groups.values() if not gpu_group(state, g.name)), key=lambda g: g.price_per_hour
        )
        if not cpu_pods or not cpu_groups:
            return
        largest = max(cpu_pods, key=lambda p: (int(state.requests_of(p.spec).sum()), p.key))
        wanted = (cpu_groups[0].name, largest.spec.requests, count)
        if wanted != self._buffer:  # one call per change, not one per round
            try:
                self.s.act(self.s.cluster.keep_buffer, *wanted)
            except BuffersUnavailableError as exc:
                # No buffers here (no API, or the chart does not allow them): the room is kept by
                # moves alone. Said once (the adapter logs why); asked again only when the buffer
                # wanted changes, never retried every round as a failure.
                log.info(
                    "keeping room without a CapacityBuffer", extra={"group": wanted[0], "error": str(exc)}
                )
            self._buffer = wanted


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True))


def _victims_left(state: ClusterState, record: Keeping) -> bool:
    for v in record.victims:
        p = state.pods.get(v.pod)
        if p is not None and not p.terminating and p.node == v.node:
            return True
    return False
