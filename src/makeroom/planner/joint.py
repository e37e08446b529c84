"""The default search: the per-pod heuristic's plan, then improved jointly within a budget.

The heuristic decides the pending pods one at a time, highest priority first, each on what the earlier
ones left; a choice that is best for one pod can cost the others (room a later pod needed, a new node a
later pod buys anyway, victims sent where another pod's victims had to go). The improvement is a
large-neighbourhood search on the whole plan: it takes one pod's decision out, or two pods', keeps the
others' claims, and decides the pods taken out again in both orders, the first over each of its few
best options (its own room, or a relocation on each of its best nodes), the second as the heuristic
would. A change is kept when the whole plan is better on the objective, and the search starts over
from it, until no neighbourhood improves or the budget (``Policy.joint_budget``, in nodes examined) is
spent. Then, while the plan leaves pods pending, the same again with one more start for the first
pod: its best relocation whose moved pods take no existing room, the pending pods decided again
after it (the room it leaves may be theirs). The plan is never worse than the heuristic's.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from makeroom.model import Pod
from makeroom.planner.attribution import attribute
from makeroom.planner.candidates import Shortfall, candidate_slots, shortfall
from makeroom.planner.context import Context, Ledger, wants_room
from makeroom.planner.destinations import Sharers
from makeroom.planner.heuristic import Heuristic
from makeroom.planner.objective import of_draft
from makeroom.planner.options import Decision, Dest, Draft, Option, Outcome, option_key
from makeroom.planner.sequential import Sequential, claim_own, claims_fit, fill_in, own_room, replay
from makeroom.planner.types import PlacementReason

OPTIONS = 4  # options of the first pod of a neighbourhood tried
SPARE = 2  # further victim sets of the first pod tried (their destinations may suit the others)
TRIPLES_UP_TO = 6
FULL_BUDGET_UP_TO = (
    50  # nodes  # with this many pods to place or fewer, three pods are also decided again at once
)


class BudgetSpentError(Exception):
    """The improvement's budget ran out."""


@dataclass(slots=True)
class Budget:
    left: int

    def spend(self, n: int) -> None:
        self.left -= n
        if self.left < 0 or (n == 0 and self.left == 0):
            raise BudgetSpentError


def budget_for(ctx: Context) -> int:
    """The improvement's budget in candidate nodes examined: ``Policy.joint_budget`` on clusters of
    up to ``FULL_BUDGET_UP_TO`` nodes, less on larger ones, where examining a node costs more (its
    destinations are looked for among all nodes)."""
    nodes = len(ctx.view.state.nodes)
    return ctx.policy.joint_budget * min(nodes, FULL_BUDGET_UP_TO) // max(nodes, 1)


class Improved:
    """The heuristic, then the joint improvement."""

    name = "heuristic+joint"

    def run(self, ctx: Context, pods: list[Pod]) -> Draft:
        first = Sequential(Heuristic()).run(ctx, pods)
        if len(pods) < 2:
            first.steps = first.nodes_examined
            return first
        allowed = budget_for(ctx)
        if allowed < 2 * ctx.policy.max_candidates:
            # too little to decide even one pod again on a large cluster: the heuristic's plan
            first.steps = first.nodes_examined
            return first
        budget = Budget(allowed)
        best, best_key = first, of_draft(ctx, first).key()
        try:
            for order in _orders(pods, first):
                if budget.left < first.nodes_examined:
                    break
                trial = Sequential(Heuristic()).run(ctx, order)
                budget.spend(max(1, trial.nodes_examined))
                key = of_draft(ctx, trial).key()
                if key < best_key:
                    best, best_key = trial, key
            # the trade of room for pending pods (``options``, apart) only once the others are
            # exhausted, and while the plan leaves pods pending: it is dearer, and rarely pays
            for apart in (False, True):
                improved = True
                while improved and (not apart or any(d.reason is None for d in best.decisions)):
                    improved = False
                    for keys in _neighbourhoods(best):
                        budget.spend(0)
                        for candidate in _rebuilds(ctx, pods, best, keys, budget, apart):
                            key = of_draft(ctx, candidate).key()
                            if key < best_key and claims_fit(ctx, pods, candidate):
                                best, best_key, improved = candidate, key, True
                        if improved:
                            break
        except BudgetSpentError:
            pass
        best.nodes_examined = first.nodes_examined
        best.steps = first.nodes_examined + allowed - max(0, budget.left)
        return fill_in(ctx, pods, normalised(pods, best))


