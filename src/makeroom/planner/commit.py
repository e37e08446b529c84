"""From a draft to the Plan users see: placements, moves and new nodes, each with the sentence that says
why. Whatever search made the draft, the explanations are written here, the same way."""

from __future__ import annotations

import numpy as np

from makeroom.model.fit import label_fit
from makeroom.model.objects import ZONE_LABEL, Pod, PodSpec
from makeroom.model.scheduling import unzoned_groups, zone_bound
from makeroom.planner.context import Context
from makeroom.planner.options import Decision, Draft, NewNode
from makeroom.planner.types import (
    Move,
    Placement,
    PlacementReason,
    Plan,
    PlanStats,
    Unplaceable,
    UnplaceableReason,
)

# Reasons that say all there is: the pod is not planned for at all, or the search stopped short.
_FINAL = (UnplaceableReason.RELOCATION_OFF, UnplaceableReason.MOVE_LIMIT, UnplaceableReason.EXACT_LIMIT)
# Reasons where room could be made and the pods that would leave had nowhere to go.
_NOWHERE = (UnplaceableReason.NO_DESTINATION, UnplaceableReason.CONSTRAINT)


def render(ctx: Context, draft: Draft, pending: int) -> Plan:
    placements: list[Placement] = []
    moves: list[Move] = []
    unplaceable: list[Unplaceable] = []
    seen: set[int] = set()  # new nodes some earlier decision put a pod on
    unzoned = unzoned_groups(ctx.view.state) if any(d.reason is None for d in draft.decisions) else {}
    zoned_pods: _ZoneBound | None = None
    for d in draft.decisions:
        if d.reason is None:
            assert d.unplaceable is not None
            why = None
            if unzoned and d.unplaceable not in _FINAL:
                if zoned_pods is None:
                    zoned_pods = _ZoneBound(ctx, unzoned)
                why = zoned_pods.why(d.pod, victims=d.unplaceable in _NOWHERE)
            if why is not None:
                unplaceable.append(Unplaceable(d.pod, UnplaceableReason.ZONE_UNKNOWN, why))
            else:
                unplaceable.append(Unplaceable(d.pod, d.unplaceable, d.blocked))
        elif d.reason is PlacementReason.RELOCATION:
            placements.append(_relocation(ctx, draft, d, seen, moves))
        else:
            placements.append(_placement(ctx, draft, d, seen))
    scale_ups: dict[str, int] = {}
    for nn in draft.new_nodes:
        scale_ups[nn.group] = scale_ups.get(nn.group, 0) + 1
    rank = ctx.view.group_rank
    stats = PlanStats(
        moves=len(moves),
        new_nodes=len(draft.new_nodes),
        pending=pending,
        nodes_examined=draft.nodes_examined,
        exact=ctx.policy.exact,
    )
    return Plan(
        tuple(placements),
        tuple(moves),
        dict(sorted(scale_ups.items(), key=lambda kv: rank.get(kv[0], 0))),
        tuple(unplaceable),
        stats,
    )


def _placement(ctx: Context, draft: Draft, d: Decision, seen: set[int]) -> Placement:
    view = ctx.view
    if d.reason is PlacementReason.FITS_NOW:
        name = view.name(d.slot)
        return Placement(d.pod, name, None, d.reason, detail=f"fits on {name} now")
    if d.slot >= 0:
        name = view.name(d.slot)
        return Placement(
            d.pod,
            name,
            None,
            PlacementReason.NEW_NODE,
            detail=f"{name} is being provisioned and will take it",
        )
    nn = draft.new_nodes[d.new_node]
    if d.new_node in seen and not d.adds:
        detail = f"fits on new {nn.group} node #{nn.index} that this plan adds already"
    else:
        detail = f"no relocation is cheaper than a new {nn.group} node"
    seen.add(d.new_node)
    return Placement(d.pod, None, nn.group, PlacementReason.NEW_NODE, nn.index, detail=detail)


