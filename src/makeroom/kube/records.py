"""makeroom's records as custom resources in its own namespace: ``Relocation``, ``Consolidation``,
``Cooldown``, and headroom's ``Keeping`` and ``Headroom`` (group ``makeroom.io``, version ``v1alpha1``,
installed by the chart), which only makeroom's ServiceAccount may write. ``kubectl get
relocations,consolidations,cooldowns -n <makeroom's namespace>`` shows what makeroom is doing, why, and
which workloads it lets rest; ``kubectl get headroom`` what room it keeps and for whom (the chart's
CRDs give the columns).

A record's fields (``controller.records``) map to a spec (what was decided) and a status (how far it
got); times are RFC 3339 with microseconds, as Kubernetes writes them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from makeroom.controller.records import (
    Consolidation,
    Cooldown,
    Keeping,
    KeptRoom,
    RecordKind,
    Relocation,
    Stored,
)

GROUP = "makeroom.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KINDS = {
    RecordKind.RELOCATION: "Relocation",
    RecordKind.CONSOLIDATION: "Consolidation",
    RecordKind.COOLDOWN: "Cooldown",
    RecordKind.KEEPING: "Keeping",
    RecordKind.HEADROOM: "Headroom",
}
PLURALS = {
    RecordKind.RELOCATION: "relocations",
    RecordKind.CONSOLIDATION: "consolidations",
    RecordKind.COOLDOWN: "cooldowns",
    RecordKind.KEEPING: "keepings",
    RecordKind.HEADROOM: "headrooms",
}
_SUBJECT = {
    RecordKind.RELOCATION: "pod",
    RecordKind.CONSOLIDATION: "node",
    RecordKind.KEEPING: "target",
    RecordKind.HEADROOM: "target",
}  # the spec field that names a record's subject (a cooldown's: workload)
MANAGED_BY = {"app.kubernetes.io/managed-by": "makeroom"}
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
MAX_NAME = 253

JSON = dict[str, Any]


def collection(namespace: str, kind: RecordKind) -> str:
    return f"/apis/{API_VERSION}/namespaces/{namespace}/{PLURALS[kind]}"


def object_name(kind: RecordKind, subject: str) -> str:
    """The resource's name: ``<namespace>.<pod>`` for a relocation, the node's name for a
    consolidation, ``<namespace>.<workload>`` for a cooldown (all valid names); a name too long gets a
    digest instead of its tail. The namespace is always there, ``default`` included (a workload key
    leaves it out), and a namespace has no dot: ``default/prod.api`` and ``prod/api`` are
    ``default.prod.api`` and ``prod.api``, never one name."""
    if kind in (RecordKind.CONSOLIDATION, RecordKind.KEEPING, RecordKind.HEADROOM):
        name = subject  # a node's name, a headroom target's (both valid names)
    else:
        name = (subject if "/" in subject else f"default/{subject}").replace("/", ".", 1)
    return valid_name(name, subject)


def valid_name(name: str, subject: str) -> str:
    """``name`` when it is a valid object name, else its valid stem and a digest of ``subject`` (so
    that two subjects never share one)."""
    if len(name) <= MAX_NAME and _NAME.match(name):
        return name
    digest = hashlib.sha256(subject.encode()).hexdigest()[:16]
    stem = re.sub(r"[^-a-z0-9.]", "-", name.lower())[: MAX_NAME - 17].strip("-.") or "r"
    return f"{stem}-{digest}"


def path_of(namespace: str, kind: RecordKind, subject: str) -> str:
    return f"{collection(namespace, kind)}/{object_name(kind, subject)}"


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def epoch(text: Any) -> float:
    if not isinstance(text, str):
        raise TypeError(f"expected a time, got {text!r}")
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _metadata(kind: RecordKind, subject: str, namespace: str) -> JSON:
    return {"name": object_name(kind, subject), "namespace": namespace, "labels": dict(MANAGED_BY)}


def to_object(record: Stored, namespace: str) -> JSON:
    if isinstance(record, KeptRoom):
        return {
            "apiVersion": API_VERSION,
            "kind": KINDS[record.kind],
            "metadata": _metadata(record.kind, record.subject, namespace),
            "spec": {
                "target": record.target,
                "group": record.group,
                "whom": record.whom,
                "wanted": record.wanted,
                "moved": [{"at": rfc3339(at), "workload": w} for at, w in record.moved],
            },
            "status": {"free": record.free, "state": record.state, "why": record.why},
        }
    if isinstance(record, Cooldown):
        return {
            "apiVersion": API_VERSION,
            "kind": KINDS[record.kind],
            "metadata": _metadata(record.kind, record.subject, namespace),
            "spec": {"workload": record.workload, "pods": list(record.pods), "until": rfc3339(record.until)},
        }
    f = record.to_fields()
    spec: JSON = {
        "node": f["node"],
        "startedAt": rfc3339(f["started"]),
        "deadline": rfc3339(f["deadline"]),
        "moves": len(f["victims"]),
        "victims": [{k: v for k, v in victim.items() if v is not None} for victim in f["victims"]],
        "surge": {
            w: {"by": s["by"], "base": s["base"], "needReady": s["need_ready"]} for w, s in f["surge"].items()
        },
        "why": f["why"],
    }
    if isinstance(record, Relocation):
        spec = {"pod": f["pod"], "strategy": f["strategy"], **spec}
    if isinstance(record, Keeping):
        spec = {"target": f["target"], **spec}
    return {
        "apiVersion": API_VERSION,
        "kind": KINDS[record.kind],
        "metadata": _metadata(record.kind, record.subject, namespace),
        "spec": spec,
        "status": {"phase": f["phase"], "since": rfc3339(f["since"])},
    }


def from_object(kind: RecordKind, obj: Mapping[str, Any]) -> tuple[str, Stored | None] | None:
    """(subject, record) from a resource; the record is None when it cannot be read. None when not even
    its subject can be: such a resource names nothing makeroom could act on."""
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    if not isinstance(spec, Mapping):
        return None
    subject = spec.get(_SUBJECT.get(kind, "workload"))
    if not isinstance(subject, str) or not subject:
        return None
    if kind is RecordKind.HEADROOM:
        return subject, _kept_room(subject, spec, obj.get("status"))
    if kind is RecordKind.COOLDOWN:
        try:
            until = epoch(spec.get("until"))
        except (TypeError, ValueError):
            return subject, None
        return subject, Cooldown.from_fields({"workload": subject, "pods": spec.get("pods"), "until": until})
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    try:
        fields: JSON = {
            "node": spec.get("node"),
            "started": epoch(spec.get("startedAt")),
            "deadline": epoch(spec.get("deadline")),
            "victims": [
                {"pod": v.get("pod"), "workload": v.get("workload"), "node": v.get("node")}
                for v in spec.get("victims") or []
            ],
            "phase": status.get("phase", "holding"),
            "since": epoch(status["since"]) if status.get("since") else 0.0,
            "surge": {
                w: {"by": s.get("by"), "base": s.get("base"), "need_ready": s.get("needReady")}
                for w, s in (spec.get("surge") or {}).items()
            },
            "why": spec.get("why") or "",
        }
    except (TypeError, ValueError, AttributeError):
        return subject, None
    if kind is RecordKind.RELOCATION:
        fields["pod"], fields["strategy"] = subject, spec.get("strategy")
        return subject, Relocation.from_fields(fields)
    if kind is RecordKind.KEEPING:
        fields["target"] = subject
        return subject, Keeping.from_fields(fields)
    return subject, Consolidation.from_fields(fields)


def _kept_room(subject: str, spec: Mapping[str, Any], status: Any) -> KeptRoom | None:
    status = status if isinstance(status, Mapping) else {}
    try:
        moved = [{"at": epoch(m.get("at")), "workload": m.get("workload")} for m in spec.get("moved") or []]
    except (TypeError, ValueError, AttributeError):
        return None
    fields = {**{k: spec.get(k) for k in ("group", "whom", "wanted")}, "target": subject, "moved": moved}
    fields.update({k: status.get(k) for k in ("free", "state", "why")})
    return KeptRoom.from_fields(fields)
