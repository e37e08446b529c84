"""Headroom: room for GPU pods kept free on their nodes ahead of demand (docs/headroom.md).

A target asks for room for ``count`` pods of one shape in one group. This pass counts how many such
pods fit on the group's nodes now (the scheduler's filters, after every hold), and when that is below
the target, picks CPU-only pods (pods that request no accelerator) on one of the group's nodes whose
leaving restores the room, and where each goes: free room on nodes of groups without accelerators
first, else a new node of such a group whose price fits the cap, but only where the autoscaler's
expander would grow that group for the moved pod rather than one the keeper may not use
(consolidation's placement and rule, ``planner.consolidate.place``). Never a GPU node for a CPU pod,
never a pod a budget, a cooldown or the admin's scope holds. Pure: the state is never changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from makeroom.model import Expander, Node, OwnerKind, Pod, PodSpec, Resources, Toleration
from makeroom.model.resources import GPU_RESOURCES, Vector
from makeroom.model.state import ClusterState
from makeroom.model.view import ClusterView
from makeroom.planner.budgets import Budgets
from makeroom.planner.consolidate import Shift, by_group, new_nodes_text, place
from makeroom.planner.rules import not_movable
from makeroom.planner.types import Policy


@dataclass(frozen=True, slots=True)
class Wanted:
    """One headroom target: room for ``count`` pods in ``group``, of the largest GPU workload of
    ``priority_class`` or of ``workload`` (its key, or ``namespace/name``), or of ``requests``."""

    name: str
    group: str
    count: int
    priority_class: str = ""
    workload: str = ""
    requests: Resources | None = None


@dataclass(frozen=True, slots=True)
class KeepPolicy:
    now: float = 0.0
    cooldown: float = 600.0  # the controller's: a pod moved less than this long ago stays
    recently_moved: frozenset[str] = frozenset()  # pod keys in cooldown
    pinned: frozenset[str] = frozenset()  # pod keys the controller forbids to move
    cooling: frozenset[str] = frozenset()  # workloads moved to keep room within the headroom cooldown
    budget: int = 10  # moves left within the hour
    max_price_per_hour: float = 0.0  # a new CPU node only when its price is at most this
    move_jobs_in: frozenset[str] = frozenset()
    expander: Expander = Expander.LEAST_WASTE  # the cluster-autoscaler's, which grows a group for a moved pod


@dataclass(frozen=True, slots=True)
class RoomCount:
    """A target as the cluster has it now: room for ``free`` of the ``wanted`` pods, ``possible`` at
    most were every CPU-only pod gone from the group's nodes."""

    name: str
    group: str
    whom: str  # the shape's source: a workload, or "requests"
    wanted: int
    free: int
    possible: int
    holding: tuple[str, ...] = ()  # the group's nodes with room for at least one such pod now


@dataclass(frozen=True, slots=True)
class KeepMove:
    """CPU-only pods leaving nodes of ``group`` so that ``gain`` more of the target's pods fit."""

    target: str
    group: str
    shifts: tuple[Shift, ...]
    scale_ups: dict[str, int] = field(default_factory=dict)
    price_per_hour: float = 0.0
    gain: int = 0

    @property
    def nodes(self) -> list[str]:
        """The GPU nodes the pods leave, in order."""
        return sorted({s.pod.node for s in self.shifts if s.pod.node is not None})

    def why(self) -> str:
        added = new_nodes_text(self.scale_ups)
        return (
            f"moving {len(self.shifts)} CPU-only pod(s) off {', '.join(self.nodes)} ({self.group}) "
            f"with {added} "
            f"keeps room for {self.gain} more pod(s) of headroom target {self.target}"
        )


@dataclass(frozen=True, slots=True)
class Kept:
    """The outcome for one target: its count, the move that restores its room (if any), and why
    there is none when the room is short."""

    count: RoomCount
    move: KeepMove | None = None
    why_not: str = ""


def gpu_group(state: ClusterState, group: str) -> bool:
    g = state.groups.get(group)
    return g is not None and any(it.capacity.requests_gpu() for it in g.types())


def default_targets(state: ClusterState) -> list[Wanted]:
    """Without a configured target: in each group with accelerators, room for one pod of the
    highest-priority GPU workload whose pods its nodes would take (the largest on a tie)."""
    view = ClusterView(state)
    out = []
    # The first of them by rank that a group's nodes take: asking the view of each workload (its
    # pod-affinity filters) would cost a tenth of a second a round on the DLRM trace.
    ranked = sorted(
        (w for w in state.workloads.values() if w.spec.requests.requests_gpu()),
        key=lambda w: (w.spec.priority, _size(w.spec.requests), w.name),
        reverse=True,
    )
    for group in sorted(state.groups):
        if not gpu_group(state, group):
            continue
        top = next((w for w in ranked if view.admits(w.spec, group)), None)
        if top is not None:
            out.append(Wanted(f"{group}.{top.name}".lower().replace("/", "."), group, 1, workload=top.name))
    return out


