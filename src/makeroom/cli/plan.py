"""``makeroom plan``: what makeroom would move, where, and why, without doing it."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import typer

from makeroom.cli.app import app
from makeroom.cli.common import (
    ExitStatus,
    JsonOpt,
    Output,
    emit,
    err_console,
    guarded,
    output_format,
    output_option,
    say,
    usage_error,
)
from makeroom.cli.run import DEFAULT, LiveController
from makeroom.controller import RELOCATING, ControllerConfig, Strategy
from makeroom.controller.config import metadata_of
from makeroom.controller.policy import plan_consolidation_policy, plan_policy
from makeroom.controller.reasons import UNPRICED
from makeroom.controller.scope import Scope
from makeroom.controller.sources import config_of_values, scope_of_values
from makeroom.errors import InputError, Problem
from makeroom.model import limits
from makeroom.model.expander import expander
from makeroom.model.state import ClusterState
from makeroom.planner import PlacementReason, Plan, Policy, Proof, plan
from makeroom.planner.chains import chain_cost
from makeroom.planner.consolidate import Consolidation, unpriced
from makeroom.planner.consolidate import consolidate as planner_consolidate
from makeroom.planner.cpsat import ExactUnavailableError, exact_available
from makeroom.planner.types import Objective
from makeroom.report.units import count, duration, per_hour
from makeroom.scenario import Scenario, parse_scenario, read_data, read_yaml
from makeroom.snapshot import GroupConfig, is_kube_dump, parse_group_config, state_from_objects

FileArg = Annotated[
    Path | None,
    typer.Argument(
        help="A scenario file (spec v1), or a dump: kubectl get nodes,pods,poddisruptionbudgets -A -o yaml "
        "(optionally with the cluster-autoscaler-status ConfigMap among the items).",
        show_default=False,
    ),
]


PLAN_FORMATS = (Output.TABLE, Output.JSON, Output.YAML)


def state_of_scenario(scenario: Scenario, at: float | None, seed: int = 0) -> tuple[ClusterState, float, str]:
    """The scenario's cluster at ``at`` seconds, reached by simulating with strategy ``none``, as the
    controller's round at that instant sees it (before the scheduler and the autoscaler act then); by
    default at the first moment a pod is pending. Returns the state, the time, and why that time."""
    from makeroom.sim import Options, Simulation
    from makeroom.sim.clock import Phase

    end = scenario.spec.duration
    if at is not None and at > end:
        raise InputError(
            "--at",
            [Problem("", f"expected a time within the scenario's {duration(end)}, got {duration(at)}")],
        )
    why = ""
    if at is None:
        at, why = first_pending(scenario, seed)
    sim = Simulation(scenario, Options(Strategy.NONE, seed=seed, keep_events=False, keep_samples=False))
    sim.run(until=at, before=Phase.CONTROLLER)
    return sim.world.state, at, why


def first_pending(scenario: Scenario, seed: int = 0) -> tuple[float, str]:
    """The first moment a pod cannot be scheduled when nothing is moved, and a sentence saying so."""
    from makeroom.sim import Options, Simulation

    sim = Simulation(scenario, Options(Strategy.NONE, seed=seed, keep_samples=False))
    result = sim.run()
    for e in result.events:
        if e.kind == "pod_unschedulable":
            return e.t, (
                f"planning at {duration(e.t)}, the first moment a pod is pending ({e.get('pod')}) when "
                "nothing is moved; --at chooses another"
            )
    return (
        0.0,
        "planning at 0s: no pod is ever pending in this scenario when nothing is moved; --at chooses another",
    )


def state_of_dump(data: Mapping[str, Any], file: str, groups: GroupConfig | None) -> ClusterState:
    if "items" in data:
        items = data["items"]
        if not isinstance(items, list):
            raise InputError(file, [Problem("items", "expected a list of Kubernetes objects")])
    else:
        items = [data]
    return state_from_objects(items, groups, None, source=file, prefix="items")


@dataclass(frozen=True, slots=True)
class Loaded:
    """The state to plan on, the planner's ``now``, where it came from, why that moment (a scenario
    planned at its first pending moment), and the scenario (None for a dump)."""

    state: ClusterState
    now: float
    origin: str
    why: str = ""
    scenario: Scenario | None = None


def load_state(file: Path, at: float | None, groups_file: Path | None, seed: int = 0) -> Loaded:
    data = read_data(file)
    if is_kube_dump(data):
        groups = parse_group_config(read_yaml(groups_file), str(groups_file)) if groups_file else None
        state = state_of_dump(data, str(file), groups)
        return Loaded(
            state, time.time(), f"{file} (a dump of {len(state.nodes)} nodes, {len(state.pods)} pods)"
        )
    if groups_file is not None:
        raise InputError("--groups", [Problem("", "applies to a Kubernetes dump, not to a scenario")])
    scenario = parse_scenario(data, str(file))
    state, when, why = state_of_scenario(scenario, at, seed)
    return Loaded(state, when, f"{scenario.spec.name} at {duration(when)}", why, scenario)


@dataclass(frozen=True, slots=True)
class Chosen:
    """The controller configuration ``plan`` plans with, its scope, and a sentence saying where
    they come from."""

    config: ControllerConfig
    scope: Scope
    source: str

    def sentence(self) -> str:
        c = self.config
        return (
            f"planned as the controller would with {self.source}: strategy {c.strategy}, expander "
            f"{c.autoscaler_expander}, at most {c.max_moves_in_flight} moves, cooldown "
            f"{duration(c.cooldown)}"
        )


def choose_controller(
    loaded: Loaded, live: LiveController | None, values: Path | None, overrides: Overrides
) -> Chosen:
    """Where ``plan`` takes the controller's configuration from, first found: ``--values`` (the chart's
    values), the controller running in the cluster (``--kubeconfig``), the scenario's ``controller:``
    and ``autoscaler:`` sections, else ``makeroom run``'s defaults; then the flags given override."""
    if values is not None:
        raw = read_yaml(values)
        chosen = Chosen(config_of_values(raw, str(values)), scope_of_values(raw, str(values)), str(values))
    elif live is not None:
        chosen = Chosen(live.config, live.scope, live.source)
    elif loaded.scenario is not None:
        spec = loaded.scenario.spec
        strategy = spec.controller.strategy if spec.controller.strategy.relocates else DEFAULT.strategy
        chosen = Chosen(
            spec.controller_config(strategy), Scope(), "the scenario's controller and autoscaler settings"
        )
    else:
        chosen = Chosen(DEFAULT, Scope(), "makeroom run's defaults")
    return replace(chosen, config=overrides.apply(chosen.config))


