"""One fake of the controller's Cluster port for unit tests: a ClusterState (from ``state``) that the
verbs change directly, every call recorded, on a clock the test sets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from makeroom.controller import NotFoundError, ObjectKind, Reason
from makeroom.model import Pod, Taint, Toleration
from makeroom.model.state import ClusterState


@dataclass
class FakeCluster:
    state: ClusterState
    time: float = 0.0
    calls: list[tuple[str, str]] = field(default_factory=list)
    events: list[tuple[ObjectKind, str, Reason, str]] = field(default_factory=list)

    # Clock
    def now(self) -> float:
        return self.time

    def snapshot(self) -> ClusterState:
        return self.state

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

    def add_toleration(self, pod: str, toleration: Toleration) -> None:
        self.calls.append(("tolerate", pod))
        target = self._pod(pod)
        target.spec = replace(target.spec, tolerations=(*target.spec.tolerations, toleration))

    def taint_node(self, node: str, taint: Taint) -> None:
        self.calls.append(("taint", node))
        self.state.nodes[node].taints = (*self.state.nodes[node].taints, taint)
        self.state.nodes_changed()

    def annotate_node(self, node: str, changes: Mapping[str, str | None]) -> None:
        self.calls.append(("annotate", node))
        _apply(self.state.nodes[node].annotations, changes)

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

    def annotate_workload(self, workload: str, changes: Mapping[str, str | None]) -> None:
        self.calls.append(("annotate", workload))
        _apply(self.state.workloads[workload].annotations, changes)

    def emit_event(self, kind: ObjectKind, name: str, reason: Reason, message: str) -> None:
        self.events.append((kind, name, reason, message))


def _apply(annotations: dict[str, str], changes: Mapping[str, str | None]) -> None:
    for key, value in changes.items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