def _orders(pods: list[Pod], first: Draft) -> list[list[Pod]]:
    """The heuristic again with each pod that does not simply fit planned first, the others in
    their order: a pod's choice made early can leave what the others need."""
    fits = {d.pod.key for d in first.decisions if d.reason is PlacementReason.FITS_NOW}
    out = []
    for i, pod in enumerate(pods):
        if i > 0 and pod.key not in fits:
            out.append([pod, *pods[:i], *pods[i + 1 :]])
    return out


def _neighbourhoods(draft: Draft) -> Iterator[tuple[str, ...]]:
    """Single pods, then pairs, then (with few pods) triples of the pods that are not simply fitting
    where they are; each with the pods that share a node with them (their room depends on the same
    pods leaving). Made as they are tried: the budget usually ends the search long before the end."""
    keys = [d.pod.key for d in draft.decisions if d.reason is not PlacementReason.FITS_NOW]
    on: dict[int, list[str]] = {}
    for d in draft.decisions:
        if d.reason is not None and d.slot >= 0:
            on.setdefault(d.slot, []).append(d.pod.key)
    slot_of = {d.pod.key: d.slot for d in draft.decisions if d.reason is not None and d.slot >= 0}
    sizes = (1, 2, 3) if len(keys) <= TRIPLES_UP_TO else (1, 2)
    seen: set[tuple[str, ...]] = set()
    for size in sizes:
        for group in itertools.combinations(keys, size):
            closed = set(group)
            for k in group:
                if k in slot_of:
                    closed.update(on[slot_of[k]])
            full = tuple(sorted(closed))
            if len(full) <= 4 and full not in seen:
                seen.add(full)
                yield full


def _rebuilds(
    ctx: Context, pods: list[Pod], draft: Draft, keys: tuple[str, ...], budget: Budget, apart: bool
) -> list[Draft]:
    """The plans with these pods decided again, the others kept: each pod first in turn, over its
    few best options (alone, or sharing a node with another of these pods), then the rest as the
    heuristic would, highest priority first."""
    rest = without(draft, set(keys))
    chosen = [p for p in pods if p.key in keys]
    waiting = [d.pod for d in rest.decisions if d.reason is None]
    base = replay(ctx, pods, rest)
    out: list[Draft] = []
    for head in chosen:
        others = [p for p in chosen if p is not head]
        starts: list[tuple[Draft, Ledger, set[str], list[Pod]]] = []
        picked, away = options(ctx, base, head, budget, apart)
        for option in picked:
            trial, ledger = _copy(rest), base.copy()
            _take(ctx, ledger, trial, head, option)
            starts.append((trial, ledger, {head.key}, others))
        if away is not None:
            # the existing room this leaves may be for the pods the plan leaves pending: they are
            # decided again too
            trial, ledger = without(rest, {p.key for p in waiting}), base.copy()
            _take(ctx, ledger, trial, head, away)
            starts.append((trial, ledger, {head.key}, [*others, *waiting]))
        for partner in others:
            for trial, ledger in _shared(ctx, base, rest, head, partner, budget):
                starts.append((trial, ledger, {head.key, partner.key}, others))
        for trial, ledger, done, then in starts:
            seq = Sequential(Heuristic())
            for pod in then:
                if pod.key in done:
                    continue
                before = trial.nodes_examined
                seq.decide(ctx, ledger, trial, pod)
                budget.spend(max(1, trial.nodes_examined - before))
            trial.new_nodes = ledger.new_nodes
            out.append(trial)
    return out


