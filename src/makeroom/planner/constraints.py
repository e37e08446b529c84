"""Every plan checked against the filters that look at other pods (inter-pod affinity and
anti-affinity, topology spread, host ports), step by step in the order the controller carries it out.

The searches restrict where pods go by those filters against the cluster as it is (``ClusterView``),
but moves interact: moving one pod changes where another may go. So a draft is replayed: decision by
decision, each victim's replacement goes to its destination (the victim still there under
make-before-break, gone under evict), then the pending pod to its node; a step a filter refuses drops
the whole decision (nothing of it happens, and the pending pod is left unplaced, naming the constraint
that blocks). New nodes a plan adds are virtual nodes with their group's labels and a hostname of
their own. Decisions without such constraints, in a cluster without anti-affinity, cost nothing here.
"""

from __future__ import annotations

from dataclasses import replace

from makeroom.model import Pod
from makeroom.model.scheduling import Placement, refusal
from makeroom.planner.context import Context
from makeroom.planner.options import Decision, Dest, Draft, NewNode
from makeroom.planner.types import PlacementReason, UnplaceableReason
from makeroom.planner.virtual import new_node_name, virtual_nodes


def _involved(d: Decision) -> list[Pod]:
    return [*d.victims, d.pod]


def check(ctx: Context, draft: Draft) -> Draft:
    """The draft with every decision whose steps a filter refuses dropped (and new nodes only those
    decisions used pruned)."""
    state = ctx.view.state
    if not state.anti_affine and not any(
        p.spec.places_by_pods for d in draft.decisions if d.reason is not None for p in _involved(d)
    ):
        return draft
    placement = Placement(state, virtual=virtual_nodes(ctx, draft.new_nodes))
    kept: list[Decision] = []
    changed = False
    for d in draft.decisions:
        if d.reason is None:
            kept.append(d)
            continue
        trial = Placement(state, dict(placement.moved), placement.virtual)
        blocked = _replay(ctx, draft, trial, d)
        if blocked is None:
            placement = trial
            kept.append(d)
        else:
            changed = True
            kept.append(Decision(d.pod, None, unplaceable=UnplaceableReason.CONSTRAINT, blocked=blocked))
    if not changed:
        return draft
    return _prune(replace(draft, decisions=kept, proven=False, bound=None))


def _where(ctx: Context, draft: Draft, dest: Dest) -> str | None:
    if dest.slot >= 0:
        return ctx.view.name(dest.slot)
    if dest.new_node >= 0:
        return new_node_name(draft.new_nodes[dest.new_node])
    return None


def _replay(ctx: Context, draft: Draft, placement: Placement, d: Decision) -> str | None:
    """Carry out one decision on the placement; the constraint that refuses a step, else None."""
    together = ctx.policy.make_before_break
    for victim, dest in zip(d.victims, d.dests, strict=True):
        to = _where(ctx, draft, dest)
        if to is None:
            continue
        refused = refusal(placement, victim, placement.slot(to), itself=together)
        if refused is not None:
            return f"{victim.name} cannot go to {to}: {refused}"
        placement.move(victim, to)
    if d.reason is PlacementReason.NEW_NODE and d.slot < 0:
        target = new_node_name(draft.new_nodes[d.new_node]) if d.new_node >= 0 else None
    else:
        target = ctx.view.name(d.slot) if d.slot >= 0 else None
    if target is None:
        return None
    refused = refusal(placement, d.pod, placement.slot(target))
    if refused is not None:
        return f"{d.pod.name} cannot go to {target}: {refused}"
    placement.move(d.pod, target)
    return None


def _prune(draft: Draft) -> Draft:
    """Drop the new nodes no kept decision uses, renumbering the rest."""
    used: set[int] = set()
    for d in draft.decisions:
        if d.reason is None:
            continue
        if d.new_node >= 0:
            used.add(d.new_node)
        used.update(dest.new_node for dest in d.dests if dest.new_node >= 0)
    if len(used) == len(draft.new_nodes):
        return draft
    renumber: dict[int, int] = {}
    nodes: list[NewNode] = []
    per_group: dict[str, int] = {}
    for i, nn in enumerate(draft.new_nodes):
        if i in used:
            renumber[i] = len(nodes)
            index = per_group.get(nn.group, 0)
            per_group[nn.group] = index + 1
            nodes.append(NewNode(nn.group, index, nn.free, nn.for_victims, nn.capacity, nn.price))

    seen: set[int] = set()

    def moved(d: Decision) -> Decision:
        if d.reason is None:
            return d
        dests = tuple(
            replace(dest, new_node=renumber[dest.new_node]) if dest.new_node >= 0 else dest
            for dest in d.dests
        )
        seen.update(renumber[dest.new_node] for dest in d.dests if dest.new_node >= 0)
        new_node = renumber.get(d.new_node, -1)
        adds = new_node >= 0 and new_node not in seen  # the first use of a node is what adds it
        seen.add(new_node)
        return replace(d, new_node=new_node, dests=dests, adds=adds if new_node >= 0 else d.adds)

    return replace(
        draft, decisions=[moved(d) for d in draft.decisions], new_nodes=nodes, proven=False, bound=None
    )
