"""``makeroom plan``: what makeroom would move, where, and why, without doing it."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from makeroom.cli.app import app
from makeroom.cli.common import (
    ExitStatus,
    JsonOpt,
    Output,
    OutputOpt,
    emit,
    err_console,
    guarded,
    output_format,
    say,
    usage_error,
)
from makeroom.controller import Strategy
from makeroom.errors import InputError, Problem
from makeroom.model import limits
from makeroom.model.state import ClusterState
from makeroom.planner import PlacementReason, Plan, Policy, Proof, plan
from makeroom.planner.consolidate import Consolidation, ConsolidationPolicy
from makeroom.planner.consolidate import consolidate as planner_consolidate
from makeroom.planner.cpsat import ExactUnavailableError
from makeroom.report.units import count, duration, per_hour
from makeroom.scenario import parse_scenario, read_data, read_yaml
from makeroom.snapshot import GroupConfig, is_kube_dump, parse_group_config, state_from_objects

FileArg = Annotated[
    Path | None,
    typer.Argument(
        help="A scenario file (spec v1), or a dump: kubectl get nodes,pods,poddisruptionbudgets -A -o yaml "
        "(optionally with the cluster-autoscaler-status ConfigMap among the items).",
        show_default=False,
    ),
]


def state_of_scenario(data: Any, file: str, at: float | None) -> tuple[ClusterState, float, str]:
    """The scenario's cluster at ``at`` seconds, reached by simulating with strategy ``none``; by
    default at the first moment a pod is pending. Returns the state, the time, and why that time."""
    from makeroom.sim import Options, Simulation

    scenario = parse_scenario(data, file)
    end = scenario.spec.duration
    if at is not None and at > end:
        raise InputError(
            "--at",
            [Problem("", f"expected a time within the scenario's {duration(end)}, got {duration(at)}")],
        )
    why = ""
    if at is None:
        at, why = first_pending(scenario)
    sim = Simulation(scenario, Options(Strategy.NONE, keep_events=False, keep_samples=False))
    sim.run(until=at)
    return sim.world.state, at, why


def first_pending(scenario: Any) -> tuple[float, str]:
    """The first moment a pod cannot be scheduled when nothing is moved, and a sentence saying so."""
    from makeroom.sim import Options, Simulation

    sim = Simulation(scenario, Options(Strategy.NONE, keep_samples=False))
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


def load_state(
    file: Path, at: float | None, groups_file: Path | None
) -> tuple[ClusterState, float, str, str]:
    """The state to plan on, the planner's ``now``, a short description of where it came from, and
    for a scenario planned at its first pending moment, a sentence saying so."""
    data = read_data(file)
    if is_kube_dump(data):
        groups = parse_group_config(read_yaml(groups_file), str(groups_file)) if groups_file else None
        state = state_of_dump(data, str(file), groups)
        return state, time.time(), f"{file} (a dump of {len(state.nodes)} nodes, {len(state.pods)} pods)", ""
    if groups_file is not None:
        raise InputError("--groups", [Problem("", "applies to a Kubernetes dump, not to a scenario")])
    name = data.get("name", file.stem) if isinstance(data, Mapping) else file.stem
    state, when, why = state_of_scenario(data, str(file), at)
    return state, when, f"{name} at {duration(when)}", why


def note(text: str) -> None:
    """A remark on stderr, for output formats whose stdout is data only."""
    err_console.print(text, markup=False, highlight=False, soft_wrap=True)


def timed_plan(state: ClusterState, policy: Policy) -> Plan:
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
    output: OutputOpt = "",
    json_out: JsonOpt = False,
    exact: Annotated[
        bool,
        typer.Option(
            "--exact",
            help="Exact joint search over all pending pods at once (CP-SAT, the exact extra): the "
            "proven optimum on small and mid-size clusters, or the best found with its bound.",
        ),
    ] = False,
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
) -> None:
    """Show what makeroom would move, and where, so that the pending pods can run; change nothing.

    Exit status 3 when pods are pending (the plan says what would place them), 0 when none is."""

    def go() -> bool:
        fmt = output_format(output, json_out, (Output.TABLE, Output.JSON, Output.YAML))
        when: float | None = None
        if at is not None:
            try:
                when = limits.duration(at)
            except limits.InvalidValueError as exc:
                usage_error(f"--at: {exc}")
        why = ""
        if kubeconfig is not None:
            from makeroom.cli.run import live_state

            state, now, origin = live_state(kubeconfig, context, groups)
        elif file is None:
            usage_error("give a FILE, or --kubeconfig to plan on a live cluster")
        else:
            state, now, origin, why = load_state(file, when, groups)
        try:
            result = timed_plan(state, Policy(now=now, exact=exact))
        except ExactUnavailableError as exc:
            usage_error(f"--exact: {exc}")
        waiting = result.unplaceable or any(
            p.reason is not PlacementReason.FITS_NOW for p in result.placements
        )
        found = None
        if consolidate and not waiting:
            found = planner_consolidate(state, ConsolidationPolicy(now=now))
        if fmt.data:
            data = result.to_json()
            if consolidate:
                data["consolidation"] = consolidation_json(found)
            if why:
                note(why)  # stderr: stdout holds only the plan object
            emit(data, fmt)
        else:
            if why:
                say(why)
            print_plan(result, origin)
            if found is not None:
                print_consolidation(found)
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


def optimality_line(result: Plan) -> str:
    """Whether the plan is proven optimal, or the best found and how far from the bound."""
    o = result.optimality
    assert o is not None
    if o.proof is Proof.OPTIMAL:
        return f"optimal (proven, {o.search}): {o.objective.human()}"
    hint = "" if result.stats.exact else "; --exact searches for the optimum"
    return (
        f"best found ({o.search}, not proven optimal): {o.objective.human()}; "
        f"no plan beats {o.bound.human()} (first open: {o.gap}){hint}"
    )