def _relocation(ctx: Context, draft: Draft, d: Decision, seen: set[int], moves: list[Move]) -> Placement:
    view = ctx.view
    node_name = view.name(d.slot)
    added: set[int] = set()
    for v, dest in zip(d.victims, d.dests, strict=True):
        if dest.slot >= 0:
            to = view.name(dest.slot)
            where = (
                f"unclaimed room on {to}"
                if view.ready[dest.slot]
                else f"room on {to}, a node being provisioned"
            )
            to_node, to_group, index = to, None, None
        else:
            nn = draft.new_nodes[dest.new_node]
            where = f"new {nn.group} node #{nn.index} (no unclaimed room elsewhere it may use)"
            to_node, to_group, index = None, nn.group, nn.index
            if dest.new_node not in seen:
                added.add(dest.new_node)
        why = f"makes room for {d.pod.name} on {node_name}; goes to {where}"
        moves.append(Move(v, v.workload, node_name, to_node, to_group, why, d.pod, index))
    seen.update(added)
    versus = (
        "a new node for it is not possible (every group it may use is at its max)"
        if d.alternative is None
        else f"a new node for it would cost ${d.alternative:.2f}/h"
    )
    cost = sum(_price(ctx, draft.new_nodes[j]) for j in added)
    landing = (
        "all to unclaimed room on other nodes"
        if not added
        else f"to {len(added)} new node(s) costing ${cost:.2f}/h"
    )
    turns = ctx.budgets.turns(d.victims)
    paced = f"; their disruption budgets let them go in {turns} turns" if turns > 1 else ""
    count = len(d.victims)
    return Placement(
        d.pod,
        node_name,
        None,
        PlacementReason.RELOCATION,
        detail=f"{count} lower-priority pod(s) move off {node_name}, {landing}; {versus}{paced}",
    )


def _price(ctx: Context, nn: NewNode) -> float:
    return ctx.price(nn.group) if nn.price is None else nn.price


class _ZoneBound:
    """Why a pod waits on a new node whose zone nobody knows: its own constraint by zone, or that of a
    lower-priority pod on a node it may use (when its pods had nowhere to go), which a new node of an
    unzoned group could take but for its zone. The running pods with such a constraint are found once
    per plan, by spec with their nodes' slots."""

    def __init__(self, ctx: Context, unzoned: dict[str, tuple[str, ...]]) -> None:
        self.view = ctx.view
        self.unzoned = unzoned
        self._group: dict[int, str | None] = {}
        slots: dict[int, list[int]] = {}
        specs: dict[int, tuple[PodSpec, str, str]] = {}
        state = self.view.state
        for spec_id, sample in state.pod_of_spec.items():
            constraint = zone_bound(sample.spec)
            if constraint is not None and (group := self.group_for(sample.spec)) is not None:
                specs[spec_id] = (sample.spec, constraint, group)
        if specs:
            for pod in state.pods.values():
                if id(pod.spec) in specs and pod.node is not None and pod.node in state.slot_of:
                    slots.setdefault(id(pod.spec), []).append(state.slot_of[pod.node])
        self.running = [
            (specs[k][0], specs[k][1], specs[k][2], np.array(v, dtype=np.intp)) for k, v in slots.items()
        ]

    def group_for(self, spec: PodSpec) -> str | None:
        """The first unzoned group a new node of which could take the spec but for its zone."""
        if id(spec) not in self._group:
            view = self.view
            found = None
            for name in self.unzoned:
                g = view.state.groups[name]
                if (
                    view.can_grow(name)
                    and label_fit(spec, g.node_labels(), g.taints) is None
                    and bool(np.all(view.template(name) >= view.state.requests_of(spec)))
                ):
                    found = name
                    break
            self._group[id(spec)] = found
        return self._group[id(spec)]

    def say(self, who: str, constraint: str, group: str) -> str:
        zones = ", ".join(self.unzoned[group])
        return (
            f"{who}{constraint} needs a new {group} node, whose zone is unknown: the group's nodes are in "
            f"zones {zones} and its template gives no {ZONE_LABEL}"
        )

    def why(self, pod: Pod, victims: bool) -> str | None:
        own = zone_bound(pod.spec)
        if own is not None and (group := self.group_for(pod.spec)) is not None:
            return self.say("", own, group)
        if not victims:
            return None
        usable = self.view.static(pod.spec)
        for spec, constraint, group, slots in self.running:
            if spec.priority < pod.priority and usable[slots].any():
                mover = next(
                    p for p in self.view.state.pods.values() if p.spec is spec and p.node is not None
                )
                return self.say(f"{mover.name} (which would move for it): ", constraint, group)
        return None
