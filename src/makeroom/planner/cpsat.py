"""The exact joint search: every pending pod at once, as one CP-SAT model (OR-Tools, the ``exact`` extra).

The model holds the nodes that matter: the nodes the pending pods could take (Ready nodes they may
use, nodes being provisioned with room, new nodes of groups they may use) and the destinations of the
pods that could leave those nodes (nodes with room they may use, new nodes). Pods that may leave one
node are grouped in classes of interchangeable pods (same workload and spec), so the model counts
them instead of naming them. The rules are the planner's, for all pods at once:

- a pending pod takes at most one place: a Ready node it may use, a node being provisioned, or a new
  node of a group it may use (groups within their max);
- pods leave a Ready node only for a pending pod placed there whose priority is higher and which lets
  makeroom move pods for it; they need a destination other than that node: a node they may use, or a
  new node of a group they may use that such a pending pod could not use;
- a node pods leave takes no moved pod; every node and new node ends within its allocatable (a node
  that was already over it takes nothing);
- at most ``max_moves_in_flight`` moves; victims are movable (``not_movable``, budgets).

The objective, lexicographic: pods placed by priority (highest first), then new-node cost, new nodes,
moves, the moved pods' priorities; as one weighted objective when the weights fit in 62 bits, else
one level after the other. One worker and a deterministic time limit make the result reproducible;
past the limit the best plan found is returned with the solver's bound.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import numpy as np

from makeroom.model import Pod
from makeroom.model.resources import Vector
from makeroom.model.state import ClusterState
from makeroom.planner.attribution import attribute
from makeroom.planner.context import Context, Ledger, wants_room
from makeroom.planner.objective import levels, of_draft
from makeroom.planner.options import Decision, Dest, Draft, NewNode, VictimClass
from makeroom.planner.sequential import fill_in, own_room
from makeroom.planner.types import Objective, PlacementReason
from makeroom.planner.victims import classes_on

PRICE_SCALE = 1_000_000  # prices per hour in millionths, as integers for the solver
MAX_WEIGHT = 1 << 62
MAX_VARIABLES = 200_000  # the exact search is for small and mid-size clusters: past it, the default's plan

Site = tuple[str, int, int]  # ("n", slot, 0) an existing node; ("g", group number, k) a new node


class ExactUnavailableError(Exception):
    """OR-Tools is not installed (pip install 'makeroom[exact]')."""


class ExactTooLargeError(Exception):
    """The model would have more variables than the exact search is for (a large cluster)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} placements and moves to weigh, more than {MAX_VARIABLES}")
        self.size = size


@cache
def exact_available() -> bool:
    """Whether OR-Tools is installed (the exact extra)."""
    try:
        _cp_model()
    except ExactUnavailableError:
        return False
    return True


def _cp_model() -> Any:
    try:
        from ortools.sat.python import cp_model
    except ImportError as exc:  # the optional extra
        raise ExactUnavailableError(
            "the exact joint search needs OR-Tools: pip install 'makeroom[exact]'"
        ) from exc
    return cp_model


@dataclass(slots=True)
class _Klass:
    cls: VictimClass
    slot: int
    eligible: list[int]  # pending pods (indices) it may leave for
    dests: list[Site] = field(default_factory=list)


@dataclass(slots=True)
class Model:
    """The model and the maps from its variables back to pods and nodes."""

    cp: Any
    pods: list[Pod]
    groups: list[str]
    slots_of: dict[str, int]  # group -> new-node slots in the model
    x: dict[tuple[int, Site], Any]
    y: dict[tuple[int, Site], Any]
    moved: list[Any]
    opened: dict[tuple[int, int], Any]
    klasses: list[_Klass]
    terms: list[tuple[Any, int, int]]  # (expression, lowest, highest) per level, minimised, in order