def _shared(
    ctx: Context, base: Ledger, rest: Draft, head: Pod, partner: Pod, budget: Budget
) -> list[tuple[Draft, Ledger]]:
    """Both pods on one of the head's best nodes, with the pods that leave it chosen for the two at
    once (the room one pod's relocation leaves over may not fit the other, while a set chosen for
    both does)."""
    if not (wants_room(head) and wants_room(partner)):
        return []
    view = ctx.view
    req = ctx.req(head.spec) + ctx.req(partner.spec)
    h_groups, p_groups = set(view.groups_for(head.spec)), set(view.groups_for(partner.spec))
    both = view.static(partner.spec) & np.all(view.state.alloc >= req, axis=1)
    sharers = Sharers(((head.priority, frozenset(h_groups)), (partner.priority, frozenset(p_groups))))
    out: list[tuple[Draft, Ledger]] = []
    for slot in candidate_slots(ctx, base, head, ctx.req(head.spec))[: ctx.policy.max_candidates]:
        s = int(slot)
        if not both[s]:
            continue
        budget.spend(1)
        below = max(head.priority, partner.priority)
        option = Heuristic().on_node_for(
            ctx, base, req, below, s, h_groups & p_groups, Outcome(), sharers=sharers
        )
        if option is None:
            continue
        placed = [head, partner]
        moving = list(zip(option.victims, option.dests, strict=True))
        split = attribute(ctx, base, s, placed, moving, option.new_nodes)
        if split is None:
            continue
        trial, ledger = _copy(rest), base.copy()
        ledger.claim_relocation(ctx, option, req)
        trial.new_nodes = ledger.new_nodes
        for i, pod in enumerate(placed):
            mine = sorted(split.get(i, []), key=lambda vd: vd[0].key)
            trial.decisions.append(
                Decision(
                    pod,
                    PlacementReason.RELOCATION,
                    slot=s,
                    victims=tuple(v for v, _ in mine),
                    dests=tuple(d for _, d in mine),
                )
            )
        out.append((trial, ledger))
    return out


def options(
    ctx: Context, ledger: Ledger, pod: Pod, budget: Budget, apart: bool
) -> tuple[list[Option | None], Option | None]:
    """The pod's few best ways to get room on what the ledger leaves: fitting now, its own room, and
    the best relocation on each of its best nodes; None stands for leaving it unplaced. Second, with
    ``apart`` and when the best relocation's moved pods take existing room: the best on its node
    whose moved pods take none (they go to the plan's new nodes, or buy one), as the room it leaves
    may be what other pods need (issue 22: on midsize seed 13 the optimum moves five pods to the new
    node another pending pod is bought, not three to the room a third pod needs)."""
    view = ctx.view
    req = ctx.req(pod.spec)
    fits = view.fits(pod.spec, ledger.free)
    if fits.any():
        return [Option(view.first(fits), [], [], ledger.new_nodes, 0.0, 0)], None
    found: list[Option] = []
    others: list[Option] = []  # further victim sets on the same nodes
    away: Option | None = None
    own = own_room(ctx, ledger, pod, req, view.groups_for(pod.spec))
    if own is not None:
        own.key = option_key(own)
        found.append(own)
    if wants_room(pod):
        heuristic = Heuristic()
        p_groups = set(view.groups_for(pod.spec))
        ledger.touch()
        nearest: tuple[Option, int, Shortfall] | None = None  # the best relocation taking existing room
        for slot in candidate_slots(ctx, ledger, pod, req)[: 2 * ctx.policy.max_candidates]:
            budget.spend(1)
            outcome = Outcome()
            short = shortfall(ctx, ledger, pod.priority, req, int(slot), outcome)
            if short is None:
                continue
            here = heuristic.all_on(ctx, ledger, short, int(slot), p_groups, outcome)
            if not here:
                continue
            here.sort(key=lambda o: o.key)
            found.append(here[0])
            # the set that leaves the most room where its pods go, for the pods planned after it
            light = min(here, key=lambda o: (_footprint(ctx, o), o.key))
            if light is not here[0]:
                found.append(light)
            others.extend(o for o in here[1:] if o is not light)
            if any(d.slot >= 0 for d in here[0].dests) and (nearest is None or here[0].key < nearest[0].key):
                nearest = (here[0], int(slot), short)
        if apart and nearest is not None:
            # on that relocation's node only: with no existing room, each moved pod buys a node or
            # goes to one the plan adds, which costs more to search
            budget.spend(1)
            _, at, need = nearest
            sets = heuristic.all_on(ctx, _no_existing_room(ledger), need, at, p_groups, Outcome())
            away = min(sets, key=lambda o: o.key, default=None)
    found.sort(key=lambda o: o.key)
    others.sort(key=lambda o: o.key)
    picked: list[Option | None] = [*found[:OPTIONS], *others[:SPARE]]
    if not picked:
        picked.append(None)
    return picked, away