def _size(requests: Resources) -> tuple[int, ...]:
    return (sum(requests[g] for g in GPU_RESOURCES), requests["cpu"], requests["memory"])


def shape(state: ClusterState, wanted: Wanted) -> tuple[PodSpec, str] | None:
    """The pod the target keeps room for, and where its shape comes from; None when no GPU workload
    matches (the target then holds nothing: there is nobody to keep room for yet)."""
    if wanted.requests is not None:
        group = state.groups.get(wanted.group)
        # A pod of given requests tolerates its group's taints: room is counted on the group's nodes.
        tolerations = (
            tuple(Toleration(t.key, "Exists", "", t.effect.value) for t in group.taints) if group else ()
        )
        return PodSpec(requests=wanted.requests, tolerations=tolerations), "requests"
    if wanted.priority_class:
        matching = [
            w
            for w in state.workloads.values()
            if w.spec.requests.requests_gpu() and w.spec.priority_class == wanted.priority_class
        ]
    else:
        matching = []
    if wanted.workload:
        # Named by its key or by namespace/name: looked up, not searched for (a round counts every
        # target, and a trace's cluster holds thousands of workloads).
        by_key = state.workloads.get(wanted.workload)
        name = wanted.workload.partition("/")[2]
        by_name = state.workloads.get(name)
        for w in (by_key, by_name):
            if w is None or w in matching or not w.spec.requests.requests_gpu():
                continue
            if w is by_key or f"{w.namespace}/{w.name}" == wanted.workload:
                matching.append(w)
    if not matching:
        return None
    top = max(matching, key=lambda w: (_size(w.spec.requests), w.name))
    return top.spec, top.name