class CpSat:
    """The exact joint search. ``hint``, a draft of another search, seeds the solver."""

    name = "exact-joint"

    def __init__(self, hint: Draft | None = None) -> None:
        self.hint = hint

    def run(self, ctx: Context, pods: list[Pod]) -> Draft:
        cp_model = _cp_model()
        base = Ledger.start(ctx, pods)
        m = build(ctx, pods, base, cp_model)
        if self.hint is not None:
            _hint(ctx, m, self.hint)
        solver = cp_model.CpSolver()
        params = solver.parameters
        params.num_workers = 1
        params.random_seed = 0
        params.max_deterministic_time = max(0.01, float(ctx.policy.exact_budget))
        status, bound = _solve(cp_model, solver, m)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            draft = decode(ctx, m, solver, base)
            draft.proven = status == cp_model.OPTIMAL
        else:
            draft = None
        if self.hint is not None and (
            draft is None or of_draft(ctx, self.hint).key() < of_draft(ctx, draft).key()
        ):
            # past its time limit the solver may have found nothing, or less than its seed: the seed
            draft = replace(self.hint, proven=False, bound=None, search="")
        if draft is None:  # nothing found and nothing seeded: every pod left as it is, and the bound
            draft = fill_in(ctx, pods, Draft(decisions=[Decision(p, None) for p in pods]))
        draft.bound = bound
        draft.steps = int(solver.NumBranches())
        return draft


def estimate(ctx: Context, pods: list[Pod]) -> int:
    """The model's size before any of it is built, in numpy alone: the Ready nodes the pending pods
    could take (the nodes pods may leave) times the cluster's nodes (where those pods could go).
    ``build`` makes about five to ten variables per unit, each costing Python time; the size check
    inside ``build`` comes only after the costly part (the classes on every node and their
    destinations: 16 s for 68,000 variables on 200 nodes under load)."""
    view = ctx.view
    state = view.state
    taken = np.zeros(len(state.alive), dtype=np.bool_)
    for p in pods:
        taken |= view.static(p.spec) & np.all(state.alloc >= ctx.req(p.spec), axis=1)
    return int(taken.sum()) * len(state.nodes)


def _full(
    state: ClusterState,
    base: Ledger,
    slots_of: dict[str, int],
    opened: dict[tuple[int, int], Any],
    gnum: dict[str, int],
    group: str,
) -> Any:
    """Whether the group is at its max once the plan's new nodes are added: True, False (the model
    cannot open all it lacks), or the variable of its last node to open."""
    lacking = state.groups[group].max - base.group_size[group]
    if lacking <= 0:
        return True
    if slots_of[group] < lacking:
        return False
    return opened[(gnum[group], lacking - 1)]


