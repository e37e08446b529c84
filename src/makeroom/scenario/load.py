"""Read a scenario file, check every rule of spec v1, and turn it into model objects."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from makeroom.controller.config import Strategy
from makeroom.errors import InputError, Problem, from_validation_error
from makeroom.model import (
    AutoscalerKind,
    Disruption,
    DisruptionBudget,
    HostPort,
    InclusionPolicy,
    InstanceType,
    LabelSelector,
    Node,
    NodeBudget,
    NodeGroup,
    NodeSelectorRequirement,
    Pod,
    PodAffinityTerm,
    PodSpec,
    PreemptionPolicy,
    Resources,
    Taint,
    TaintEffect,
    Toleration,
    TopologySpreadConstraint,
    UnsatisfiableAction,
    Workload,
    limits,
)
from makeroom.model.fit import FitFailure
from makeroom.model.nodepool import NODES
from makeroom.model.provisioning import node_labels
from makeroom.model.resources import DEFAULT_MAX_PODS, PODS
from makeroom.model.scheduling import feasible, filter_nodes
from makeroom.model.state import ClusterState
from makeroom.scenario.files import read_yaml
from makeroom.scenario.schema import AffinitySpec, EventSpec, NodeGroupSpec, ScenarioSpec, WorkloadSpec


@dataclass(frozen=True, slots=True)
class Scenario:
    """A checked scenario: the raw spec plus the model objects that the simulator starts from."""

    spec: ScenarioSpec
    source: str
    groups: tuple[NodeGroup, ...]
    workloads: tuple[Workload, ...]
    initial_nodes: tuple[Node, ...]
    placement: tuple[tuple[str, str], ...]  # (workload, node), one entry per initial pod
    deployed: dict[str, Workload] = field(default_factory=dict)  # workloads of deploy events

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def strategy(self) -> Strategy:
        return self.spec.controller.strategy

    @property
    def autoscaler(self) -> AutoscalerKind:
        return self.spec.autoscaler.kind


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    data = read_yaml(path)
    return parse_scenario(data, str(path))


def parse_scenario(data: Any, file: str) -> Scenario:
    if not isinstance(data, dict):
        raise InputError(file, [Problem("", "expected a YAML mapping with version: 1 at the top")])
    try:
        spec = ScenarioSpec.model_validate(data)
    except ValidationError as exc:
        raise InputError(file, from_validation_error(exc)) from None
    problems = check_rules(spec)
    if problems:
        raise InputError(file, problems)
    groups = to_node_groups(spec.node_groups)
    workloads = tuple(to_workload(w) for w in spec.workloads)
    deployed = {e.deploy.name: to_workload(e.deploy) for e in spec.events if e.deploy is not None}
    karpenter = spec.autoscaler.kind == AutoscalerKind.KARPENTER
    nodes = tuple(
        Node(
            f"{g.name}-{i}",
            g.name,
            g.capacity,
            {**node_labels(g, g.types()[0]), **g.zone_label(i)} if karpenter else g.node_labels(i),
            g.taints,
        )
        for g in groups
        for i in range(next(s.initial for s in spec.node_groups if s.name == g.name))
    )
    placement, placement_problems = place_initial(spec, groups, workloads, nodes)
    if placement_problems:
        raise InputError(file, placement_problems)
    return Scenario(spec, file, groups, workloads, nodes, tuple(placement), deployed)


def check_rules(spec: ScenarioSpec) -> list[Problem]:
    """The rules that span keys: unique names, bounds, references from events and placement."""
    problems: list[Problem] = []
    group_names: set[str] = set()
    for i, g in enumerate(spec.node_groups):
        where = f"node_groups[{i}]"
        if g.name in group_names:
            problems.append(Problem(f"{where}.name", f"expected a unique name, {g.name!r} is taken"))
        group_names.add(g.name)
        if g.min > g.max:
            problems.append(Problem(f"{where}.min", f"expected min <= max ({g.max}), got {g.min}"))
        if g.initial > g.max:
            problems.append(
                Problem(f"{where}.initial", f"expected initial <= max ({g.max}), got {g.initial}")
            )
        problems += _whole_units(g.capacity, f"{where}.capacity")
        for j, it in enumerate(g.instance_types):
            problems += _whole_units(it.capacity, f"{where}.instance_types[{j}].capacity")
        problems += _check_pool(g, where)
        problems += _check_priced(g, where)
    problems += _check_types_agree(spec)
    weighted = [i for i, g in enumerate(spec.node_groups) if g.weight is not None]
    if weighted and len(weighted) < len(spec.node_groups):
        unweighted = next(i for i, g in enumerate(spec.node_groups) if g.weight is None)
        problems.append(
            Problem(
                f"node_groups[{unweighted}].weight",
                "expected a weight on every group or on none (without weights, the list order is "
                "the preference)",
            )
        )
    initial_nodes = {f"{g.name}-{i}" for g in spec.node_groups for i in range(g.initial)}
    node_pattern = re.compile(
        r"^(" + "|".join(re.escape(n) for n in sorted(group_names, key=len, reverse=True)) + r")-\d+$"
    )
    live: set[str] = set()
    for i, w in enumerate(spec.workloads):
        where = f"workloads[{i}]"
        if w.name in live:
            problems.append(Problem(f"{where}.name", f"expected a unique name, {w.name!r} is taken"))
        live.add(w.name)
        problems += _whole_units(w.requests, f"{where}.requests")
        placed = 0
        for target, count in w.placement.items():
            if target not in group_names and target not in initial_nodes:
                problems.append(
                    Problem(
                        f"{where}.placement.{target}",
                        "expected a node group name or an initial node name "
                        f"({', '.join(sorted(group_names | initial_nodes))})",
                    )
                )
            placed += count
        if placed > w.replicas:
            problems.append(
                Problem(
                    f"{where}.placement",
                    f"expected at most replicas ({w.replicas}) pods placed, got {placed}",
                )
            )
    for i, e in enumerate(spec.events):
        problems += _check_event(e, f"events[{i}]", spec, live, node_pattern)
    problems += _check_headroom(spec, group_names)
    # Each count is in range; so must their sum be, or a file of many small parts is a cluster larger
    # than Kubernetes runs (and a simulation that does not end).
    nodes = sum(g.initial for g in spec.node_groups)
    if nodes > limits.MAX_NODES:
        problems.append(
            Problem("node_groups", f"expected at most {limits.MAX_NODES} initial nodes in all, got {nodes}")
        )
    pods = sum(w.replicas for w in spec.workloads)
    if pods > limits.MAX_REPLICAS:
        problems.append(
            Problem(
                "workloads",
                f"expected at most {limits.MAX_REPLICAS} replicas in all at the start, got {pods}",
            )
        )
    return problems


def _check_headroom(spec: ScenarioSpec, group_names: set[str]) -> list[Problem]:
    """Each headroom target names a group of the file, and a workload it deploys (at the start or
    by an event)."""
    problems = []
    deployed = {w.name for w in spec.workloads} | {e.deploy.name for e in spec.events if e.deploy}
    for i, t in enumerate(spec.controller.headroom.targets):
        where = f"controller.headroom.targets[{i}]"
        if t.group not in group_names:
            problems.append(
                Problem(f"{where}.group", f"expected a node group name ({', '.join(sorted(group_names))})")
            )
        workload = t.for_.workload
        if workload is not None and workload.removeprefix("default/") not in deployed:
            problems.append(
                Problem(f"{where}.for.workload", f"expected a workload of the file, got {workload!r}")
            )
        if t.for_.requests is not None:
            problems += _whole_units(t.for_.requests, f"{where}.for.requests")
    return problems


def _whole_units(quantities: Mapping[str, int], where: str) -> list[Problem]:
    """Extended resources (nvidia.com/gpu ...) and pods count whole units, as Kubernetes requires."""
    problems = []
    for name, milli in quantities.items():
        try:
            limits.whole_units(name, milli, f"{milli / 1000:g}")
        except limits.InvalidValueError as exc:
            problems.append(Problem(f"{where}.{name}", str(exc)))
    return problems


def _check_priced(g: NodeGroupSpec, where: str) -> list[Problem]:
    """Every node has a price the file states: a missing one would make "the lowest cost" mean nothing.
    ``price_per_hour: 0`` says a free group on purpose."""
    if not g.instance_types:
        return (
            []
            if "price_per_hour" in g.model_fields_set
            else [Problem(f"{where}.price_per_hour", limits.MISSING_PRICE)]
        )
    return [
        Problem(f"{where}.instance_types[{j}].price_per_hour", limits.MISSING_PRICE)
        for j, it in enumerate(g.instance_types)
        if "price_per_hour" not in it.model_fields_set
    ]


def _check_pool(g: NodeGroupSpec, where: str) -> list[Problem]:
    """The rules of a group's extensions for Karpenter: one description of its nodes, distinct
    instance types, the node limit in max."""
    problems: list[Problem] = []
    given = "capacity" in g.model_fields_set
    if not given and not g.instance_types:
        problems.append(
            Problem(f"{where}.capacity", "expected the allocatable of one node (or instance_types)")
        )
    if g.instance_types:
        if given:
            problems.append(
                Problem(f"{where}.instance_types", "expected capacity or instance_types, not both")
            )
        if "price_per_hour" in g.model_fields_set:
            problems.append(
                Problem(
                    f"{where}.price_per_hour",
                    "expected the price on each of instance_types, not on the group",
                )
            )
        seen: set[str] = set()
        for j, it in enumerate(g.instance_types):
            if it.name in seen:
                problems.append(
                    Problem(
                        f"{where}.instance_types[{j}].name",
                        f"expected a unique name, {it.name!r} is taken",
                    )
                )
            seen.add(it.name)
    if NODES in g.limits:
        problems.append(Problem(f"{where}.limits.{NODES}", "expected the node limit as max, not in limits"))
    return problems


def _check_types_agree(spec: ScenarioSpec) -> list[Problem]:
    """An instance type is the cloud's, not a pool's: two pools that list one name describe one type."""
    problems: list[Problem] = []
    seen: dict[str, tuple[str, dict[str, int], float]] = {}
    for i, g in enumerate(spec.node_groups):
        for j, it in enumerate(g.instance_types):
            where = f"node_groups[{i}].instance_types[{j}]"
            first = seen.setdefault(it.name, (where, dict(it.capacity), it.price_per_hour))
            if first[0] != where and (first[1], first[2]) != (dict(it.capacity), it.price_per_hour):
                problems.append(
                    Problem(
                        f"{where}.name", f"expected {it.name!r} described as at {first[0]}, or another name"
                    )
                )
    return problems


def _check_event(
    e: EventSpec, where: str, spec: ScenarioSpec, live: set[str], node_pattern: re.Pattern[str]
) -> list[Problem]:
    problems: list[Problem] = []
    if e.at > spec.duration:
        problems.append(
            Problem(
                f"{where}.at",
                f"expected a time within duration ({spec.duration:g}s), got {e.at:g}s",
            )
        )
    target = e.scale or e.delete
    if target is not None and target.workload not in live:
        problems.append(
            Problem(
                f"{where}.{e.kind}.workload",
                f"expected a workload that exists at {e.at:g}s, got {target.workload!r}",
            )
        )
    if e.delete is not None:
        live.discard(e.delete.workload)
    if e.deploy is not None:
        if e.deploy.name in live:
            problems.append(
                Problem(
                    f"{where}.deploy.name",
                    f"expected a new workload name, {e.deploy.name!r} exists",
                )
            )
        if e.deploy.placement:
            problems.append(
                Problem(f"{where}.deploy.placement", "placement applies only to workloads at t=0")
            )
        live.add(e.deploy.name)
        problems += _whole_units(e.deploy.requests, f"{where}.deploy.requests")
    node_action = e.remove_node or e.cordon or e.uncordon
    if node_action is not None and not node_pattern.match(node_action.node):
        problems.append(
            Problem(
                f"{where}.{e.kind}.node",
                f"expected a node name <group>-<n> of a known group, got {node_action.node!r}",
            )
        )
    return problems


def to_node_groups(specs: list[NodeGroupSpec]) -> tuple[NodeGroup, ...]:
    """The groups; without weights, the list order is the preference: the first gets weight 100,
    the next 99, and so on (1 at the least)."""
    weighted = any(g.weight is not None for g in specs)
    return tuple(to_node_group(g, g.weight if weighted else max(1, 100 - i)) for i, g in enumerate(specs))


def _allocatable(capacity: dict[str, int]) -> Resources:
    out = dict(capacity)
    out.setdefault(PODS, DEFAULT_MAX_PODS * 1000)
    return Resources(out)


def to_node_group(g: NodeGroupSpec, weight: int | None = None) -> NodeGroup:
    types = tuple(
        InstanceType(t.name, _allocatable(t.capacity), t.price_per_hour, dict(t.labels))
        for t in g.instance_types
    )
    first = types[0] if types else None
    return NodeGroup(
        name=g.name,
        capacity=first.capacity if first is not None else _allocatable(g.capacity),
        labels=dict(g.labels),
        taints=tuple(Taint(t.key, t.value, TaintEffect(t.effect)) for t in g.taints),
        min=g.min,
        max=g.max,
        price_per_hour=first.price_per_hour if first is not None else g.price_per_hour,
        provision_time=g.provision_time,
        weight=g.weight if weight is None else weight,
        limits=Resources(dict(g.limits)),
        instance_types=types,
        requirements=tuple(
            NodeSelectorRequirement(r.key, r.operator, tuple(r.values)) for r in g.requirements
        ),
        disruption=Disruption(
            g.disruption.consolidation_policy,
            g.disruption.consolidate_after,
            tuple(NodeBudget(b.nodes, tuple(b.reasons)) for b in g.disruption.budgets),
        ),
        zones=tuple(g.zones),
    )


def pod_labels(w: WorkloadSpec) -> dict[str, str]:
    return dict(w.labels) or {"app": w.name}


def _selector(match_labels: dict[str, str] | None, own: dict[str, str]) -> LabelSelector:
    return LabelSelector(tuple(sorted((own if match_labels is None else match_labels).items())))


def _term(a: AffinitySpec, own: dict[str, str]) -> PodAffinityTerm:
    return PodAffinityTerm(a.topology_key, _selector(a.match_labels, own), tuple(a.namespaces))


def to_workload(w: WorkloadSpec) -> Workload:
    own = pod_labels(w)
    spec = PodSpec(
        requests=Resources(dict(w.requests)),
        priority=w.priority,
        preemption_policy=PreemptionPolicy(w.preemption_policy),
        node_selector=tuple(sorted(w.node_selector.items())),
        tolerations=tuple(Toleration(t.key, t.operator, t.value, t.effect) for t in w.tolerations),
        startup_time=w.startup_time,
        termination_grace=w.termination_grace,
        pod_affinity=tuple(_term(a, own) for a in w.affinity),
        pod_anti_affinity=tuple(_term(a, own) for a in w.anti_affinity),
        topology_spread=tuple(
            TopologySpreadConstraint(
                c.max_skew,
                c.topology_key,
                UnsatisfiableAction(c.when_unsatisfiable),
                _selector(c.match_labels, own),
                c.min_domains,
                InclusionPolicy(c.node_affinity_policy),
                InclusionPolicy(c.node_taints_policy),
                tuple(c.match_label_keys),
            )
            for c in w.topology_spread
        ),
        host_ports=tuple(HostPort(h.port, h.protocol, h.host_ip) for h in w.host_ports),
    )
    pdb = None
    if w.pdb is not None:
        pdb = DisruptionBudget(w.pdb.max_unavailable, w.pdb.min_available)
    return Workload(w.name, spec, w.replicas, pdb=pdb, labels=own)


def place_initial(
    spec: ScenarioSpec,
    groups: tuple[NodeGroup, ...],
    workloads: tuple[Workload, ...],
    nodes: tuple[Node, ...],
) -> tuple[list[tuple[str, str]], list[Problem]]:
    """First-fit of each placement entry over its group's nodes in creation order."""
    state = ClusterState(groups, workloads)
    for node in nodes:
        state.add_node(Node(node.name, node.group, node.allocatable, dict(node.labels), node.taints))
    by_group: dict[str, list[str]] = {}
    for node in nodes:
        by_group.setdefault(node.group, []).append(node.name)
    group_names = {g.name for g in groups}
    placed: list[tuple[str, str]] = []
    problems: list[Problem] = []
    for i, (ws, w) in enumerate(zip(spec.workloads, workloads, strict=True)):
        for target, count in ws.placement.items():
            # A group's nodes in creation order (none when it starts empty), or the one node named.
            candidates = by_group.get(target, []) if target in group_names else [target]
            for n in range(count):
                pod = Pod(f"{w.name}-{len(placed)}", w.spec, w.name, labels=dict(w.labels))
                mask = feasible(state, pod)
                home = next((c for c in candidates if mask[state.slot_of[c]]), None)
                if home is None:
                    problems.append(
                        Problem(
                            f"workloads[{i}].placement.{target}",
                            f"expected {count} pods to fit on {target}, only {n} do"
                            + _why_not(state, pod, [c for c in candidates if c in state.nodes]),
                        )
                    )
                    break
                state.add_pod(pod)
                state.bind(pod, home)
                placed.append((w.name, home))
    return placed, problems


def _why_not(state: ClusterState, pod: Pod, nodes: list[str]) -> str:
    if not nodes:
        return " (the group has no initial nodes)"
    failure = filter_nodes(state, pod)[nodes[0]]
    if failure is None or failure is FitFailure.INSUFFICIENT:
        return " (not enough free resources)"
    return f" ({failure.value})"
