"""What every search reads while it plans, and the room a plan claims as it goes.

``Context`` is read-only for one plan: the cluster view, the policy, the budgets, and which pods may
move at all. ``Ledger`` is the plan's working copy of the room: the free-room matrix it claims from,
the new nodes it adds, the pods it moved and the nodes they leave or reach. Room claimed for one pod is
never handed out again; the ClusterState itself is never changed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from makeroom.model import AutoscalerKind, Pod, PodSpec
from makeroom.model.objects import MAKE_ROOM
from makeroom.model.resources import Vector
from makeroom.model.state import Mask
from makeroom.model.view import ClusterView
from makeroom.planner.budgets import Budgets
from makeroom.planner.buying import Purchase, grows_instead, rivals, would_buy
from makeroom.planner.options import NewNode, Option
from makeroom.planner.rules import not_movable
from makeroom.planner.types import NotMovable, Policy

_OFF = ("false", "no", "0", "off")


def wants_room(pod: Pod) -> bool:
    """Whether makeroom may move pods for this pending pod (it may unless the pod opts out)."""
    return pod.annotations.get(MAKE_ROOM, "true").strip().lower() not in _OFF


@dataclass(slots=True)
class Context:
    view: ClusterView
    policy: Policy
    budgets: Budgets
    _movable: dict[str, NotMovable | None] = field(default_factory=dict)
    _none: Mask | None = None
    # the last move a constraint that looks at other pods refused where room was (planner/destinations)
    blocked: str = ""

    def movable(self, pod: Pod) -> NotMovable | None:
        """Why the pod may not be a victim now (None: it may, if its priority is low enough)."""
        key = pod.key
        if key not in self._movable:
            self._movable[key] = not_movable(pod, self.policy, self.budgets)
        return self._movable[key]

    def req(self, spec: PodSpec) -> Vector:
        return self.view.state.requests_of(spec)

    def upcoming(self, spec: PodSpec) -> Mask:
        """Upcoming nodes the spec may use, unless the policy keeps plans off them."""
        if self.policy.use_upcoming_nodes:
            return self.view.upcoming_fit(spec)
        if self._none is None:
            self._none = np.zeros(len(self.view.state.alive), dtype=np.bool_)
        return self._none

    def price(self, group: str) -> float:
        return self.view.state.groups[group].price_per_hour

    def buy(
        self, spec: PodSpec, allowed: Collection[str], sizes: Mapping[str, int], avoid: Collection[str] = ()
    ) -> Purchase | None:
        """The new node the autoscaler would add for a pod of this spec (planner/buying.py); ``avoid``:
        for a moved pod, the groups of the pending pod it makes room for."""
        return would_buy(self.view, spec, allowed, sizes, avoid, self.policy.expander)

    def grows_instead(
        self, spec: PodSpec, group: str, avoid: Collection[str], sizes: Mapping[str, int]
    ) -> bool:
        """Whether the autoscaler might grow one of ``avoid`` instead of ``group`` for a moved pod of
        this spec (planner/buying.py)."""
        return grows_instead(self.view, spec, group, avoid, sizes, self.policy.expander)

    def rivals(self, spec: PodSpec, group: str, avoid: Collection[str]) -> list[str]:
        """The groups of ``avoid`` the autoscaler might grow instead of ``group`` for a moved pod of
        this spec while they may grow (planner/buying.py)."""
        return rivals(self.view, spec, group, avoid, self.policy.expander)

    def sources(self, spec: PodSpec, sizes: Mapping[str, int]) -> list[str]:
        """The groups a new node for a pod of this spec may come from: any it may use, for the
        cluster-autoscaler (a search picks); only the pool Karpenter would launch it in, under
        Karpenter."""
        if self.view.state.autoscaler is not AutoscalerKind.KARPENTER:
            return self.view.groups_for(spec)
        bought = self.buy(spec, list(self.view.state.groups), sizes)
        return [] if bought is None else [bought.group]

    def cheapest(self, groups: list[str]) -> str:
        """The group a new node is bought from: the cheapest, then the most preferred."""
        rank = self.view.group_rank
        return min(groups, key=lambda g: (self.price(g), rank[g]))


@dataclass(slots=True)
class Ledger:
    free: Vector  # the plan's working copy of free room per node
    group_size: dict[str, int]
    new_nodes: list[NewNode] = field(default_factory=list)
    moved: set[str] = field(default_factory=set)  # keys of pods the plan moves
    sources: set[int] = field(default_factory=set)  # nodes pods leave: they take no moved pod
    targets: set[int] = field(default_factory=set)  # nodes moved pods reach: they give up none
    moves: int = 0
    # per-spec facts that depend on the room left, valid until the next claim (see ``touch``)
    rooms: dict[PodSpec, npt.NDArray[np.intp]] = field(default_factory=dict)
    capacity: dict[PodSpec, tuple[int, npt.NDArray[np.int64]]] = field(default_factory=dict)

    @staticmethod
    def start(ctx: Context, pending: list[Pod]) -> Ledger:
        """The room before any claim: the cluster's free room after holds, except the holds of the
        pods being planned (a plan decides afresh where they go)."""
        view = ctx.view
        free = view.free.copy()
        for pod in pending:
            held = view.holds.get(pod.key)
            if held is not None:
                free[held[0]] += ctx.req(pod.spec)
        return Ledger(free, dict(view.group_size))

    def copy(self) -> Ledger:
        return Ledger(
            self.free.copy(),
            dict(self.group_size),
            [nn.copy() for nn in self.new_nodes],
            set(self.moved),
            set(self.sources),
            set(self.targets),
            self.moves,
        )

    def touch(self) -> None:
        """Forget the per-spec facts: room was claimed."""
        self.rooms.clear()
        self.capacity.clear()

    def add_new_node(
        self, ctx: Context, group: str, for_victims: bool, bought: Purchase | None = None
    ) -> NewNode:
        index = sum(1 for nn in self.new_nodes if nn.group == group)
        if bought is None:
            nn = NewNode(group, index, ctx.view.template(group).copy(), for_victims)
        else:
            nn = NewNode(group, index, bought.capacity.copy(), for_victims, bought.capacity, bought.price)
        self.new_nodes.append(nn)
        self.group_size[group] += 1
        return nn

    # --- claims ----------------------------------------------------------------------------------
    def claim_slot(self, slot: int, req: Vector) -> None:
        self.free[slot] -= req
        self.touch()

    def claim_relocation(self, ctx: Context, option: Option, req: Vector) -> None:
        """The option's victims leave its node for their destinations, and the pod takes the room."""
        slot = option.slot
        for v in option.victims:
            self.free[slot] += ctx.req(v.spec)
            self.moved.add(v.key)
        self.free[slot] -= req
        known = len(self.new_nodes)
        for nn in option.new_nodes[known:]:
            self.group_size[nn.group] += 1
        self.new_nodes = option.new_nodes
        for v, dest in zip(option.victims, option.dests, strict=True):
            if dest.slot >= 0:
                self.free[dest.slot] -= ctx.req(v.spec)
                self.targets.add(dest.slot)
        if option.victims:
            self.sources.add(slot)
        self.moves += len(option.victims)
        self.touch()