def build(ctx: Context, pods: list[Pod], base: Ledger, cp_model: Any, *, chains: bool = False) -> Model:
    """The model of the planner's rules; ``chains``: without the rule that a node pods leave takes no
    moved pod (its room counted after its departures), to tell what that rule costs (``chains.py``)."""
    view = ctx.view
    state = view.state
    free = base.free
    alloc = state.alloc
    groups = list(state.groups)
    gnum = {g: i for i, g in enumerate(groups)}
    reqs = [ctx.req(p.spec) for p in pods]
    room_for = [wants_room(p) for p in pods]

    # --- where each pending pod could go ----------------------------------------------------------
    sites: list[list[Site]] = []
    eligible_on: dict[int, list[int]] = defaultdict(list)  # slot -> pods that may have pods leave it
    for i, p in enumerate(pods):
        r = reqs[i]
        mine: list[Site] = []
        # every Ready node the pod may use and could fit on: pods may leave it for this pod, or for
        # another pending pod of higher priority placed there too
        for slot in np.flatnonzero(view.static(p.spec) & np.all(alloc >= r, axis=1)):
            mine.append(("n", int(slot), 0))
            if room_for[i]:
                eligible_on[int(slot)].append(i)
        for slot in np.flatnonzero(ctx.upcoming(p.spec) & np.all(free >= r, axis=1)):
            mine.append(("n", int(slot), 0))
        sites.append(mine)

    # --- the pods that could leave, in classes ------------------------------------------------------
    klasses: list[_Klass] = []
    for s, who in sorted(eligible_on.items()):
        top = max(pods[i].priority for i in who)
        for c in classes_on(ctx, base, s, top):
            klasses.append(_Klass(c, s, [i for i in who if pods[i].priority > c.priority]))
    klasses = [k for k in klasses if k.eligible]

    # --- new nodes: how many of each group the model may open --------------------------------------
    users: dict[str, int] = defaultdict(int)
    for p in pods:
        for g in view.groups_for(p.spec):
            users[g] += 1
    for k in klasses:
        for g in view.groups_for(k.cls.spec):
            users[g] += len(k.cls.pods)
    slots_of = {g: max(0, min(state.groups[g].max - base.group_size[g], users[g])) for g in groups}
    for i, p in enumerate(pods):
        for g in ctx.sources(p.spec, base.group_size):
            sites[i] += [("g", gnum[g], k) for k in range(slots_of[g])]

    # --- destinations of each class -----------------------------------------------------------------
    for k in klasses:
        spec, r = k.cls.spec, k.cls.req
        ok = (view.static(spec) | ctx.upcoming(spec)) & np.all(free >= r, axis=1)
        k.dests = [("n", int(d), 0) for d in np.flatnonzero(ok) if int(d) != k.slot]
        for g in ctx.sources(spec, base.group_size):
            k.dests += [("g", gnum[g], j) for j in range(slots_of[g])]

    size = sum(len(mine) for mine in sites) + sum(len(k.dests) for k in klasses)
    if size > MAX_VARIABLES:
        raise ExactTooLargeError(size)
    cp = cp_model.CpModel()
    x: dict[tuple[int, Site], Any] = {}
    for i, mine in enumerate(sites):
        for site in mine:
            x[(i, site)] = cp.NewBoolVar(f"x{i}_{site}")
        cp.AddAtMostOne(x[(i, site)] for site in mine)
    y: dict[tuple[int, Site], Any] = {}
    moved: list[Any] = []
    into_groups: list[tuple[int, _Klass, int, list[Any], list[tuple[int, list[str]]]]] = []
    for j, k in enumerate(klasses):
        n = len(k.cls.pods)
        for site in k.dests:
            y[(j, site)] = cp.NewIntVar(0, n, f"y{j}_{site}")
        mv = cp.NewIntVar(0, n, f"moved{j}")
        cp.Add(mv == sum(y[(j, site)] for site in k.dests))
        moved.append(mv)
        # pods leave only for a pending pod placed on their node ...
        cp.Add(mv <= n * sum(x[(i, ("n", k.slot, 0))] for i in k.eligible))
        # ... and never to a new node of a group that pod could use; nor to one the autoscaler would
        # grow for them only once the groups that pod could use are full (planner/buying.py), unless
        # the plan opens it anyway: those constraints come once the new nodes are
        for g in view.groups_for(k.cls.spec):
            # only the groups it may get a new node of (under Karpenter: the pool Karpenter picks)
            into = [y[key] for q in range(slots_of[g]) if (key := (j, ("g", gnum[g], q))) in y]
            if into:
                gates = [
                    (i, ctx.rivals(k.cls.spec, g, view.groups_for(pods[i].spec)))
                    for i in k.eligible
                    if not view.admits(pods[i].spec, g)
                ]
                cp.Add(sum(into) <= n * sum(x[(i, ("n", k.slot, 0))] for i, _ in gates))
                into_groups.append((j, k, gnum[g], into, gates))

    # --- nodes pods leave take no moved pod (unless chains are weighed) -----------------------------
    leaving: dict[int, list[int]] = defaultdict(list)
    for j, k in enumerate(klasses):
        if not chains:
            leaving[k.slot].append(j)
    arriving: dict[int, list[tuple[int, Any]]] = defaultdict(list)
    for (j, site), var in y.items():
        if site[0] == "n":
            arriving[site[1]].append((j, var))
    for s, js in leaving.items():
        src = cp.NewBoolVar(f"src{s}")
        for j in js:
            cp.Add(moved[j] <= len(klasses[j].cls.pods) * src)
        for _, var in arriving.get(s, []):
            cp.Add(var == 0).OnlyEnforceIf(src)

    # --- room on every node and new node -------------------------------------------------------------
    width = len(state.index)
    load: dict[Site, list[tuple[Any, Vector]]] = defaultdict(list)
    for (i, site), var in x.items():
        load[site].append((var, reqs[i]))
    for (j, site), var in y.items():
        load[site].append((var, klasses[j].cls.req))
    out_of: dict[int, list[tuple[Any, Vector]]] = defaultdict(list)
    for j, k in enumerate(klasses):
        out_of[k.slot].append((moved[j], k.cls.req))
    opened: dict[tuple[int, int], Any] = {}
    for g in groups:
        for q in range(slots_of[g]):
            opened[(gnum[g], q)] = cp.NewBoolVar(f"open{g}_{q}")
            if q > 0:
                cp.Add(opened[(gnum[g], q)] <= opened[(gnum[g], q - 1)])
    # a moved pod's new node: only for a pending pod placed on its node, once every group the
    # autoscaler might grow instead is full (all of its remaining nodes opened by this plan); or a new
    # node the plan opens anyway, for a pending pod or for moved pods allowed one, where it is room
    # the autoscaler already counts on (as the heuristic's destinations take the plan's new nodes)
    gated: dict[tuple[int, int], Any] = {}
    waiting: list[tuple[int, _Klass, int, list[Any]]] = []
    for j, k, gi, into, gates in into_groups:
        allowed = []
        for i, rival_groups in gates:
            on_slot = x[(i, ("n", k.slot, 0))]
            full = [_full(state, base, slots_of, opened, gnum, h) for h in rival_groups]
            if any(f is False for f in full):
                continue
            waits = [f for f in full if f is not True]
            if not waits:
                allowed.append(on_slot)
                continue
            gate = cp.NewBoolVar(f"gate{j}_{i}")
            cp.Add(gate <= on_slot)
            for f in waits:
                cp.Add(gate <= f)
            allowed.append(gate)
        gated[(j, gi)] = cp.NewBoolVar(f"gated{j}_{gi}")
        cp.Add(gated[(j, gi)] <= sum(allowed))
        if any(rival_groups for _, rival_groups in gates):
            waiting.append((j, k, gi, into))
    hosts: dict[Site, list[Any]] = defaultdict(list)
    for (_, site), var in x.items():
        if site[0] == "g":
            hosts[site].append(var)
    shared: dict[Site, Any] = {}
    for j, k, gi, into in waiting:
        for q, var in enumerate(into):
            site = ("g", gi, q)
            if site not in shared:
                shared[site] = cp.NewBoolVar(f"shared{gi}_{q}")
                anyway = list(hosts[site])
                for (j2, gi2), ok2 in gated.items():
                    if gi2 == gi:
                        w = cp.NewBoolVar(f"with{j2}_{gi}_{q}")
                        cp.Add(w <= ok2)
                        cp.Add(w <= y[(j2, site)])
                        anyway.append(w)
                cp.Add(shared[site] <= sum(anyway))
            cp.Add(var <= len(k.cls.pods) * (gated[(j, gi)] + shared[site]))
    for site, items in load.items():
        if site[0] == "g":
            cap = view.template(groups[site[1]])
            on = opened[(site[1], site[2])]
            for d in range(width):
                if any(r[d] for _, r in items):
                    cp.Add(sum(int(r[d]) * v for v, r in items if r[d]) <= int(cap[d]) * on)
            continue
        s = site[1]
        room = free[s]
        busy = None
        if bool(np.any(room < 0)):
            busy = cp.NewBoolVar(f"busy{s}")
            for v, _ in items:
                cp.Add(v == 0).OnlyEnforceIf(busy.Not())
        for d in range(width):
            if not any(r[d] for _, r in items):
                continue
            expr = sum(int(r[d]) * v for v, r in items if r[d]) - sum(
                int(r[d]) * v for v, r in out_of.get(s, []) if r[d]
            )
            c = cp.Add(expr <= int(room[d]))
            if busy is not None:
                c.OnlyEnforceIf(busy)

    limit = ctx.policy.max_moves_in_flight
    if limit is not None and moved:
        cp.Add(sum(moved) <= limit - base.moves)

    # --- the objective, level by level -------------------------------------------------------------
    terms: list[tuple[Any, int, int]] = []
    for q in levels(pods):
        members = [i for i, p in enumerate(pods) if p.priority == q]
        expr = len(members) - sum(x[(i, place)] for i in members for place in sites[i])
        terms.append((expr, 0, len(members)))
    price = {g: round(state.groups[g].price_per_hour * PRICE_SCALE) for g in groups}
    cost = sum(price[groups[gi]] * v for (gi, _), v in opened.items())
    terms.append((cost, 0, sum(price[groups[gi]] for gi, _ in opened)))
    terms.append((sum(opened.values()), 0, len(opened)))
    total = sum(len(k.cls.pods) for k in klasses)
    terms.append((sum(moved), 0, total))
    lo = sum(min(0, k.cls.priority) * len(k.cls.pods) for k in klasses)
    hi = sum(max(0, k.cls.priority) * len(k.cls.pods) for k in klasses)
    terms.append((sum(k.cls.priority * mv for k, mv in zip(klasses, moved, strict=True)), lo, hi))
    return Model(cp, pods, groups, slots_of, x, y, moved, opened, klasses, terms)


