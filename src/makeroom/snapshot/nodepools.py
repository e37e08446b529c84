"""Karpenter's NodePools and NodeClaims (``karpenter.sh/v1``) as node groups and upcoming nodes.

A NodePool becomes a group of the same name: its weight, its limits (``nodes`` as the group's max), its
template's labels, taints and requirements, and its disruption settings. Its instance types and their
prices are not in the API (the cloud provider knows them): they come from the ``--groups`` file
(``groups[].instance_types``), else from the pool's nodes and NodeClaims (the instance-type label and the
allocatable, priced by the file's ``price_per_hour`` or by the ``eks-node-viewer/instance-price`` label
that Karpenter's KWOK provider sets), else from the file's ``capacity``. A NodeClaim whose node has not
registered yet is a node coming up, of its pool, with the NodeClaim's allocatable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from makeroom.errors import Problem
from makeroom.model import (
    GROUP_LABEL,
    ConsolidationPolicy,
    Disruption,
    InstanceType,
    Node,
    NodeBudget,
    NodeGroup,
    NodeSelectorRequirement,
    QuantityError,
    Resources,
    Taint,
    format_quantity,
    parse_duration,
)
from makeroom.model.nodepool import INSTANCE_TYPE_LABEL, NODEPOOL_LABEL, NODES
from makeroom.model.provisioning import launchable
from makeroom.model.resources import DEFAULT_MAX_PODS, PODS
from makeroom.snapshot.groups import GroupConfig, parse_taints
from makeroom.snapshot.quantities import quantity

KINDS = ("NodePool", "NodeClaim")
PRICE_LABEL = "eks-node-viewer/instance-price"  # set by Karpenter's KWOK provider on its nodes
UNLIMITED = 1_000_000
"""The max of a pool without a node limit: more nodes than any cluster has."""
_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})


@dataclass(frozen=True, slots=True)
class Pool:
    """What a NodePool object says, checked."""

    name: str
    weight: int | None
    limits: Resources
    nodes: int | None
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    requirements: tuple[NodeSelectorRequirement, ...]
    disruption: Disruption
    where: str


@dataclass(frozen=True, slots=True)
class Claim:
    """What a NodeClaim object says: its pool, its node once registered, its type and allocatable."""

    name: str
    pool: str
    node: str | None
    instance_type: str | None
    allocatable: Resources | None
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    deleting: bool


@dataclass(slots=True)
class Karpenter:
    """The NodePools and NodeClaims of a dump, as they are read."""

    pools: list[Pool] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)

    def add(self, obj: Mapping[str, Any], where: str, problems: list[Problem]) -> None:
        if obj.get("kind") == "NodePool":
            pool = parse_pool(obj, where, problems)
            if pool is not None:
                self.pools.append(pool)
        else:
            claim = parse_claim(obj, where, problems)
            if claim is not None:
                self.claims.append(claim)


def _map(obj: Any, key: str) -> Mapping[str, Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _labels(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _resources(value: Any, path: str, problems: list[Problem]) -> dict[str, int]:
    out: dict[str, int] = {}
    if value is None:
        return out
    if not isinstance(value, Mapping):
        problems.append(Problem(path, "expected a mapping of resource name to quantity"))
        return out
    for name, q in value.items():
        try:
            out[str(name)] = quantity(q)
        except QuantityError as exc:
            problems.append(Problem(f"{path}.{name}", str(exc)))
    return out


def _requirements(value: Any, path: str, problems: list[Problem]) -> tuple[NodeSelectorRequirement, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append(Problem(path, "expected a list of {key, operator, values}"))
        return ()
    out = []
    for i, r in enumerate(value):
        if not isinstance(r, Mapping) or not isinstance(r.get("key"), str):
            problems.append(Problem(f"{path}[{i}].key", "expected a requirement with a label key"))
            continue
        op = r.get("operator")
        if op not in _OPERATORS:
            problems.append(
                Problem(f"{path}[{i}].operator", f"expected one of {sorted(_OPERATORS)}, got {op!r}")
            )
            continue
        values = r.get("values") or []
        if not isinstance(values, list):
            problems.append(Problem(f"{path}[{i}].values", "expected a list of strings"))
            continue
        out.append(NodeSelectorRequirement(r["key"], str(op), tuple(str(v) for v in values)))
    return tuple(out)


def _disruption(spec: Mapping[str, Any], path: str, problems: list[Problem]) -> Disruption:
    raw = _map(spec, "disruption")
    policy = ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
    if raw.get("consolidationPolicy") == ConsolidationPolicy.WHEN_EMPTY.value:
        policy = ConsolidationPolicy.WHEN_EMPTY  # Balanced consolidates underutilized nodes too
    after: float | None = 0.0
    text = raw.get("consolidateAfter")
    if text == "Never":
        after = None
    elif text is not None:
        try:
            after = parse_duration(str(text))
        except QuantityError as exc:
            problems.append(Problem(f"{path}.disruption.consolidateAfter", str(exc)))
    budgets: list[NodeBudget] = []
    for i, b in enumerate(raw.get("budgets") or [{"nodes": "10%"}]):
        nodes = b.get("nodes") if isinstance(b, Mapping) else None
        percent = isinstance(nodes, str) and nodes.endswith("%") and nodes[:-1].isdigit()
        whole = isinstance(nodes, int) and not isinstance(nodes, bool) and nodes >= 0
        if isinstance(nodes, str) and nodes.isdigit():
            count: int | str = int(nodes)
        elif (percent or whole) and isinstance(nodes, int | str):
            count = nodes
        else:
            where = f"{path}.disruption.budgets[{i}].nodes"
            problems.append(Problem(where, f"expected a count or a percentage such as 10%, got {nodes!r}"))
            continue
        if isinstance(b, Mapping) and b.get("schedule"):
            continue  # a budget for some hours only: not modelled, and not held against the pool
        reasons = b.get("reasons") if isinstance(b, Mapping) else None
        budgets.append(NodeBudget(count, tuple(str(r) for r in reasons or ())))
    return Disruption(policy, after, tuple(budgets))


def parse_pool(obj: Mapping[str, Any], where: str, problems: list[Problem]) -> Pool | None:
    meta, spec = _map(obj, "metadata"), _map(obj, "spec")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        problems.append(Problem(f"{where}.metadata.name", "expected the NodePool's name"))
        return None
    path = f"{where}.spec"
    weight = spec.get("weight")
    if weight is not None and (
        isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100
    ):
        problems.append(Problem(f"{path}.weight", f"expected a weight from 1 to 100, got {weight!r}"))
        weight = None
    limits = _resources(spec.get("limits"), f"{path}.limits", problems)
    nodes = limits.pop(NODES, None)
    template = _map(_map(spec, "template"), "spec")
    taints = parse_taints(template.get("taints") or [], f"{path}.template.spec.taints", problems)
    return Pool(
        name=name,
        weight=weight,
        limits=Resources(limits),
        nodes=None if nodes is None else nodes // 1000,
        labels=_labels(_map(_map(spec, "template"), "metadata").get("labels")),
        taints=taints,
        requirements=_requirements(
            template.get("requirements"), f"{path}.template.spec.requirements", problems
        ),
        disruption=_disruption(spec, path, problems),
        where=where,
    )


def parse_claim(obj: Mapping[str, Any], where: str, problems: list[Problem]) -> Claim | None:
    meta, spec, status = _map(obj, "metadata"), _map(obj, "spec"), _map(obj, "status")
    name = meta.get("name")
    labels = _labels(meta.get("labels"))
    pool = labels.get(NODEPOOL_LABEL)
    if not isinstance(name, str) or not name or not pool:
        return None  # not made by a NodePool: nothing of a group to learn
    allocatable = _resources(status.get("allocatable"), f"{where}.status.allocatable", problems)
    instance_type = labels.get(INSTANCE_TYPE_LABEL)
    if instance_type is None:
        for r in _requirements(spec.get("requirements"), f"{where}.spec.requirements", problems):
            if r.key == INSTANCE_TYPE_LABEL and r.operator == "In" and len(r.values) == 1:
                instance_type = r.values[0]
    node = status.get("nodeName")
    return Claim(
        name=name,
        pool=pool,
        node=str(node) if node else None,
        instance_type=instance_type,
        allocatable=Resources(allocatable) if allocatable else None,
        labels=labels,
        taints=parse_taints(spec.get("taints") or [], f"{where}.spec.taints", problems),
        deleting=meta.get("deletionTimestamp") is not None,
    )


def _with_pods(capacity: Resources) -> Resources:
    return capacity if PODS in capacity else capacity + Resources({PODS: DEFAULT_MAX_PODS * 1000})


def _price(labels: Mapping[str, str]) -> float | None:
    try:
        return float(labels[PRICE_LABEL])
    except (KeyError, ValueError):
        return None


def seen_types(
    pool: str, nodes: Iterable[Node], claims: Iterable[Claim], price: float | None
) -> list[InstanceType]:
    """The instance types of a pool's nodes and NodeClaims, cheapest first (``price``: one price for
    every type, from the groups file)."""
    found: dict[str, InstanceType] = {}
    for name, alloc, labels in [
        (n.labels.get(INSTANCE_TYPE_LABEL), n.allocatable, n.labels) for n in nodes
    ] + [(c.instance_type, c.allocatable, c.labels) for c in claims if c.pool == pool]:
        if not name or alloc is None or name in found:
            continue
        found[name] = InstanceType(
            name, _with_pods(alloc), price if price is not None else _price(labels) or 0.0
        )
    return sorted(found.values(), key=lambda it: (it.price_per_hour, it.name))


def pool_group(
    pool: Pool, nodes: list[Node], claims: list[Claim], config: GroupConfig | None, problems: list[Problem]
) -> NodeGroup | None:
    """The NodePool as a node group, with the instance types makeroom can know of."""
    spec = config.get(pool.name) if config is not None else None
    types: list[InstanceType] = []
    if spec is not None and spec.instance_types:
        types = [replace(it, capacity=_with_pods(it.capacity)) for it in spec.instance_types]
    if not types:
        types = seen_types(pool.name, nodes, claims, spec.price_per_hour if spec is not None else None)
    if not types and spec is not None and spec.capacity is not None:
        types = [InstanceType(pool.name, _with_pods(spec.capacity), spec.price_per_hour or 0.0)]
    group = NodeGroup(
        name=pool.name,
        capacity=types[0].capacity if types else Resources(),
        labels=pool.labels,
        taints=pool.taints,
        min=spec.min if spec is not None and spec.min is not None else 0,  # makeroom's own floor
        max=UNLIMITED if pool.nodes is None else pool.nodes,
        weight=pool.weight,
        limits=pool.limits,
        instance_types=tuple(types),
        requirements=pool.requirements,
        disruption=pool.disruption,
    )
    allowed = launchable(group) if types else ()
    if not allowed:
        problems.append(
            Problem(
                f"{spec.path}.instance_types" if spec is not None else pool.where,
                f"NodePool {pool.name!r}: no instance type known that its requirements allow; give "
                "groups[].instance_types (name, capacity, price_per_hour) in a --groups file",
            )
        )
        return None
    return replace(
        group, capacity=allowed[0].capacity, price_per_hour=allowed[0].price_per_hour, instance_types=allowed
    )


def upcoming(claims: Iterable[Claim], groups: Mapping[str, NodeGroup], registered: set[str]) -> list[Node]:
    """NodeClaims whose node has not registered: nodes coming up, of their pool and type."""
    out = []
    for c in claims:
        if c.deleting or (c.node is not None and c.node in registered) or c.pool not in groups:
            continue
        group = groups[c.pool]
        alloc = c.allocatable
        if alloc is None:
            kind = next((it for it in group.types() if it.name == c.instance_type), None)
            if kind is None:
                continue  # not launched, and of no type known: nothing to count on yet
            alloc = kind.capacity
        out.append(
            Node(
                name=c.node or c.name,
                group=c.pool,
                allocatable=_with_pods(alloc),
                labels={**group.node_labels(), **c.labels},
                taints=c.taints or group.taints,
                ready=False,
            )
        )
    return out


def _duration_text(seconds: float) -> str:
    return f"{seconds:g}s"


def nodepool_object(group: NodeGroup, node_class: Mapping[str, str]) -> dict[str, Any]:
    """The NodePool a group describes (what ``parse_pool`` reads back), its nodes of the group's
    instance types; ``node_class`` is the provider's ``nodeClassRef`` (group, kind, name)."""
    limits = {name: format_quantity(group.limits[name], name) for name in group.limits}
    limits[NODES] = str(group.max)
    d = group.disruption
    budgets: list[dict[str, Any]] = []
    for b in d.budgets:
        entry: dict[str, Any] = {"nodes": str(b.nodes)}
        if b.reasons:
            entry["reasons"] = list(b.reasons)
        budgets.append(entry)
    requirements = [
        {"key": r.key, "operator": r.operator, **({"values": list(r.values)} if r.values else {})}
        for r in group.requirements
    ]
    requirements.append(
        {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": [it.name for it in group.types()]}
    )
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": {**group.labels, GROUP_LABEL: group.name}},
            "spec": {
                "nodeClassRef": dict(node_class),
                "requirements": requirements,
                "expireAfter": "Never",
                **(
                    {
                        "taints": [
                            {"key": t.key, "value": t.value, "effect": t.effect.value} for t in group.taints
                        ]
                    }
                    if group.taints
                    else {}
                ),
            },
        },
        "limits": limits,
        "disruption": {
            "consolidationPolicy": d.policy.value,
            "consolidateAfter": "Never"
            if d.consolidate_after is None
            else _duration_text(d.consolidate_after),
            "budgets": budgets,
        },
    }
    if group.weight is not None:
        spec["weight"] = group.weight
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": group.name},
        "spec": spec,
    }