@dataclass(frozen=True, slots=True)
class Overrides:
    """The controller's knobs given as ``plan`` flags (None: not given)."""

    strategy: str | None = None
    expander: str | None = None
    max_moves: int | None = None
    cooldown: str | None = None

    def apply(self, config: ControllerConfig) -> ControllerConfig:
        changes: dict[str, Any] = {}
        if self.strategy is not None:
            if self.strategy not in RELOCATING:
                usage_error(f"--strategy: expected {' or '.join(sorted(RELOCATING))}, got {self.strategy!r}")
            changes["strategy"] = Strategy(self.strategy)
        if self.expander is not None:
            changes["autoscaler_expander"] = checked("--autoscaler-expander", expander, self.expander)
        if self.max_moves is not None:
            changes["max_moves_in_flight"] = self.max_moves
        if self.cooldown is not None:
            changes["cooldown"] = checked("--cooldown", limits.duration, self.cooldown)
        config = replace(config, **changes)
        for problem in config.problems():
            usage_error(f"{metadata_of(problem.path)['flag']}: {problem.message}")
        return config


def checked(flag: str, rule: Any, value: Any) -> Any:
    try:
        return rule(value)
    except limits.InvalidValueError as exc:
        usage_error(f"{flag}: {exc}")


def note(text: str) -> None:
    """A remark on stderr, for output formats whose stdout is data only."""
    err_console.print(text, markup=False, highlight=False, soft_wrap=True)


def timed_plan(state: ClusterState, policy: Policy) -> Plan:
    if policy.exact_if_available:
        exact_available()  # OR-Tools' import (a second or more) is not the plan's time, as in a round
    start = time.perf_counter()
    result = plan(state, policy)
    return result.with_plan_ms((time.perf_counter() - start) * 1000.0)


