"""One fake of the controller's Cluster port for unit tests: a ClusterState (from ``state``) that the
verbs change directly, a record store, every call recorded, on a clock the test sets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from makeroom.controller import NotFoundError, ObjectKind, Reason
from makeroom.controller.records import (
    Consolidation,
    Record,
    RecordKind,
    Records,
    Relocation,
    Stored,
)
from makeroom.controller.scope import NAME_LABEL, NamespaceLabels
from makeroom.model import OwnerKind, Pod, Resources, Taint, Toleration
from makeroom.model.state import ClusterState


@dataclass
class FakeCluster:
    state: ClusterState
    time: float = 0.0
    calls: list[tuple[str, str]] = field(default_factory=list)
    events: list[tuple[ObjectKind, str, Reason, str]] = field(default_factory=list)
    stored: dict[tuple[RecordKind, str], dict[str, Any]] = field(default_factory=dict)
    labels: dict[str, dict[str, str]] = field(default_factory=dict)  # namespace -> extra labels
    owners: dict[str, str | None] = field(
        default_factory=dict
    )  # pod key -> its Deployment, if not its workload
    buffers: dict[str, tuple[Resources, int]] = field(default_factory=dict)  # keep_buffer's, by group

    # Clock
    def now(self) -> float:
        return self.time

    def snapshot(self) -> ClusterState:
        return self.state

    def namespaces(self) -> NamespaceLabels:
        names = {p.namespace for p in self.state.pods.values()} | set(self.labels)
        return {n: {NAME_LABEL: n, **self.labels.get(n, {})} for n in names}

    def deployment_of(self, pod: str) -> str | None:
        if pod in self.owners:
            return self.owners[pod]
        found = self.state.pods.get(pod)
        return found.workload if found is not None and found.owner_kind is OwnerKind.REPLICA_SET else None

    def records(self) -> Records:
        out = Records()
        for (kind, subject), fields in self.stored.items():
            out.read(kind, subject, fields)
        return out

    def save_record(self, record: Stored) -> None:
        self.calls.append(("record", record.subject))
        self.stored[(record.kind, record.subject)] = record.to_fields()

    def delete_record(self, kind: RecordKind, subject: str) -> None:
        self.calls.append(("forget", subject))
        self.stored.pop((kind, subject), None)

    def record(self, kind: RecordKind, subject: str) -> Record | None:
        """The stored record, parsed (for assertions)."""
        fields = self.stored.get((kind, subject))
        if fields is None:
            return None
        if kind is RecordKind.COOLDOWN:
            return None
        return (Relocation if kind is RecordKind.RELOCATION else Consolidation).from_fields(fields)

    def _pod(self, key: str) -> Pod:
        pod = self.state.pods.get(key)
        if pod is None:
            raise NotFoundError(key)
        return pod

    def evict(self, pod: str) -> None:
        self.calls.append(("evict", pod))
        self._pod(pod).terminating = True

    def delete_pod(self, pod: str) -> None:
        self.calls.append(("delete", pod))
        self.state.remove_pod(self._pod(pod))

    def annotate_pod(self, pod: str, changes: Mapping[str, str | None]) -> None:
        self.calls.append(("annotate", pod))
        _apply(self._pod(pod).annotations, changes)

    def may_tidy(self, namespace: str) -> bool:
        return True

    def add_toleration(self, pod: str, toleration: Toleration) -> None:
        self.calls.append(("tolerate", pod))
        target = self._pod(pod)
        target.spec = replace(target.spec, tolerations=(*target.spec.tolerations, toleration))

    def taint_node(self, node: str, taint: Taint) -> None:
        self.calls.append(("taint", node))
        self.state.nodes[node].taints = (*self.state.nodes[node].taints, taint)
        self.state.nodes_changed()

    def untaint_node(self, node: str, key: str) -> None:
        self.calls.append(("untaint", node))
        found = self.state.nodes[node]
        found.taints = tuple(t for t in found.taints if t.key != key)
        self.state.nodes_changed()

    def nominate(self, pod: str, node: str | None) -> None:
        self.calls.append(("nominate", pod))
        self.state.nominate(self._pod(pod), node)

    def scale(self, workload: str, replicas: int) -> None:
        self.calls.append(("scale", workload))
        self.state.workloads[workload].replicas = replicas

    def keep_buffer(self, group: str, requests: Resources, replicas: int) -> None:
        self.calls.append(("keep_buffer", group))
        self.buffers[group] = (requests, replicas)

    def emit_event(self, kind: ObjectKind, name: str, reason: Reason, message: str) -> None:
        self.events.append((kind, name, reason, message))


def _apply(annotations: dict[str, str], changes: Mapping[str, str | None]) -> None:
    for key, value in changes.items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
