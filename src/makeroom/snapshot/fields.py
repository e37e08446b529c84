"""Checked reading of the fields of Kubernetes objects (plain dicts): a field that is present but of the
wrong shape is a problem at its key path, never read as empty (``containers: "oops"`` is not a pod
without requests, ``values: "abc"`` is not the list a, b, c). Numbers and quantities go through the
shared rules of ``makeroom.model.limits``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from makeroom.errors import Problem
from makeroom.model import NodeSelectorRequirement, limits
from makeroom.model.quantity import MAX_QUANTITY
from makeroom.snapshot.quantities import quantity

EMPTY: Mapping[str, Any] = {}
UNFIT = MAX_QUANTITY + 1
"""A pod request beyond every node: what a request larger than ``MAX_QUANTITY`` becomes when it comes
from the cluster (the pod then fits nowhere, and the controller goes on)."""

NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class Problems:
    """Problems found so far, each with its key path."""

    def __init__(self) -> None:
        self.items: list[Problem] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(Problem(path, message))

    def __len__(self) -> int:
        return len(self.items)


def is_map(x: Any) -> bool:
    return type(x) is dict or isinstance(x, Mapping)


def map_at(obj: Any, key: str, path: str, problems: Problems) -> Mapping[str, Any]:
    """``obj[key]`` when it is a mapping; absent or null is empty; anything else is a problem."""
    value = obj.get(key) if is_map(obj) else None
    if value is None:
        return EMPTY
    if is_map(value):
        return value  # type: ignore[no-any-return]
    problems.add(f"{path}.{key}", f"expected a mapping, got {_show(value)}")
    return EMPTY


def list_at(obj: Any, key: str, path: str, problems: Problems) -> list[Any]:
    """``obj[key]`` when it is a list; absent or null is empty; anything else is a problem."""
    value = obj.get(key) if is_map(obj) else None
    if value is None:
        return []
    if type(value) is list:
        return value
    problems.add(f"{path}.{key}", f"expected a list, got {_show(value)}")
    return []


def maps_at(obj: Any, key: str, path: str, problems: Problems) -> list[tuple[str, Mapping[str, Any]]]:
    """The entries of the list ``obj[key]`` that are mappings, each with its path; others are problems."""
    out = []
    for i, item in enumerate(list_at(obj, key, path, problems)):
        if is_map(item):
            out.append((f"{path}.{key}[{i}]", item))
        else:
            problems.add(f"{path}.{key}[{i}]", f"expected a mapping, got {_show(item)}")
    return out


def str_map(value: Any, path: str, problems: Problems) -> dict[str, str]:
    """Labels and annotations: string to string. A plain dict from a dump is kept as it is (the API
    server only stores strings there); numbers are read as their text; anything else is a problem."""
    if value is None:
        return {}
    if type(value) is dict and all(type(v) is str for v in value.values()):
        return value
    if not is_map(value):
        problems.add(path, f"expected a mapping of string to string, got {_show(value)}")
        return {}
    out = {}
    for k, v in value.items():
        if isinstance(v, Mapping | list):
            problems.add(f"{path}.{k}", f"expected a string, got {_show(v)}")
            continue
        out[str(k)] = "" if v is None else str(v)
    return out


def resources(value: Any, path: str, problems: Problems, beyond: int | None = None) -> dict[str, int]:
    """A map of resource name to quantity, in milli-units, by the shared rules. ``beyond``: what a
    quantity over the range becomes instead of a problem (the cluster's objects, see ``UNFIT``)."""
    if value is None:
        return {}
    if not is_map(value):
        problems.add(path, f"expected a mapping of resource name to quantity, got {_show(value)}")
        return {}
    out: dict[str, int] = {}
    for name, q in value.items():
        try:
            out[str(name)] = quantity(q, str(name))
        except limits.QuantityRangeError as exc:
            if beyond is None:
                problems.add(f"{path}.{name}", str(exc))
            else:
                out[str(name)] = beyond
        except limits.InvalidValueError as exc:
            problems.add(f"{path}.{name}", str(exc))
    return out


def requirement(
    e: Any, path: str, problems: Problems, operators: tuple[str, ...]
) -> NodeSelectorRequirement | None:
    """One ``matchExpressions`` entry, checked as the API server checks it: a key, a known operator,
    values a list of strings (none for Exists and DoesNotExist, some for In and NotIn, one integer
    for Gt and Lt)."""
    if not is_map(e):
        problems.add(path, f"expected a requirement {{key, operator, values}}, got {_show(e)}")
        return None
    key, op, values = e.get("key"), e.get("operator"), e.get("values")
    before = len(problems)
    if not isinstance(key, str) or not key:
        problems.add(f"{path}.key", f"expected a label key, got {_show(key)}")
    if op not in operators:
        problems.add(f"{path}.operator", f"expected one of {', '.join(operators)}, got {_show(op)}")
    if values is None:
        values = []
    if type(values) is not list or not all(isinstance(v, str) for v in values):
        problems.add(f"{path}.values", f"expected a list of strings, got {_show(values)}")
    elif op in ("Exists", "DoesNotExist") and values:
        problems.add(f"{path}.values", f"expected no values with {op}, got {_show(values)}")
    elif op in ("In", "NotIn") and not values:
        problems.add(f"{path}.values", f"expected at least one value with {op}")
    elif op in ("Gt", "Lt") and (len(values) != 1 or not _is_integer(values[0])):
        problems.add(f"{path}.values", f"expected one integer value with {op}, got {_show(values)}")
    if len(problems) > before:
        return None
    return NodeSelectorRequirement(str(key), str(op), tuple(values))


def label_selector(
    value: Any, path: str, problems: Problems
) -> tuple[dict[str, str], tuple[NodeSelectorRequirement, ...]] | None:
    """A metav1.LabelSelector (matchLabels, matchExpressions); None (after problems) when broken."""
    if value is None:
        return {}, ()
    if not is_map(value):
        problems.add(path, f"expected a label selector {{matchLabels, matchExpressions}}, got {_show(value)}")
        return None
    before = len(problems)
    labels = str_map(value.get("matchLabels"), f"{path}.matchLabels", problems)
    found = []
    for i, e in enumerate(list_at(value, "matchExpressions", path, problems)):
        req = requirement(e, f"{path}.matchExpressions[{i}]", problems, LABEL_OPERATORS)
        if req is not None:
            found.append(req)
    return None if len(problems) > before else (labels, tuple(found))


def _is_integer(text: str) -> bool:
    t = text.strip()
    return t.lstrip("+-").isdigit() and len(t) <= 20


def _show(value: Any) -> str:
    """A value for a message, cut short: a message is one line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