@app.command("plan")
def plan_cmd(
    file: FileArg = None,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help="For a scenario: plan on its state at this time (30s, 5m, 70); default: the first "
            "moment a pod is pending.",
            show_default=False,
        ),
    ] = None,
    output: Annotated[str, output_option(PLAN_FORMATS)] = "",
    json_out: JsonOpt = False,
    exact: Annotated[
        bool | None,
        typer.Option(
            "--exact/--no-exact",
            help="--exact: the exact joint search over all pending pods at once (CP-SAT, the exact "
            "extra) with its full time limit: the proven optimum on small and mid-size clusters, or the "
            "best found with its bound. --no-exact: the default search alone. Neither: as the "
            "controller plans (the exact search where OR-Tools is installed and the cluster within "
            "its size, seeded by the default search).",
            show_default=False,
        ),
    ] = None,
    groups: Annotated[
        Path | None,
        typer.Option(
            "--groups",
            help="For a dump without the autoscaler's status: a YAML file with each node group's min, max, "
            "price_per_hour and node template (see docs/planner.md).",
        ),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="Plan on the live cluster (read only) instead of FILE."),
    ] = None,
    context: Annotated[str | None, typer.Option("--context", help="With --kubeconfig: the context.")] = None,
    consolidate: Annotated[
        bool,
        typer.Option(
            "--consolidate/--no-consolidate",
            help="When no pod waits, also show the consolidation the controller would start.",
        ),
    ] = True,
    values: Annotated[
        Path | None,
        typer.Option(
            "--values",
            help="Plan as the controller the Helm chart installs with these values (values.yaml) would.",
        ),
    ] = None,
    strategy: Annotated[
        str | None,
        typer.Option(
            "--strategy",
            help="evict or migrate (make-before-break); default: the scenario's, the values', the live "
            f"controller's, else {DEFAULT.strategy}.",
            show_default=False,
        ),
    ] = None,
    autoscaler_expander: Annotated[
        str | None,
        typer.Option(
            "--autoscaler-expander",
            metavar="EXPANDER",
            help="The cluster-autoscaler's --expander, as makeroom run takes it; default: the scenario's "
            f"autoscaler, the values', the live controller's, else {DEFAULT.autoscaler_expander}.",
            show_default=False,
        ),
    ] = None,
    max_moves: Annotated[
        int | None,
        typer.Option(
            "--max-moves", help="Most pods moved at once, as makeroom run takes it.", show_default=False
        ),
    ] = None,
    cooldown: Annotated[
        str | None,
        typer.Option(
            "--cooldown", help="A moved pod is not moved again within this time.", show_default=False
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", help="For a scenario: the simulation's seed, as simulate takes it.")
    ] = 0,
) -> None:
    """Show what makeroom would move, and where, so that the pending pods can run; change nothing.

    It plans as the controller would: with the configuration of --values, else of the controller
    running in the cluster (--kubeconfig), else of the scenario, else makeroom run's defaults; the
    flags override it. Exit status 3 when pods are pending (the plan says what would place them), 0
    when none is."""

    def go() -> bool:
        fmt = output_format(output, json_out, PLAN_FORMATS)
        when: float | None = None
        if at is not None:
            try:
                when = limits.duration(at)
            except limits.InvalidValueError as exc:
                usage_error(f"--at: {exc}")
        live: LiveController | None = None
        if kubeconfig is not None:
            from makeroom.cli.run import live_state

            state, now, origin, live = live_state(kubeconfig, context, groups)
            loaded = Loaded(state, now, origin)
        elif file is None:
            usage_error("give a FILE, or --kubeconfig to plan on a live cluster")
        else:
            loaded = load_state(file, when, groups, seed)
        state, now, origin, why = loaded.state, loaded.now, loaded.origin, loaded.why
        chosen = choose_controller(
            loaded, live, values, Overrides(strategy, autoscaler_expander, max_moves, cooldown)
        )
        policy = plan_policy(chosen.config, chosen.scope, state, now)
        if exact is not None:  # the search asked for, not the controller's
            policy = replace(
                policy, exact=exact, exact_if_available=False, exact_budget=Policy().exact_budget
            )
        try:
            result = timed_plan(state, policy)
        except ExactUnavailableError as exc:
            usage_error(f"--exact: {exc}")
        chains = chain_cost(state, policy, result)
        waiting = result.unplaceable or any(
            p.reason is not PlacementReason.FITS_NOW for p in result.placements
        )
        found = None
        blind = consolidate and not waiting and unpriced(state)
        if consolidate and not waiting:
            found = planner_consolidate(
                state,
                plan_consolidation_policy(chosen.config, chosen.scope, state, now),
            )
        if fmt.data:
            data = result.to_json()
            data["chains"] = None if chains is None else chains.to_json()
            if consolidate:
                data["consolidation"] = consolidation_json(found)
            for line in (why, chosen.sentence()):
                if line:
                    note(line)  # stderr: stdout holds only the plan object
            if blind:
                note(UNPRICED)
            emit(data, fmt)
        else:
            if why:
                say(why)
            print_plan(result, origin)
            if chains is not None:
                say("  " + chains.sentence())
            if found is not None:
                print_consolidation(found)
            if blind:
                say(UNPRICED)
            say(chosen.sentence())
        return bool(result.stats.pending)

    if guarded(go):
        raise typer.Exit(ExitStatus.PENDING)