def _no_existing_room(ledger: Ledger) -> Ledger:
    """The ledger with no existing node open to moved pods (``rooms_for`` skips the nodes pods
    leave)."""
    hidden = ledger.copy()
    hidden.sources.update(range(len(ledger.free)))
    return hidden


def _footprint(ctx: Context, option: Option) -> float:
    """The victims' requests, as shares of a node of the source's size."""
    alloc = np.maximum(ctx.view.state.alloc[option.slot], 1)
    return float(sum(float((ctx.req(v.spec) / alloc).sum()) for v in option.victims))


def _take(ctx: Context, ledger: Ledger, draft: Draft, pod: Pod, option: Option | None) -> None:
    req = ctx.req(pod.spec)
    if option is None:
        draft.decisions.append(Decision(pod, None))
        return
    if option.victims:
        ledger.claim_relocation(ctx, option, req)
        draft.decisions.append(Decision.relocation(pod, option))
        return
    if option.slot >= 0 and ctx.view.ready[option.slot]:
        ledger.claim_slot(option.slot, req)
        draft.decisions.append(Decision(pod, PlacementReason.FITS_NOW, slot=option.slot))
        return
    draft.decisions.append(claim_own(ctx, ledger, pod, req, option))


def _copy(draft: Draft) -> Draft:
    return Draft(list(draft.decisions), [nn.copy() for nn in draft.new_nodes], draft.nodes_examined)


def without(draft: Draft, keys: set[str]) -> Draft:
    """The draft without these pods' decisions; new nodes nobody uses any more are dropped."""
    kept = [d for d in draft.decisions if d.pod.key not in keys]
    used: set[int] = set()
    for d in kept:
        if d.reason is not None and d.slot < 0 and d.new_node >= 0:
            used.add(d.new_node)
        used.update(dest.new_node for dest in d.dests if dest.new_node >= 0)
    remap = {old: new for new, old in enumerate(sorted(used))}
    decisions = [_remapped(d, remap) for d in kept]
    new_nodes = [draft.new_nodes[old].copy() for old in sorted(used)]
    return Draft(decisions, new_nodes, draft.nodes_examined)


def _remapped(d: Decision, remap: dict[int, int]) -> Decision:
    new_node = remap[d.new_node] if d.new_node >= 0 else -1
    dests = tuple(Dest(new_node=remap[x.new_node], group=x.group) if x.new_node >= 0 else x for x in d.dests)
    return Decision(d.pod, d.reason, d.slot, new_node, d.adds, d.victims, dests, d.alternative, d.unplaceable)


def normalised(pods: list[Pod], draft: Draft) -> Draft:
    """Decisions in planning order, new nodes numbered per group in the order they are listed, each
    relocation's alternative and each unplaced pod's reason filled in."""
    order = {p.key: i for i, p in enumerate(pods)}
    draft.decisions.sort(key=lambda d: order[d.pod.key])
    counts: dict[str, int] = {}
    for nn in draft.new_nodes:
        nn.index = counts.get(nn.group, 0)
        counts[nn.group] = nn.index + 1
    return draft
