"""Node groups of a real cluster: which group a node is in, and each group's min, max, price and
template, from the cluster-autoscaler's status ConfigMap or from a small ``--groups`` file.

The groups file (YAML), order = preference (first is most preferred)::

    groups:
      - name: cpu                 # the value of the node group label on its nodes
        min: 1                    # required unless the autoscaler status gives it
        max: 4                    # required unless the autoscaler status gives it
        price_per_hour: 0.17      # optional: without it the price is unknown (new nodes are compared by
                                  #   count, and the group's nodes are never consolidated)
        capacity: {cpu: "4", memory: 16Gi, pods: 110}   # allocatable of one new node; optional when
                                                        #   the group has a node to copy it from
        labels: {node.kubernetes.io/instance-type: m5.xlarge}   # optional template labels
        taints: [{key: gpu, value: "true", effect: NoSchedule}] # optional template taints
        instance_types:           # optional, for a Karpenter NodePool of this name: the types it may
          - {name: g5.xlarge, capacity: {cpu: "4", memory: 16Gi, nvidia.com/gpu: 1}, price_per_hour: 1.0}
                                  # each type's price_per_hour is required (0 if free on purpose): the
                                  #   cheapest type that fits is the one Karpenter would launch
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from makeroom.errors import InputError, Problem
from makeroom.model import GROUP_LABEL, InstanceType, Resources, Taint, TaintEffect, limits
from makeroom.snapshot.quantities import quantity

GROUP_LABELS = (
    GROUP_LABEL,
    "eks.amazonaws.com/nodegroup",
    "alpha.eksctl.io/nodegroup-name",
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
    "kwok-nodegroup",
)
"""Node labels that name a node's group, in the order they are looked up."""

STATUS_CONFIGMAP = "cluster-autoscaler-status"


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """What a groups file says about one group; None where it says nothing."""

    name: str
    min: int | None = None
    max: int | None = None
    price_per_hour: float | None = None
    capacity: Resources | None = None
    labels: Mapping[str, str] | None = None
    taints: tuple[Taint, ...] | None = None
    path: str = ""  # key path of the entry in its file, for messages
    instance_types: tuple[InstanceType, ...] | None = None  # of a Karpenter NodePool


@dataclass(frozen=True, slots=True)
class GroupConfig:
    groups: tuple[GroupSpec, ...] = ()
    source: str = "--groups"

    def get(self, name: str) -> GroupSpec | None:
        return next((g for g in self.groups if g.name == name), None)


@dataclass(frozen=True, slots=True)
class GroupBounds:
    min: int
    max: int
    names: tuple[str, ...] = field(default=())  # the autoscaler's node group names that made them


def group_of(labels: Mapping[str, str]) -> str | None:
    for key in GROUP_LABELS:
        value = labels.get(key)
        if value:
            return value
    return None


def _int(value: Any, path: str, problems: list[Problem]) -> int | None:
    if value is None:
        return None
    try:
        return limits.count(value, high=limits.MAX_NODES, what="a number of nodes")
    except limits.InvalidValueError as exc:
        problems.append(Problem(path, str(exc)))
        return None


def parse_group_config(data: Any, file: str) -> GroupConfig:
    """Check a groups file (already parsed YAML); every problem is reported with its key path."""
    problems: list[Problem] = []
    if not isinstance(data, Mapping) or not isinstance(data.get("groups"), list):
        raise InputError(file, [Problem("groups", "expected a list of node groups under 'groups:'")])
    out: list[GroupSpec] = []
    seen: set[str] = set()
    allowed = {"name", "min", "max", "price_per_hour", "capacity", "labels", "taints", "instance_types"}
    for i, entry in enumerate(data["groups"]):
        where = f"groups[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(Problem(where, "expected a mapping with name, min, max ..."))
            continue
        for key in entry:
            if key not in allowed:
                problems.append(Problem(f"{where}.{key}", f"unknown key; expected one of {sorted(allowed)}"))
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            problems.append(Problem(f"{where}.name", "expected the group's name (a non-empty string)"))
            continue
        if name in seen:
            problems.append(Problem(f"{where}.name", f"expected a unique name, {name!r} is listed twice"))
        seen.add(name)
        gmin = _int(entry.get("min"), f"{where}.min", problems)
        gmax = _int(entry.get("max"), f"{where}.max", problems)
        if gmin is not None and gmax is not None and gmin > gmax:
            problems.append(Problem(f"{where}.min", f"expected min <= max ({gmax}), got {gmin}"))
        price = entry.get("price_per_hour")
        if price is not None:
            try:
                price = limits.price(price)
            except limits.InvalidValueError as exc:
                problems.append(Problem(f"{where}.price_per_hour", str(exc)))
                price = None
        capacity = None
        if entry.get("capacity") is not None:
            capacity = _resources(entry["capacity"], f"{where}.capacity", problems)
        labels = entry.get("labels")
        if labels is not None and (
            not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values())
        ):
            problems.append(Problem(f"{where}.labels", "expected a mapping of label to string value"))
            labels = None
        taints = None
        if entry.get("taints") is not None:
            taints = parse_taints(entry["taints"], f"{where}.taints", problems)
        out.append(
            GroupSpec(
                name,
                gmin,
                gmax,
                None if price is None else float(price),
                capacity,
                None if labels is None else {str(k): v for k, v in labels.items()},
                taints,
                where,
                _instance_types(entry.get("instance_types"), f"{where}.instance_types", problems),
            )
        )
    if problems:
        raise InputError(file, problems)
    return GroupConfig(tuple(out), file)