def consolidation_json(found: Consolidation | None) -> dict[str, Any] | None:
    """The optional ``consolidation`` key of the plan object (an extension of spec v1)."""
    if found is None:
        return None
    return {
        "node": found.node,
        "group": found.group,
        "moves": [s.to_json() for s in found.shifts],
        "scale_ups": dict(found.scale_ups),
        "saving_per_hour": round(found.saving_per_hour, 6),
    }


def print_consolidation(found: Consolidation) -> None:
    added = ", ".join(f"{g} +{n}" for g, n in found.scale_ups.items()) or "none"
    say(
        f"consolidation of {found.node} ({found.group}): {count(len(found.shifts), 'move')}, "
        f"new nodes: {added}, saves {per_hour(found.saving_per_hour)}"
    )
    for s in found.shifts:
        to = s.to_node if s.to_node is not None else f"a new {s.to_new_node_group} node"
        say(f"  move {s.pod.name} ({s.workload}) {s.pod.node} -> {to}")


def print_plan(result: Plan, origin: str) -> None:
    """A header that counts what follows, then a line per placement and its moves."""
    s = result.stats
    new_nodes = ", ".join(f"{g} +{n}" for g, n in result.scale_ups.items()) or "none"
    by_reason = {r: sum(1 for p in result.placements if p.reason is r) for r in PlacementReason}
    placed = ", ".join(f"{n} {r.value}" for r, n in by_reason.items() if n)
    if not s.pending:
        say(f"{origin}: nothing is pending ({s.plan_ms:.1f} ms{', exact' if s.exact else ''})")
        return
    say(
        f"{origin}: {count(s.pending, 'pending pod')}: {len(result.placements)} placed"
        + (f" ({placed})" if placed else "")
        + (f", {len(result.unplaceable)} cannot be placed" if result.unplaceable else "")
        + f"; {count(len(result.moves), 'move')}, "
        f"new nodes: {new_nodes} ({s.plan_ms:.1f} ms{', exact' if s.exact else ''})"
    )
    for p in result.placements:
        where = p.node if p.node is not None else f"a new {p.new_node_group} node"
        say(f"  place {p.pod.name} on {where}: {p.reason.value}: {p.detail}")
        for m in result.moves_for(p.pod):
            to = m.to_node if m.to_node is not None else f"new {m.to_new_node_group} node #{m.new_node_index}"
            say(f"    move {m.pod.name} ({m.workload}) {m.from_node} -> {to}: {m.reason}")
    for u in result.unplaceable:
        say(f"  cannot place {u.pod.name}: {u.reason.value}: {u.why}")
    if result.optimality is not None and (result.placements or result.unplaceable):
        say("  " + optimality_line(result))


# What each part of the objective means to a reader, as proven and as still open (planner.LEVELS).
_PROVEN = {
    "placed": "no plan places more of the pending pods",
    "cost_per_hour": "none buys cheaper new nodes",
    "new_nodes": "none buys fewer new nodes at that cost",
    "moves": "none moves fewer pods",
    "moved_priority": "none moves pods of lower priority",
}


def _open(level: str, plan: Objective, bound: Objective) -> str:
    """The part where a better plan may exist, and by how much at most."""
    if level == "placed":
        return "a plan that places more of the pending pods may exist"
    if level == "cost_per_hour":
        return f"a plan up to {per_hour(plan.cost - bound.cost)} cheaper in new nodes may exist"
    if level == "new_nodes":
        n = plan.new_nodes - bound.new_nodes
        return f"a plan with up to {n} fewer new {'node' if n == 1 else 'nodes'} may exist"
    if level == "moves":
        n = plan.moves - bound.moves
        return f"a plan with up to {n} fewer {'move' if n == 1 else 'moves'} may exist"
    return "a plan that moves pods of lower priority may exist"


def optimality_line(result: Plan) -> str:
    """Whether the plan is proven the best possible, in words: what is proven, and what is not."""
    o = result.optimality
    assert o is not None
    levels = list(_PROVEN)
    if o.proof is Proof.OPTIMAL:
        return (
            f"this plan is the best possible: {'; '.join(_PROVEN.values())} (proven by the {o.search} search)"
        )
    gap = o.gap or levels[-1]
    proven = [_PROVEN[x] for x in levels[: levels.index(gap)]]
    said = f"proven: {'; '.join(proven)}; not proven: " if proven else "not proven optimal: "
    hint = (
        "; the exact search ran out of time before proving more"
        if result.stats.exact or o.search.startswith("exact")
        else "; --exact can prove it or find it"
    )
    return f"{said}{_open(gap, o.objective, o.bound)} (this plan: {o.objective.human()}){hint}"
