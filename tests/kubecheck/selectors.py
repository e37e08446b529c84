"""Label selectors, node selector terms and tolerations, as apimachinery and component-helpers match
them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Obj = Mapping[str, Any]

NO_SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")


def label_selector_matches(selector: Obj | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector(selector).Matches(labels): a nil selector selects nothing, an
    empty one everything; matchLabels and matchExpressions are ANDed."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(_set_requirement(e, labels) for e in selector.get("matchExpressions") or ())


def _set_requirement(expr: Obj, labels: Mapping[str, str]) -> bool:
    key, op, values = expr["key"], expr["operator"], expr.get("values") or ()
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    raise ValueError(f"label selector operator {op!r}")


def with_label_keys(
    selector: Obj | None, labels: Mapping[str, str], keys: Sequence[str], op: str
) -> Obj | None:
    """A selector with `key op (value)` added for each of `keys` the pod's labels have: what the API
    server does with matchLabelKeys (In) and mismatchLabelKeys (NotIn) when it creates the pod. Doing it
    again on a pod read back from the API adds the same requirement twice, which changes nothing."""
    extra = [{"key": k, "operator": op, "values": [labels[k]]} for k in keys if k in labels]
    if selector is None or not extra:
        return selector
    return {**selector, "matchExpressions": [*(selector.get("matchExpressions") or ()), *extra]}


def _int64(text: str) -> int | None:
    try:
        value = int(text, 10)
    except ValueError:
        return None
    return value if -(2**63) <= value < 2**63 else None


def node_requirement_matches(expr: Obj, labels: Mapping[str, str]) -> bool:
    """One NodeSelectorRequirement against node labels (In, NotIn, Exists, DoesNotExist, Gt, Lt)."""
    key, op = expr["key"], expr["operator"]
    values: list[str] = list(expr.get("values") or ())
    if op in ("Gt", "Lt"):
        if key not in labels or len(values) != 1:
            return False
        have, bound = _int64(labels[key]), _int64(values[0])
        if have is None or bound is None:
            return False
        return have > bound if op == "Gt" else have < bound
    return _set_requirement(expr, labels)


def _field_matches(expr: Obj, node_name: str) -> bool:
    if expr["key"] != "metadata.name":
        return False
    return _set_requirement(expr, {"metadata.name": node_name})


def node_selector_terms_match(terms: Sequence[Obj], labels: Mapping[str, str], node_name: str) -> bool:
    """ORed terms; each ANDs its matchExpressions (labels) and matchFields (metadata.name). A term with
    neither selects no node."""
    for term in terms:
        exprs, fields = term.get("matchExpressions") or (), term.get("matchFields") or ()
        if not exprs and not fields:
            continue
        if all(node_requirement_matches(e, labels) for e in exprs) and all(
            _field_matches(f, node_name) for f in fields
        ):
            return True
    return False


def required_node_affinity_matches(pod: Obj, node: Obj) -> bool:
    """nodeaffinity.GetRequiredNodeAffinity(pod).Match(node): spec.nodeSelector and the required terms."""
    spec = pod.get("spec") or {}
    labels = node_labels(node)
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is None:
        return True
    return node_selector_terms_match(required.get("nodeSelectorTerms") or (), labels, node_name(node))


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """v1.Toleration.ToleratesTaint: an empty effect or key matches any; Exists ignores the value."""
    effect, key = toleration.get("effect") or "", toleration.get("key") or ""
    if effect and effect != taint.get("effect"):
        return False
    if key and key != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    if op == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated_taint(taints: Sequence[Obj], tolerations: Sequence[Obj]) -> Obj | None:
    """The first NoSchedule or NoExecute taint that no toleration tolerates."""
    for taint in taints:
        if taint.get("effect") not in NO_SCHEDULE_EFFECTS:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def node_labels(node: Obj) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def node_name(node: Obj) -> str:
    return str((node.get("metadata") or {}).get("name") or "")