def _fit_count(req: Vector, room: Vector) -> int:
    asked = req > 0
    if not asked.any():
        return 0
    return int(max(0, np.min(room[asked] // req[asked])))


def _fit_counts(req: Vector, rooms: Vector) -> Vector:
    """``_fit_count`` of each row of ``rooms``."""
    asked = req > 0
    if not asked.any():
        return np.zeros(len(rooms), dtype=np.int64)
    fits: Vector = np.maximum(0, (rooms[:, asked] // req[asked]).min(axis=1))
    return fits


def _movable(state: ClusterState, pod: Pod, rules: Policy, budgets: Budgets, policy: KeepPolicy) -> bool:
    if pod.spec.requests.requests_gpu() or pod.owner_kind == OwnerKind.DAEMON_SET:
        return False
    w = state.workloads.get(pod.workload) if pod.workload is not None else None
    if w is None or w.replicas_owner is not None or pod.workload in policy.cooling:
        return False  # make-before-break: only what a surge can replace, and not again too soon
    return not_movable(pod, rules, budgets) is None


def keep_room(
    state: ClusterState, wanted: Wanted, policy: KeepPolicy, view: ClusterView | None = None
) -> Kept:
    """The target's count and, when its room is short, the move of CPU-only pods off its group's
    nodes that restores it (nodes where the fewest and smallest moves free the most room first)."""
    view = view if view is not None and not view.stale else ClusterView(state)
    found = shape(state, wanted)
    if found is None:
        return Kept(
            RoomCount(wanted.name, wanted.group, "nobody", wanted.count, 0, 0),
            None,
            "no GPU workload matches",
        )
    spec, whom = found
    req = state.requests_of(spec)
    rules = Policy(
        now=policy.now,
        cooldown=policy.cooldown,
        recently_moved=policy.recently_moved,
        pinned=policy.pinned,
        make_before_break=True,
        move_jobs_in=policy.move_jobs_in,
    )
    admits = view.static(spec)
    group_nodes = [n for n in state.nodes_of(wanted.group) if admits[state.slot_of[n.name]]]
    room = view.free[np.array([state.slot_of[n.name] for n in group_nodes], dtype=np.intp)]
    cpu_pods = [
        [p for p in state.pods_on[n.name].values() if not p.spec.requests.requests_gpu()] for n in group_nodes
    ]
    cpu_only = np.zeros_like(room)
    for i, on in enumerate(cpu_pods):
        for p in on:
            if not p.terminating:
                cpu_only[i] += state.requests_of(p.spec)
    fit_now = _fit_counts(req, room)
    free = int(fit_now.sum())
    possible = int(_fit_counts(req, room + cpu_only).sum())
    holding = tuple(n.name for n, f in zip(group_nodes, fit_now, strict=True) if f > 0)
    count = RoomCount(wanted.name, wanted.group, whom, wanted.count, free, possible, holding)
    short = min(wanted.count, possible) - free
    if short <= 0:
        why = "" if free >= wanted.count else f"the group can hold at most {possible} such pod(s)"
        return Kept(count, None, why)
    if policy.budget <= 0:
        return Kept(count, None, "the hourly limit of moves to keep room is reached")
    # Which pods may move is asked only when the room is short: the rules read budgets and owners,
    # and most rounds find the room kept (a month of the DLRM trace asks this some 50,000 times).
    budgets = Budgets(state)
    nodes = []  # (node, free count, count with its movable CPU-only pods gone, those pods)
    for i, node in enumerate(group_nodes):
        movable = [p for p in cpu_pods[i] if _movable(state, p, rules, budgets, policy)]
        freed = sum((state.requests_of(p.spec) for p in movable), np.zeros_like(room[i]))
        nodes.append((node, int(fit_now[i]), _fit_count(req, room[i] + freed), movable))
    allowed = np.zeros(len(state.alive), dtype=np.bool_)
    for n in state.nodes.values():
        if not gpu_group(state, n.group) and not n.allocatable.requests_gpu():
            allowed[state.slot_of[n.name]] = True
    cheap = [
        g
        for g in state.groups.values()
        if not gpu_group(state, g.name) and g.price_per_hour <= policy.max_price_per_hour
    ]

    def fewest(node: Node, now_fit: int, most: int, movable: list[Pod], left: int) -> tuple[int, list[Pod]]:
        gain = min(left, most - now_fit)
        room = view.free[state.slot_of[node.name]]
        return gain, _fewest(state, req, room, movable, now_fit + gain) if gain > 0 else []

    def rank(entry: tuple[Node, int, int, list[Pod]]) -> tuple[int, int, float, str]:
        # The most room first (the fewest nodes), then the fewest pods moved, then the least room
        # they take on the CPU nodes.
        gain, pods = fewest(*entry, short)
        return -gain, len(pods), sum(_share(state, p) for p in pods), entry[0].name

    chosen: list[Pod] = []
    gained = 0
    for entry in sorted(nodes, key=rank):
        gain, pods = fewest(*entry, short - gained)
        if gain <= 0:
            continue
        chosen += pods
        gained += gain
    if not chosen:
        return Kept(count, None, "no CPU-only pod on its nodes may move now (budgets, cooldowns, scope)")
    if len(chosen) > policy.budget:
        why = f"restoring the room needs {len(chosen)} moves; {policy.budget} left this hour"
        return Kept(count, None, why)
    # A moved pod that waits for a new CPU node is the autoscaler's to place: should its expander grow
    # a GPU group (or a CPU group dearer than the cap) instead, the pod lands on a GPU node again and
    # the room is bought, not kept. The rule consolidation follows, through the same search.
    names = {g.name for g in cheap}
    others = [g for g in state.groups if g not in names]
    placed = place(state, view, chosen, allowed, cheap, others, policy.expander)
    if placed is None:
        why = (
            "no room for its CPU-only pods on CPU nodes, and no new CPU node within "
            f"max_price_per_hour {policy.max_price_per_hour:g}"
        )
        if place(state, view, chosen, allowed, cheap) is not None:  # only the expander stands in the way
            why = (
                "a new CPU node would take its CPU-only pods, but the autoscaler's "
                f"{policy.expander.value} expander might grow another group for them instead"
            )
        return Kept(count, None, why)
    shifts, new_nodes = placed
    price = sum(g.price_per_hour for g in new_nodes)
    move = KeepMove(wanted.name, wanted.group, tuple(shifts), by_group(new_nodes), price, gained)
    return Kept(count, move, "")


def _fewest(state: ClusterState, req: Vector, room: Vector, movable: list[Pod], goal: int) -> list[Pod]:
    """The fewest of the pods whose leaving lets ``goal`` pods of ``req`` fit in ``room``, and of as
    many the smallest: each pod moved takes room on the CPU nodes for as long as the kept room stays
    free (the taint keeps CPU pods off it), so freeing more than the target needs is paid for in CPU
    nodes."""
    size = {p.key: _share(state, p) for p in movable}
    chosen: list[Pod] = []
    freed = room.copy()
    for p in sorted(movable, key=lambda p: (-size[p.key], p.key)):  # largest first: the fewest
        if _fit_count(req, freed) >= goal:
            break
        chosen.append(p)
        freed = freed + state.requests_of(p.spec)
    for p in sorted(chosen, key=lambda p: (size[p.key], p.key)):
        if _fit_count(req, freed - state.requests_of(p.spec)) >= goal:
            chosen.remove(p)
            freed = freed - state.requests_of(p.spec)
    # Then each chosen pod for the smallest one left out whose leaving does as well.
    for p in sorted(chosen, key=lambda p: (-size[p.key], p.key)):
        without = freed - state.requests_of(p.spec)
        for q in sorted((q for q in movable if q not in chosen), key=lambda q: (size[q.key], q.key)):
            if size[q.key] >= size[p.key]:
                break
            if _fit_count(req, without + state.requests_of(q.spec)) >= goal:
                chosen[chosen.index(p)] = q
                freed = without + state.requests_of(q.spec)
                break
    return chosen


def _share(state: ClusterState, pod: Pod) -> float:
    """How much of its node a pod takes: its requests over the node's allocatable, summed over the
    resources (a core and a gibibyte weigh by how much of the node they are, not by their units)."""
    if pod.node is None:  # never: the pods that may move are on the target's nodes
        return 0.0
    alloc = state.alloc[state.slot_of[pod.node]]
    return float((state.requests_of(pod.spec)[alloc > 0] / alloc[alloc > 0]).sum())
