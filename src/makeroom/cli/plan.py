"""``makeroom plan``: what makeroom would move, where, and why, without doing it."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from makeroom.cli.app import app
from makeroom.cli.common import guarded, print_json, say, usage_error
from makeroom.errors import InputError, Problem
from makeroom.model import limits
from makeroom.model.state import ClusterState
from makeroom.planner import PlacementReason, Plan, Policy, plan
from makeroom.planner.consolidate import Consolidation, ConsolidationPolicy
from makeroom.planner.consolidate import consolidate as planner_consolidate
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


def state_of_scenario(data: Any, file: str, at: float) -> ClusterState:
    """The scenario's cluster at ``at`` seconds, reached by simulating with strategy ``none``."""
    from makeroom.sim import Options, Simulation

    scenario = parse_scenario(data, file)
    sim = Simulation(scenario, Options(strategy="none", keep_events=False, keep_samples=False))
    sim.run(until=at)
    return sim.world.state


def state_of_dump(data: Mapping[str, Any], file: str, groups: GroupConfig | None) -> ClusterState:
    if "items" in data:
        items = data["items"]
        if not isinstance(items, list):
            raise InputError(file, [Problem("items", "expected a list of Kubernetes objects")])
    else:
        items = [data]
    return state_from_objects(items, groups, None, source=file, prefix="items")


def load_state(file: Path, at: float, groups_file: Path | None) -> tuple[ClusterState, float, str]:
    """The state to plan on, the planner's ``now``, and a short description of where it came from."""
    data = read_data(file)
    if is_kube_dump(data):
        groups = parse_group_config(read_yaml(groups_file), str(groups_file)) if groups_file else None
        state = state_of_dump(data, str(file), groups)
        return state, time.time(), f"{file} (a dump of {len(state.nodes)} nodes, {len(state.pods)} pods)"
    if groups_file is not None:
        raise InputError("--groups", [Problem("", "applies to a Kubernetes dump, not to a scenario")])
    name = data.get("name", file.stem) if isinstance(data, Mapping) else file.stem
    return state_of_scenario(data, str(file), at), at, f"{name} at {at:g}s"


def timed_plan(state: ClusterState, policy: Policy) -> Plan:
    start = time.perf_counter()
    result = plan(state, policy)
    return result.with_plan_ms((time.perf_counter() - start) * 1000.0)


@app.command("plan")
def plan_cmd(
    file: FileArg = None,
    at: Annotated[
        str, typer.Option("--at", help="For a scenario: plan on its state at this time (30s, 5m, 70).")
    ] = "0",
    json_out: Annotated[bool, typer.Option("--json", help="Print the plan object of the spec.")] = False,
    exact: Annotated[
        bool, typer.Option("--exact", help="Exhaustive search per pending pod (small clusters only).")
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
    """Show what makeroom would move, and where, so that the pending pods can run; change nothing."""

    def go() -> None:
        try:
            when = limits.duration(at)
        except limits.InvalidValueError as exc:
            usage_error(f"--at: {exc}")
        if kubeconfig is not None:
            from makeroom.cli.run import live_state

            state, now, origin = live_state(kubeconfig, context, groups)
        elif file is None:
            usage_error("give a FILE, or --kubeconfig to plan on a live cluster")
        else:
            state, now, origin = load_state(file, when, groups)
        result = timed_plan(state, Policy(now=now, exact=exact))
        waiting = result.unplaceable or any(
            p.reason is not PlacementReason.FITS_NOW for p in result.placements
        )
        found = None
        if consolidate and not waiting:
            found = planner_consolidate(state, ConsolidationPolicy(now=now))
        if json_out:
            data = result.to_json()
            if consolidate:
                data["consolidation"] = consolidation_json(found)
            print_json(data)
        else:
            print_plan(result, origin)
            if found is not None:
                print_consolidation(found)

    guarded(go)


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
    say(f"  consolidate: {found.why()}")
    for s in found.shifts:
        to = s.to_node if s.to_node is not None else f"a new {s.to_new_node_group} node"
        say(f"    move {s.pod.name} ({s.workload}) {s.pod.node} -> {to}")


def print_plan(result: Plan, origin: str) -> None:
    s = result.stats
    new_nodes = ", ".join(f"{g} +{n}" for g, n in result.scale_ups.items()) or "none"
    say(
        f"{origin}: {s.pending} pending pod(s), {s.moves} move(s), new nodes: {new_nodes} "
        f"({s.plan_ms:.1f} ms{', exact' if s.exact else ''})"
    )
    for p in result.placements:
        where = p.node if p.node is not None else f"a new {p.new_node_group} node"
        say(f"  place {p.pod.name} on {where}: {p.reason.value}: {p.detail}")
        for m in result.moves_for(p.pod):
            to = m.to_node if m.to_node is not None else f"new {m.to_new_node_group} node #{m.new_node_index}"
            say(f"    move {m.pod.name} ({m.workload}) {m.from_node} -> {to}: {m.reason}")
    for u in result.unplaceable:
        say(f"  cannot place {u.pod.name}: {u.reason.value}: {u.reason.why}")
    if not result.placements and not result.unplaceable:
        say("  nothing is pending")
