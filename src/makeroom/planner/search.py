"""The relocation planner: for each pending pod, highest priority first, the cheapest way to make room.

Everything works on one copy of the cluster's free-room matrix (``alloc - used``, minus the room that
nominated pods hold), which the plan claims as it goes, so that room taken for one pending pod or one
moved pod is never handed out twice. The ClusterState itself is never changed.

For a pending pod P that no Ready node takes now, the planner weighs:
- A, what the autoscaler would buy for P without relocation: room on a node being provisioned or on a
  new node this plan already adds (free), else a new node of the cheapest group P may use within max;
- B, relocation: on a Ready node P may use, a set of lower-priority movable pods whose leaving makes P
  fit, each with a destination (unclaimed room on another node it may use, or a new node of a group it
  may use within max, never of a group P could use).
B wins only when its new nodes cost less than A's. Among relocations: the fewest and cheapest new
nodes, then the fewest victims, then the lowest victim priorities (highest, then sum), then the fewest
workloads touched, then the order in which candidate nodes were examined.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from makeroom.model import Node, Pod, PodSpec, Taint
from makeroom.model.fit import label_fit, static_fit
from makeroom.model.objects import MAKE_ROOM
from makeroom.model.resources import DEFAULT_MAX_PODS, PODS, Vector
from makeroom.model.state import ClusterState, Mask
from makeroom.planner.buying import new_node_takes, would_buy
from makeroom.planner.rules import not_movable
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

Key = tuple[float, int, int, int, int, int]
_INF_KEY: Key = (float("inf"), 1 << 30, 1 << 30, 1 << 62, 1 << 62, 1 << 30)


@dataclass(slots=True)
class NewNode:
    """A node this plan adds (not in the cluster yet): its group and the room left on it."""

    group: str
    index: int  # 0-based among the plan's new nodes of this group
    free: Vector
    for_victims: bool  # added for moved pods (False: for a pending pod itself)


@dataclass(frozen=True, slots=True)
class Dest:
    """Where one victim goes: a node slot, an existing new node of the plan, or a fresh new node."""

    slot: int = -1  # >= 0: a node of the cluster (Ready, or upcoming)
    new_node: int = -1  # >= 0: position in the working list of new nodes
    group: str = ""


@dataclass(slots=True)
class Option:
    """One way to give P room: relocation on ``slot``, or a new node (slot -1)."""

    slot: int
    victims: list[Pod]
    dests: list[Dest]
    new_nodes: list[NewNode]  # the working list of new nodes after this option (copies)
    cost: float
    added: int  # new nodes this option adds
    key: Key = _INF_KEY


@dataclass(slots=True)
class _Klass:
    """Pods on one node that are interchangeable as victims: same workload and same spec."""

    workload: str | None
    spec: PodSpec
    pods: list[Pod]
    req: Vector
    priority: int


@dataclass(slots=True)
class _Outcome:
    options: int = 0
    room_possible: bool = False  # some node could fit P if its movable pods left
    destination_failed: bool = False
    move_limited: bool = False
    exact_gave_up: bool = False


class ExactLimitError(Exception):
    """Exact search went past its step limit."""


@dataclass(slots=True)
class Planner:
    state: ClusterState
    policy: Policy
    free: Vector = field(init=False)
    ready: Mask = field(init=False)
    upcoming: Mask = field(init=False)
    group_rank: dict[str, int] = field(init=False)
    slot_rank: npt.NDArray[np.int64] = field(init=False)
    group_size: dict[str, int] = field(init=False)
    new_nodes: list[NewNode] = field(default_factory=list)
    moved: set[str] = field(default_factory=set)
    placements: list[Placement] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    unplaceable: list[Unplaceable] = field(default_factory=list)
    nodes_examined: int = 0
    _movable: dict[str, NotMovable | None] = field(default_factory=dict)
    _admits: dict[tuple[PodSpec, str], bool] = field(default_factory=dict)
    _template: dict[str, Vector] = field(default_factory=dict)
    _upcoming_mask: dict[PodSpec, Mask] = field(default_factory=dict)
    _rooms: dict[PodSpec, npt.NDArray[np.intp]] = field(default_factory=dict)
    _held: dict[str, int] = field(default_factory=dict)
    _hopeless: dict[tuple[PodSpec, int], UnplaceableReason] = field(default_factory=dict)
    _static: dict[PodSpec, Mask] = field(default_factory=dict)
    _capacity: dict[PodSpec, tuple[npt.NDArray[np.intp], npt.NDArray[np.int64]]] = field(default_factory=dict)
    _sig: npt.NDArray[np.int64] = field(init=False)
    _sig_nodes: list[Node] = field(default_factory=list)
    _labels: dict[str, npt.NDArray[np.int64]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        state = self.state
        n = len(state.alive)
        self.free = state.free()
        self.group_rank = {name: i for i, name in enumerate(state.groups)}
        others = len(self.group_rank)
        at = state.node_at
        self.ready = np.fromiter((nd is not None and nd.ready for nd in at), dtype=np.bool_, count=n)
        ranks = self.group_rank
        self.slot_rank = np.fromiter(
            (others if nd is None else ranks.get(nd.group, others) for nd in at), dtype=np.int64, count=n
        )
        counts = np.bincount(self.slot_rank[state.alive], minlength=others + 1)
        self.group_size = {name: int(counts[i]) for name, i in ranks.items()}
        # nodes alike for static_fit (readiness, cordon, taints): a spec is checked once per kind
        by_id: dict[tuple[bool, bool, int], int] = {}
        by_value: dict[tuple[bool, bool, tuple[Taint, ...]], int] = {}
        sig = [-1] * n
        for slot, nd in enumerate(at):
            if nd is None:
                continue
            fast = (nd.ready, nd.unschedulable, id(nd.taints))
            kind = by_id.get(fast)
            if kind is None:
                value = (nd.ready, nd.unschedulable, nd.taints)
                kind = by_value.get(value)
                if kind is None:
                    kind = by_value[value] = len(self._sig_nodes)
                    self._sig_nodes.append(nd)
                by_id[fast] = kind
            sig[slot] = kind
        self._sig = np.array(sig, dtype=np.int64)
        self.upcoming = state.alive & ~self.ready
        for node_name, held in state.nominated.items():
            slot = state.slot_of[node_name]
            for pod in held.values():
                if pod.node is None and not pod.terminating:
                    self.free[slot] -= state.requests_of(pod.spec)
                    self._held[pod.key] = slot

    # --- small cached facts --------------------------------------------------------------------
    def label_codes(self, key: str) -> npt.NDArray[np.int64]:
        """Per slot, a code for the node's value of one label (0: no such label or no node)."""
        codes = self._labels.get(key)
        if codes is None:
            values: dict[str, int] = {}
            codes = np.fromiter(
                (
                    0
                    if nd is None or key not in nd.labels
                    else values.setdefault(nd.labels[key], len(values) + 1)
                    for nd in self.state.node_at
                ),
                dtype=np.int64,
                count=len(self.state.node_at),
            )
            self._labels[key] = codes
        return codes

    def static(self, spec: PodSpec) -> Mask:
        """Ready nodes whose labels, taints and cordon admit the spec (static_fit), computed once
        per distinct (readiness, cordon, taints) of the nodes and values of the labels the spec's
        selectors read, instead of once per node."""
        mask = self._static.get(spec)
        if mask is not None:
            return mask
        keys = sorted({k for k, _ in spec.node_selector} | {r.key for t in spec.required_affinity for r in t})
        if not keys:
            ok = np.array([static_fit(spec, node) is None for node in self._sig_nodes] + [False])
            mask = ok[self._sig] & self.ready
        else:
            slots = np.flatnonzero(self.ready)
            rows = np.stack([self._sig[slots]] + [self.label_codes(k)[slots] for k in keys], axis=1)
            kinds, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
            ok = np.empty(len(kinds), dtype=np.bool_)
            for i, j in enumerate(first):
                node = self.state.node_at[int(slots[j])]
                assert node is not None
                ok[i] = static_fit(spec, node) is None
            mask = np.zeros(len(self.state.alive), dtype=np.bool_)
            mask[slots] = ok[inverse.reshape(-1)]
        self._static[spec] = mask
        return mask

    def movable(self, pod: Pod) -> NotMovable | None:
        if pod.key not in self._movable:
            self._movable[pod.key] = not_movable(pod, self.policy)
        return self._movable[pod.key]

    def template(self, group: str) -> Vector:
        vec = self._template.get(group)
        if vec is None:
            g = self.state.groups[group]
            cap = dict(g.capacity)
            cap.setdefault(PODS, DEFAULT_MAX_PODS * 1000)
            vec = self.state.index.vector({k: v for k, v in cap.items() if k in self.state.index.names})
            self._template[group] = vec
        return vec

    def admits(self, spec: PodSpec, group: str) -> bool:
        """Could a new node of the group take a pod of this spec (labels, taints and size)?"""
        key = (spec, group)
        ok = self._admits.get(key)
        if ok is None:
            ok = new_node_takes(self.state, self.state.groups[group], spec)
            self._admits[key] = ok
        return ok

    def can_grow(self, group: str) -> bool:
        return self.group_size[group] < self.state.groups[group].max

    def upcoming_mask(self, spec: PodSpec) -> Mask:
        mask = self._upcoming_mask.get(spec)
        if mask is None:
            mask = np.zeros(len(self.state.alive), dtype=np.bool_)
            if self.policy.use_upcoming_nodes:
                for slot in np.flatnonzero(self.upcoming):
                    node = self.state.node_at[int(slot)]
                    assert node is not None
                    mask[slot] = not node.unschedulable and label_fit(spec, node.labels, node.taints) is None
            self._upcoming_mask[spec] = mask
        return mask

    # --- the plan --------------------------------------------------------------------------------
    def run(self, pending: Iterable[Pod]) -> Plan:
        state = self.state
        todo = [p for p in pending if p.node is None and not p.terminating and p.key not in self.policy.skip]
        todo.sort(key=lambda p: (-p.priority, p.created_at, p.seq, p.key))
        for pod in todo:
            state.requests_of(pod.spec)  # widen the index now, before any vector is taken
        for pod in todo:
            self.plan_for(pod)
        scale_ups: dict[str, int] = {}
        for nn in self.new_nodes:
            scale_ups[nn.group] = scale_ups.get(nn.group, 0) + 1
        stats = PlanStats(
            moves=len(self.moves),
            new_nodes=len(self.new_nodes),
            pending=len(todo),
            nodes_examined=self.nodes_examined,
            exact=self.policy.exact,
        )
        return Plan(
            tuple(self.placements),
            tuple(self.moves),
            dict(sorted(scale_ups.items(), key=lambda kv: self.group_rank.get(kv[0], 0))),
            tuple(self.unplaceable),
            stats,
        )

    def plan_for(self, pod: Pod) -> None:
        state = self.state
        req = state.requests_of(pod.spec)
        held = self._held.pop(pod.key, None)
        if held is not None:
            self.free[held] += req
        self._rooms.clear()
        self._capacity.clear()
        static = self.static(pod.spec)
        fits = static & np.all(self.free >= req, axis=1)
        if fits.any():
            slot = held if held is not None and fits[held] else self._first(fits)
            self.free[slot] -= req
            name = self._name(slot)
            self.placements.append(
                Placement(pod, name, None, PlacementReason.FITS_NOW, detail=f"fits on {name} now")
            )
            return
        p_groups = [g for g in state.groups if self.admits(pod.spec, g)]
        own = self.own_room(pod, req, p_groups)
        outcome = _Outcome()
        best: Option | None = None
        known = self._hopeless.get((pod.spec, pod.priority))
        if known is not None:
            # an earlier pod of the same spec and priority found no relocation; room has only been
            # claimed since, so this one would not find one either
            if own is not None:
                self.commit_own(pod, req, own)
            else:
                self.unplaceable.append(Unplaceable(pod, known))
            return
        # preemptionPolicy Never only stops the scheduler's preemption: makeroom's relocation gives
        # every victim a destination, so it is exactly what such a pod is waiting for.
        if wants_room(pod):
            best = self.best_relocation(pod, req, static, set(p_groups), outcome)
        if best is not None and (own is None or (best.cost, best.added) < (own.cost, own.added)):
            self.commit_relocation(pod, req, best, own)
        elif own is not None:
            self.commit_own(pod, req, own)
        else:
            reason = self.why_not(pod, req, static, p_groups, outcome)
            if reason != UnplaceableReason.EXACT_LIMIT:
                self._hopeless[(pod.spec, pod.priority)] = reason
            self.unplaceable.append(Unplaceable(pod, reason))

    def why_not(
        self, pod: Pod, req: Vector, static: Mask, p_groups: list[str], outcome: _Outcome
    ) -> UnplaceableReason:
        if outcome.exact_gave_up:
            return UnplaceableReason.EXACT_LIMIT
        could_ever = static & np.all(self.state.alloc >= req, axis=1)
        if not p_groups and not could_ever.any():
            return UnplaceableReason.NO_COMPATIBLE_NODE
        if not wants_room(pod):
            return UnplaceableReason.RELOCATION_OFF
        if outcome.move_limited:
            return UnplaceableReason.MOVE_LIMIT
        if outcome.destination_failed:
            return UnplaceableReason.NO_DESTINATION
        return UnplaceableReason.NO_ROOM_TO_MAKE

    def _first(self, mask: Mask) -> int:
        slots = np.flatnonzero(mask)
        order = np.lexsort((slots, self.slot_rank[slots]))
        return int(slots[order[0]])

    def _name(self, slot: int) -> str:
        node = self.state.node_at[slot]
        assert node is not None
        return node.name

    # --- option A: P's own room, as the autoscaler would give it --------------------------------
    def own_room(self, pod: Pod, req: Vector, p_groups: list[str]) -> Option | None:
        up = self.upcoming_mask(pod.spec) & np.all(self.free >= req, axis=1)
        if up.any():
            return Option(self._first(up), [], [], self.new_nodes, 0.0, 0)
        for i, nn in enumerate(self.new_nodes):
            if nn.group in p_groups and np.all(nn.free >= req):
                return Option(-1, [], [Dest(new_node=i, group=nn.group)], self.new_nodes, 0.0, 0)
        bought = would_buy(self.state, pod.spec, p_groups, self.group_size, self.group_rank)
        if bought is None:
            return None
        return Option(-1, [], [Dest(group=bought.group)], self.new_nodes, bought.price, 1)

    def commit_own(self, pod: Pod, req: Vector, own: Option) -> None:
        if own.slot >= 0:
            self.free[own.slot] -= req
            name = self._name(own.slot)
            self.placements.append(
                Placement(
                    pod,
                    name,
                    None,
                    PlacementReason.NEW_NODE,
                    detail=f"{name} is being provisioned and will take it",
                )
            )
            return
        dest = own.dests[0]
        if dest.new_node >= 0:
            nn = self.new_nodes[dest.new_node]
            detail = f"fits on new {nn.group} node #{nn.index} that this plan adds already"
        else:
            bought = would_buy(self.state, pod.spec, [dest.group], self.group_size, self.group_rank)
            nn = self._add_new_node(dest.group, False, None if bought is None else bought.capacity)
            detail = f"no relocation is cheaper than a new {dest.group} node"
        nn.free = nn.free - req
        self.placements.append(
            Placement(pod, None, nn.group, PlacementReason.NEW_NODE, nn.index, detail=detail)
        )

    def _add_new_node(self, group: str, for_victims: bool, capacity: Vector | None = None) -> NewNode:
        index = sum(1 for nn in self.new_nodes if nn.group == group)
        room = self.template(group) if capacity is None else capacity
        nn = NewNode(group, index, room.copy(), for_victims)
        self.new_nodes.append(nn)
        self.group_size[group] += 1
        return nn

    # --- option B: relocation --------------------------------------------------------------------
    def candidate_slots(self, req: Vector, static: Mask) -> npt.NDArray[np.intp]:
        cand = static & np.all(self.state.alloc >= req, axis=1)
        slots = np.flatnonzero(cand)
        if len(slots) == 0:
            return slots
        deficit = np.maximum(req - self.free[slots], 0)
        score = (deficit / np.maximum(req, 1)).sum(axis=1)
        order = np.lexsort((slots, self.slot_rank[slots], score))
        result: npt.NDArray[np.intp] = slots[order]
        return result

    def best_relocation(
        self, pod: Pod, req: Vector, static: Mask, p_groups: set[str], outcome: _Outcome
    ) -> Option | None:
        best: Option | None = None
        limit = None if self.policy.exact else self.policy.max_candidates
        for slot in self.candidate_slots(req, static):
            option = self.relocate_on(pod, req, int(slot), p_groups=p_groups, outcome=outcome, best=best)
            if option is None:
                continue
            outcome.options += 1
            if best is None or option.key < best.key:
                best = option
            if limit is not None and outcome.options >= limit:
                break
        return best

    def classes_on(self, pod: Pod, slot: int) -> list[_Klass]:
        node = self.state.node_at[slot]
        assert node is not None
        by_key: dict[tuple[str | None, PodSpec], _Klass] = {}
        for other in self.state.pods_on[node.name].values():
            if other.priority >= pod.priority or other.key in self.moved or self.movable(other) is not None:
                continue
            k = (other.workload, other.spec)
            klass = by_key.get(k)
            if klass is None:
                vec = self.state.requests_of(other.spec)
                klass = _Klass(other.workload, other.spec, [], vec, other.priority)
                by_key[k] = klass
            klass.pods.append(other)
        classes = list(by_key.values())
        for klass in classes:
            klass.pods.sort(key=lambda p: p.key)
        classes.sort(key=lambda c: (c.priority, c.workload or "", c.pods[0].key))
        return classes

    def relocate_on(
        self,
        pod: Pod,
        req: Vector,
        slot: int,
        *,
        p_groups: set[str],
        outcome: _Outcome,
        best: Option | None,
    ) -> Option | None:
        self.nodes_examined += 1
        deficit = req - self.free[slot]
        need = deficit > 0
        classes = self.classes_on(pod, slot)
        if not classes:
            return None
        total = sum((c.req * len(c.pods) for c in classes), np.zeros_like(req))
        if np.any(total[need] < deficit[need]):
            return None
        outcome.room_possible = True
        if best is not None and not self.policy.exact:
            # a lower bound on victims: the largest request in each short dimension
            biggest = np.max(np.stack([c.req for c in classes]), axis=0)
            lb = int(np.max(np.ceil(deficit[need] / np.maximum(biggest[need], 1))))
            if (0.0, 0, lb) > best.key[:3]:
                return None
        if self.policy.exact:
            from makeroom.planner.exact import exact_on_node

            try:
                return exact_on_node(
                    self, slot, classes=classes, deficit=deficit, p_groups=p_groups, outcome=outcome
                )
            except ExactLimitError:
                outcome.exact_gave_up = True
                return None
        sets = victim_sets(classes, deficit, need, self.existing_capacity(classes, slot))
        chosen: Option | None = None
        for counts in sets:
            victims = [p for c, k in zip(classes, counts, strict=True) for p in c.pods[:k]]
            if not self._within_move_limit(len(victims)):
                outcome.move_limited = True
                continue
            option = self.assign(victims, slot, p_groups)
            if option is None:
                outcome.destination_failed = True
                continue
            option.key = option_key(option)
            if chosen is None or option.key < chosen.key:
                chosen = option
        return chosen

    def _within_move_limit(self, n: int) -> bool:
        limit = self.policy.max_moves_in_flight
        return limit is None or len(self.moves) + n <= limit

    def existing_capacity(self, classes: Sequence[_Klass], slot: int) -> list[int]:
        """How many pods of each class existing rooms could take (each class alone, other than slot)."""
        out = []
        for c in classes:
            cached = self._capacity.get(c.spec)
            if cached is None:
                rooms = self.rooms_for(c.spec, c.req)
                dims = c.req > 0
                per = np.min(self.free[rooms][:, dims] // c.req[dims], axis=1).clip(min=0)
                cached = self._capacity[c.spec] = (rooms, per)
            rooms, per = cached
            out.append(int(per.sum() - per[rooms == slot].sum()))
        return out

    def rooms_for(self, spec: PodSpec, r: Vector) -> npt.NDArray[np.intp]:
        """Ready and upcoming nodes that take this spec with room for one pod now, best first:
        Ready before upcoming, nodes the pending pod cannot use before those it can (by group
        order as a stand-in), then group order, then the tightest fit."""
        rooms = self._rooms.get(spec)
        if rooms is None:
            fit = np.all(self.free >= r, axis=1)
            ready = self.static(spec) & fit
            upcoming = self.upcoming_mask(spec) & fit
            slots = np.flatnonzero(ready | upcoming)
            dims = (r > 0) & (np.arange(len(r)) != self.state.index.position(PODS))
            alloc = np.maximum(self.state.alloc[slots][:, dims], 1)
            leftover = ((self.free[slots][:, dims] - r[dims]) / alloc).sum(axis=1)
            order = np.lexsort((slots, leftover, self.slot_rank[slots], ~ready[slots]))
            rooms = slots[order]
            self._rooms[spec] = rooms
        return rooms

    def assign(self, victims: list[Pod], source: int, p_groups: set[str]) -> Option | None:
        """Greedy destinations, largest victim first (by its share of the source node); when that
        needs new nodes, also largest-first by each resource the victims request, keeping the
        cheapest result."""
        reqs = [self.state.requests_of(v.spec) for v in victims]
        alloc = np.maximum(self.state.alloc[source], 1)
        orders = [
            sorted(range(len(victims)), key=lambda i: (-float((reqs[i] / alloc).sum()), victims[i].key))
        ]
        best = self.assign_in_order(victims, orders[0], source, p_groups)
        if best is not None and best.added == 0:
            return best
        if len(victims) > 1:
            for dim in np.flatnonzero(np.any(np.stack(reqs) > 0, axis=0)):
                order = sorted(range(len(victims)), key=lambda i: (-int(reqs[i][dim]), victims[i].key))
                if order in orders:
                    continue
                orders.append(order)
                option = self.assign_in_order(victims, order, source, p_groups)
                if option is not None and (
                    best is None or (round(option.cost, 9), option.added) < (round(best.cost, 9), best.added)
                ):
                    best = option
        return best

    def assign_in_order(
        self, victims: list[Pod], order: list[int], source: int, p_groups: set[str]
    ) -> Option | None:
        """Destinations in this order: existing room first (best first), then the plan's new nodes,
        then a new node of the cheapest group the victim may use, never one of a group P could use."""
        overlay: dict[int, Vector] = {}
        new_nodes = [NewNode(nn.group, nn.index, nn.free.copy(), nn.for_victims) for nn in self.new_nodes]
        sizes = dict(self.group_size)
        dests: list[Dest] = []
        cost = 0.0
        added = 0
        placed: dict[int, Dest] = {}
        for i in order:
            v = victims[i]
            r = self.state.requests_of(v.spec)
            dest = None
            for room_slot in self.rooms_for(v.spec, r):
                s = int(room_slot)
                if s == source:
                    continue
                used = overlay.get(s)
                room = self.free[s] if used is None else self.free[s] - used
                if np.all(room >= r):
                    overlay[s] = r.copy() if used is None else used + r
                    dest = Dest(slot=s)
                    break
            if dest is None:
                for j, nn in enumerate(new_nodes):
                    if nn.group not in p_groups and self.admits(v.spec, nn.group) and np.all(nn.free >= r):
                        nn.free = nn.free - r
                        dest = Dest(new_node=j, group=nn.group)
                        break
            if dest is None:
                others = [g for g in self.state.groups if g not in p_groups]
                bought = would_buy(self.state, v.spec, others, sizes, self.group_rank)
                if bought is None:
                    return None
                g = bought.group
                sizes[g] += 1
                index = sum(1 for nn in new_nodes if nn.group == g)
                new_nodes.append(NewNode(g, index, bought.capacity - r, True))
                cost += bought.price
                added += 1
                dest = Dest(new_node=len(new_nodes) - 1, group=g)
            placed[i] = dest
        dests = [placed[i] for i in range(len(victims))]
        return Option(source, victims, dests, new_nodes, cost, added)

    def commit_relocation(self, pod: Pod, req: Vector, option: Option, own: Option | None) -> None:
        slot = option.slot
        node_name = self._name(slot)
        for v in option.victims:
            self.free[slot] += self.state.requests_of(v.spec)
            self.moved.add(v.key)
        self.free[slot] -= req
        known = len(self.new_nodes)
        for nn in option.new_nodes[known:]:
            self.group_size[nn.group] += 1
        self.new_nodes = option.new_nodes
        for v, dest in zip(option.victims, option.dests, strict=True):
            r = self.state.requests_of(v.spec)
            if dest.slot >= 0:
                self.free[dest.slot] -= r
                to = self._name(dest.slot)
                where = (
                    f"unclaimed room on {to}"
                    if self.ready[dest.slot]
                    else f"room on {to}, a node being provisioned"
                )
                move = Move(v, v.workload, node_name, to, None, "", pod)
            else:
                nn = self.new_nodes[dest.new_node]
                where = f"new {nn.group} node #{nn.index} (no unclaimed room elsewhere it may use)"
                move = Move(v, v.workload, node_name, None, nn.group, "", pod, nn.index)
            why = f"makes room for {pod.name} on {node_name}; goes to {where}"
            self.moves.append(
                Move(
                    move.pod,
                    move.workload,
                    move.from_node,
                    move.to_node,
                    move.to_new_node_group,
                    why,
                    pod,
                    move.new_node_index,
                )
            )
        versus = (
            "a new node for it is not possible (every group it may use is at its max)"
            if own is None
            else f"a new node for it would cost ${own.cost:.2f}/h"
        )
        landing = (
            "all to unclaimed room on other nodes"
            if option.added == 0
            else f"to {option.added} new node(s) costing ${option.cost:.2f}/h"
        )
        count = len(option.victims)
        self.placements.append(
            Placement(
                pod,
                node_name,
                None,
                PlacementReason.RELOCATION,
                detail=f"{count} lower-priority pod(s) move off {node_name}, {landing}; {versus}",
            )
        )


def wants_room(pod: Pod) -> bool:
    """Whether makeroom may move pods for this pending pod (it may unless the pod opts out)."""
    return pod.annotations.get(MAKE_ROOM, "true").strip().lower() not in ("false", "no", "0", "off")


def option_key(option: Option) -> Key:
    prios = [v.priority for v in option.victims]
    return (
        round(option.cost, 9),
        option.added,
        len(option.victims),
        max(prios, default=0),
        sum(prios),
        len({(v.namespace, v.workload) for v in option.victims}),
    )


def _covers(sum_vec: Vector, deficit: Vector, need: Mask) -> bool:
    return bool(np.all(sum_vec[need] >= deficit[need]))


def victim_sets(
    classes: Sequence[_Klass], deficit: Vector, need: Mask, capacity: Sequence[int]
) -> list[tuple[int, ...]]:
    """Candidate victim sets (a count per class), from a few greedy orders with a reprieve pass, and
    every minimal set when the node holds few enough classes to enumerate them."""
    d = np.where(need, deficit, 0)
    dn = np.maximum(d, 1)
    cover = [float((np.minimum(c.req, d) / dn)[need].sum()) for c in classes]
    items = [(ci, k) for ci, c in enumerate(classes) for k in range(len(c.pods))]

    def costly(item: tuple[int, int]) -> bool:
        return item[1] >= capacity[item[0]]

    orders = [
        sorted(items, key=lambda it: (costly(it), classes[it[0]].priority, -cover[it[0]], it)),
        sorted(items, key=lambda it: (costly(it), -cover[it[0]], classes[it[0]].priority, it)),
        sorted(items, key=lambda it: (-cover[it[0]], classes[it[0]].priority, it)),
        sorted(items, key=lambda it: (classes[it[0]].priority, -cover[it[0]], it)),
    ]
    found: list[tuple[int, ...]] = []
    for order in orders:
        counts = [0] * len(classes)
        acc = np.zeros_like(d)
        for ci, _ in order:
            if _covers(acc, d, need):
                break
            counts[ci] += 1
            acc = acc + classes[ci].req
        if not _covers(acc, d, need):
            continue
        # reprieve: most important first (highest priority, least useful), while P still fits
        for ci in sorted(range(len(classes)), key=lambda i: (-classes[i].priority, cover[i], i)):
            while counts[ci] > 0 and _covers(acc - classes[ci].req, d, need):
                counts[ci] -= 1
                acc = acc - classes[ci].req
        t = tuple(counts)
        if t not in found:
            found.append(t)
    space = 1
    for c in classes:
        space *= len(c.pods) + 1
    if space <= 256:
        for t in minimal_sets(classes, d, need):
            if t not in found:
                found.append(t)
    return found


def minimal_sets(classes: Sequence[_Klass], d: Vector, need: Mask) -> Iterable[tuple[int, ...]]:
    """Every count vector that covers the deficit and from which no single pod can be spared."""
    ranges = [range(len(c.pods) + 1) for c in classes]
    for counts in itertools.product(*ranges):
        acc = sum((c.req * k for c, k in zip(classes, counts, strict=True)), np.zeros_like(d))
        if not _covers(acc, d, need):
            continue
        if any(k > 0 and _covers(acc - c.req, d, need) for c, k in zip(classes, counts, strict=True)):
            continue
        yield counts


def plan(state: ClusterState, policy: Policy | None = None, pending: Iterable[Pod] | None = None) -> Plan:
    """Plan room for the pending pods (all unbound, not terminating pods by default), highest
    priority first. Pure: reads ``state``, never changes it; the same input gives the same plan."""
    planner = Planner(state, policy or Policy())
    return planner.run(state.pending() if pending is None else pending)