def _instance_types(value: Any, path: str, problems: list[Problem]) -> tuple[InstanceType, ...] | None:
    """``instance_types`` of a groups entry: [{name, capacity, price_per_hour}]."""
    if value is None:
        return None
    if not isinstance(value, list):
        problems.append(Problem(path, "expected a list of {name, capacity, price_per_hour}"))
        return None
    out = []
    for i, t in enumerate(value):
        name = t.get("name") if isinstance(t, Mapping) else None
        if not isinstance(name, str) or not name:
            problems.append(Problem(f"{path}[{i}].name", "expected the instance type's name"))
            continue
        if "price_per_hour" not in t:
            problems.append(Problem(f"{path}[{i}].price_per_hour", limits.MISSING_PRICE))
            continue
        try:
            price = limits.price(t["price_per_hour"])
        except limits.InvalidValueError as exc:
            problems.append(Problem(f"{path}[{i}].price_per_hour", str(exc)))
            continue
        capacity = _resources(t.get("capacity"), f"{path}[{i}].capacity", problems)
        if capacity is not None:
            out.append(InstanceType(name, capacity, price))
    return tuple(out)


def _resources(value: Any, path: str, problems: list[Problem]) -> Resources | None:
    if not isinstance(value, Mapping):
        problems.append(Problem(path, "expected a mapping of resource name to quantity"))
        return None
    items: dict[str, int] = {}
    for name, q in value.items():
        try:
            items[str(name)] = quantity(q, str(name))
        except limits.InvalidValueError as exc:
            problems.append(Problem(f"{path}.{name}", str(exc)))
    return Resources(items)


def parse_taints(value: Any, path: str, problems: list[Problem]) -> tuple[Taint, ...]:
    if not isinstance(value, list):
        problems.append(Problem(path, "expected a list of {key, value, effect}"))
        return ()
    out = []
    effects = {e.value for e in TaintEffect}
    for i, t in enumerate(value):
        if not isinstance(t, Mapping) or not isinstance(t.get("key"), str):
            problems.append(Problem(f"{path}[{i}].key", "expected a taint with a string key"))
            continue
        effect = t.get("effect", "NoSchedule")
        if effect not in effects:
            problems.append(
                Problem(f"{path}[{i}].effect", f"expected one of {sorted(effects)}, got {effect!r}")
            )
            continue
        out.append(Taint(t["key"], str(t.get("value") or ""), TaintEffect(effect)))
    return tuple(out)


_TEXT_NAME = re.compile(r"^\s*Name:\s*(\S+)\s*$")
_TEXT_BOUNDS = re.compile(r"minSize=(\d{1,18}),\s*maxSize=(\d{1,18})\b")