def optimum(ctx: Context, pods: list[Pod], *, chains: bool = False) -> Objective | None:
    """The model's optimum as an objective, without a plan (None: none found in the time limit)."""
    cp_model = _cp_model()
    m = build(ctx, pods, Ledger.start(ctx, pods), cp_model, chains=chains)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = max(0.01, float(ctx.policy.exact_budget))
    status, _ = _solve(cp_model, solver, m)
    return _values(m, solver) if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None


def _weights(m: Model) -> list[int] | None:
    weights = [1] * len(m.terms)
    for i in range(len(m.terms) - 2, -1, -1):
        _, lo, hi = m.terms[i + 1]
        weights[i] = weights[i + 1] * (hi - lo + 1)
    _, lo, hi = m.terms[0]
    if weights[0] * (hi - lo + 1) >= MAX_WEIGHT:
        return None
    return weights


def _solve(cp_model: Any, solver: Any, m: Model) -> tuple[int, Objective]:
    """Solve, weighted or level by level; the status and a bound on the objective."""
    weights = _weights(m)
    if weights is not None:
        m.cp.Minimize(sum(w * (e - lo) for w, (e, lo, _) in zip(weights, m.terms, strict=True)))
        status = solver.Solve(m.cp)
        if status == cp_model.OPTIMAL:
            return status, _values(m, solver)
        best = math.floor(solver.BestObjectiveBound() + 1e-6)
        digits = []
        for w, (_, lo, hi) in zip(weights, m.terms, strict=True):
            digits.append(min(hi, lo + best // w))
            best %= w
        return status, _objective(m, digits, lexicographic_from=0)
    # one level after the other: fix each optimum before the next
    status = cp_model.OPTIMAL
    for level, (expr, _lo, _) in enumerate(m.terms):
        m.cp.Minimize(expr)
        status = solver.Solve(m.cp)
        if status != cp_model.OPTIMAL:
            if status == cp_model.FEASIBLE:
                digits = [int(solver.Value(e)) for e, _, _ in m.terms[:level]]
                digits.append(math.floor(solver.BestObjectiveBound() + 1e-6))
                digits += [lo2 for _, lo2, _ in m.terms[level + 1 :]]
                return status, _objective(m, digits, lexicographic_from=level)
            return status, _objective(m, [lo2 for _, lo2, _ in m.terms], lexicographic_from=0)
        value = int(solver.Value(expr))
        m.cp.Add(expr == value)
        m.cp.ClearHints()
        for var in _all_vars(m):
            m.cp.AddHint(var, solver.Value(var))
    return status, _values(m, solver)


def _all_vars(m: Model) -> list[Any]:
    return [*m.x.values(), *m.y.values(), *m.opened.values()]


def _values(m: Model, solver: Any) -> Objective:
    return _objective(m, [int(solver.Value(e)) for e, _, _ in m.terms], lexicographic_from=len(m.terms))


def _objective(m: Model, digits: list[int], lexicographic_from: int) -> Objective:
    """An Objective from the levels' values (unplaced counts per priority first)."""
    prios = levels(m.pods)
    counts = {q: sum(1 for p in m.pods if p.priority == q) for q in prios}
    placed = tuple((q, counts[q] - digits[i]) for i, q in enumerate(prios))
    rest = digits[len(prios) :]
    return Objective(placed, rest[0] / PRICE_SCALE, rest[1], rest[2], rest[3])


def _hint(ctx: Context, m: Model, draft: Draft) -> None:
    """Seed the solver with another search's plan."""
    gnum = {g: i for i, g in enumerate(m.groups)}
    index = {p.key: i for i, p in enumerate(m.pods)}
    slot_of_new: dict[int, Site] = {}
    used: dict[str, int] = defaultdict(int)
    for j, nn in enumerate(draft.new_nodes):
        q = used[nn.group]
        used[nn.group] += 1
        slot_of_new[j] = ("g", gnum[nn.group], q)
    for (g, q), var in m.opened.items():
        m.cp.AddHint(var, int(q < used[m.groups[g]]))
    chosen: dict[int, Site] = {}
    counts: dict[tuple[int, Site], int] = defaultdict(int)
    klass_of: dict[str, int] = {}
    for j, k in enumerate(m.klasses):
        for p in k.cls.pods:
            klass_of[p.key] = j
    for d in draft.decisions:
        i = index.get(d.pod.key)
        if i is None or d.reason is None:
            continue
        chosen[i] = ("n", d.slot, 0) if d.slot >= 0 else slot_of_new[d.new_node]
        for v, dest in zip(d.victims, d.dests, strict=True):
            j2 = klass_of.get(v.key)
            if j2 is None:
                continue
            site = ("n", dest.slot, 0) if dest.slot >= 0 else slot_of_new[dest.new_node]
            counts[(j2, site)] += 1
    for (i, site), var in m.x.items():
        m.cp.AddHint(var, int(chosen.get(i) == site))
    for key, var in m.y.items():
        m.cp.AddHint(var, counts.get(key, 0))


def decode(ctx: Context, m: Model, solver: Any, base: Ledger) -> Draft:
    view = ctx.view
    pods = m.pods
    # new nodes opened, in group order, numbered per group
    new_nodes: list[NewNode] = []
    position: dict[Site, int] = {}
    for g in m.groups:
        gi = m.groups.index(g)
        for q in range(m.slots_of[g]):
            if solver.Value(m.opened[(gi, q)]):
                position[("g", gi, q)] = len(new_nodes)
                new_nodes.append(NewNode(g, q, view.template(g).copy(), True))
    site_of: dict[int, Site] = {}
    for (i, site), var in m.x.items():
        if solver.Value(var):
            site_of[i] = site
    for site in site_of.values():
        if site[0] == "g":
            new_nodes[position[site]].for_victims = False
    leaving: dict[int, list[tuple[Pod, Dest]]] = defaultdict(list)
    for j, k in enumerate(m.klasses):
        left = list(k.cls.pods)
        for site in k.dests:
            for _ in range(int(solver.Value(m.y[(j, site)]))):
                v = left.pop(0)
                if site[0] == "n":
                    dest = Dest(slot=site[1])
                else:
                    dest = Dest(new_node=position[site], group=m.groups[site[1]])
                leaving[k.slot].append((v, dest))
    victims_of: dict[int, list[tuple[Pod, Dest]]] = defaultdict(list)
    for s, moving in leaving.items():
        here = [i for i in range(len(pods)) if site_of.get(i) == ("n", s, 0)]
        split = attribute(ctx, base, s, [pods[i] for i in here], moving, new_nodes)
        assert split is not None, "the model lets pods leave only for a pending pod placed there"
        for i, vd in split.items():
            victims_of[here[i]] = vd
    draft = Draft(new_nodes=new_nodes)
    adding: set[int] = set()
    for i, p in enumerate(pods):
        where = site_of.get(i)
        if where is None:
            draft.decisions.append(Decision(p, None))
            continue
        if where[0] == "g":
            j = position[where]
            draft.decisions.append(Decision(p, PlacementReason.NEW_NODE, new_node=j, adds=j not in adding))
            adding.add(j)
            continue
        s = where[1]
        if not view.ready[s]:
            draft.decisions.append(Decision(p, PlacementReason.NEW_NODE, slot=s))
            continue
        moving = sorted(victims_of.get(i, []), key=lambda vd: vd[0].key)
        if not moving:
            draft.decisions.append(Decision(p, PlacementReason.FITS_NOW, slot=s))
            continue
        own = own_room(ctx, base, p, ctx.req(p.spec), view.groups_for(p.spec))
        draft.decisions.append(
            Decision(
                p,
                PlacementReason.RELOCATION,
                slot=s,
                victims=tuple(v for v, _ in moving),
                dests=tuple(d for _, d in moving),
                alternative=None if own is None else own.cost,
            )
        )
    return fill_in(ctx, pods, draft)