def parse_autoscaler_status(configmap: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """min and max per autoscaler node group, from the status ConfigMap's ``data.status``: the YAML
    status of cluster-autoscaler 1.30 and later, or the older text status. What cannot be read is
    left out; ``read_autoscaler_status`` says what that was."""
    return read_autoscaler_status(configmap, "", [])


_EXPECTED_STATUS = (
    "expected the cluster-autoscaler status: YAML with nodeGroups (1.30 and later) or the text status "
    "with a NodeGroups: section"
)


def read_autoscaler_status(
    configmap: Mapping[str, Any], where: str, problems: list[Problem]
) -> dict[str, tuple[int, int]]:
    """As ``parse_autoscaler_status``, with a problem at ``where.data.status`` (and below) for a status
    that is garbled or a node group whose bounds are missing or wrong, rather than reading it as a
    cluster whose every group has a fixed size."""
    path = f"{where}.data.status" if where else "data.status"
    data = configmap.get("data") if isinstance(configmap, Mapping) else None
    text = data.get("status") if isinstance(data, Mapping) else None
    if not isinstance(text, str):
        problems.append(Problem(path, _EXPECTED_STATUS))
        return {}
    out: dict[str, tuple[int, int]] = {}
    try:
        parsed = yaml.safe_load(text) if len(text) < 10_000_000 else None
    except (yaml.YAMLError, RecursionError):
        parsed = None
    if isinstance(parsed, Mapping) and "nodeGroups" in parsed:
        groups = parsed["nodeGroups"]
        if groups is None:
            return out
        if not isinstance(groups, list):
            problems.append(Problem(f"{path}.nodeGroups", "expected a list of node groups"))
            return out
        for i, ng in enumerate(groups):
            at = f"{path}.nodeGroups[{i}]"
            if not isinstance(ng, Mapping) or not isinstance(ng.get("name"), str):
                problems.append(Problem(f"{at}.name", "expected a node group with a name"))
                continue
            health = ng.get("health") if isinstance(ng.get("health"), Mapping) else ng
            assert isinstance(health, Mapping)
            bounds = _bounds(
                health.get("minSize", ng.get("minSize")), health.get("maxSize", ng.get("maxSize"))
            )
            if isinstance(bounds, str):
                problems.append(Problem(f"{at}.health", bounds))
                continue
            out[ng["name"]] = bounds
        return out
    name: str | None = None
    in_groups = False
    for line in text.splitlines():
        if line.strip().startswith("NodeGroups:"):
            in_groups = True
            continue
        if not in_groups:
            continue
        m = _TEXT_NAME.match(line)
        if m:
            name = m.group(1)
            continue
        b = _TEXT_BOUNDS.search(line)
        if b and name is not None:
            bounds = _bounds(int(b.group(1)), int(b.group(2)))
            if isinstance(bounds, str):
                problems.append(Problem(path, f"node group {name}: {bounds}"))
            else:
                out[name] = bounds
            name = None
    if not in_groups:
        problems.append(Problem(path, _EXPECTED_STATUS))
    return out


def _bounds(lo: Any, hi: Any) -> tuple[int, int] | str:
    """(minSize, maxSize), or what is wrong with them. A size beyond ``MAX_NODES`` is the autoscaler's
    word for "as many as the cluster holds": it counts as that many."""
    try:
        low = limits.count(lo, high=2**63 - 1, what="minSize, a number of nodes")
        high = limits.count(hi, high=2**63 - 1, what="maxSize, a number of nodes")
    except limits.InvalidValueError as exc:
        return str(exc)
    low, high = min(low, limits.MAX_NODES), min(high, limits.MAX_NODES)
    if low > high:
        return f"expected minSize <= maxSize, got {low} > {high}"
    return low, high


def bounds_for(group: str, status: Mapping[str, tuple[int, int]]) -> GroupBounds | None:
    """The autoscaler's bounds for a label group: its node group of the same name, else the ones
    whose name holds the group's name as a token (an EKS ASG ``eks-<group>-<id>``, or one GKE
    instance group per zone, whose bounds add up)."""
    if group in status:
        lo, hi = status[group]
        return GroupBounds(lo, hi, (group,))
    token = re.compile(rf"(^|[-/_.]){re.escape(group)}($|[-/_.])")
    names = sorted(n for n in status if token.search(n))
    if not names:
        return None
    return GroupBounds(sum(status[n][0] for n in names), sum(status[n][1] for n in names), tuple(names))


def read_priority_expander(
    configmap: Mapping[str, Any], where: str, problems: list[Problem]
) -> dict[int, list[str]]:
    """The cluster-autoscaler priority expander's rules from its ConfigMap's ``data.priorities``
    (YAML: priority -> regular expressions of node group names). What the autoscaler itself would
    refuse is a problem at ``where.data.priorities``, and no rules at all: the autoscaler then filters
    nothing, and its choice is not foreseeable."""
    path = f"{where}.data.priorities" if where else "data.priorities"
    data = configmap.get("data") if isinstance(configmap, Mapping) else None
    text = data.get("priorities") if isinstance(data, Mapping) else None
    expected = "expected YAML that maps each priority (a whole number) to a list of regular expressions"
    if not isinstance(text, str) or len(text) > 1_000_000:
        problems.append(Problem(path, expected))
        return {}
    try:
        parsed = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError):
        parsed = None
    if not isinstance(parsed, Mapping) or not parsed:
        problems.append(Problem(path, expected))
        return {}
    out: dict[int, list[str]] = {}
    before = len(problems)
    for prio, exprs in parsed.items():
        if isinstance(prio, bool) or not isinstance(prio, int):
            problems.append(Problem(f"{path}.{prio}", "expected a whole number as the priority"))
            continue
        if not isinstance(exprs, list) or not all(isinstance(e, str) for e in exprs):
            problems.append(Problem(f"{path}.{prio}", "expected a list of regular expressions"))
            continue
        for e in exprs:
            try:
                re.compile(e)
            except re.error as exc:
                problems.append(Problem(f"{path}.{prio}", f"cannot read the expression {e!r}: {exc}"))
        out[prio] = list(exprs)
    return out if len(problems) == before else {}
