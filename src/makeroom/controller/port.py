"""The Cluster port: everything the controller may read or do, each a real Kubernetes operation.

The simulator and the Kubernetes adapter implement it; the controller sees nothing else. Every verb
names its objects by key (``namespace/name`` for pods, ``namespace/name`` for workloads, the name for
nodes), so that an implementation never hands the controller a live object to mutate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from makeroom.controller.reasons import ObjectKind, Reason
from makeroom.model import Taint, Toleration
from makeroom.model.state import ClusterState


class ClusterError(Exception):
    """A cluster operation failed; the controller logs it and tries again later."""


class NotFoundError(ClusterError):
    """The object is gone (HTTP 404)."""


class EvictionBlockedError(ClusterError):
    """The eviction would break a PodDisruptionBudget (HTTP 429): try again after a backoff."""


class ConflictError(ClusterError):
    """The object changed under the request (HTTP 409)."""


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on the clock that pod annotations and timestamps use."""
        ...


class Cluster(Protocol):
    def snapshot(self) -> ClusterState:
        """The cluster as the controller may plan on it. Read-only: never mutate what it returns."""
        ...

    def evict(self, pod: str) -> None:
        """The Eviction API. Raises EvictionBlockedError on 429, NotFoundError when gone."""
        ...

    def delete_pod(self, pod: str) -> None: ...

    def annotate_pod(self, pod: str, changes: Mapping[str, str | None]) -> None:
        """Merge-patch metadata.annotations: a None value removes the key."""
        ...

    def add_toleration(self, pod: str, toleration: Toleration) -> None:
        """Tolerations may be added to a running pod (never removed): Kubernetes allows only that."""
        ...

    def taint_node(self, node: str, taint: Taint) -> None: ...

    def annotate_node(self, node: str, changes: Mapping[str, str | None]) -> None: ...

    def untaint_node(self, node: str, key: str) -> None: ...

    def nominate(self, pod: str, node: str | None) -> None:
        """Set (or clear, with None) status.nominatedNodeName through the pod's status subresource."""
        ...

    def scale(self, workload: str, replicas: int) -> None:
        """Set spec.replicas through the scale subresource."""
        ...

    def annotate_workload(self, workload: str, changes: Mapping[str, str | None]) -> None: ...

    def emit_event(self, kind: ObjectKind, name: str, reason: Reason, message: str) -> None:
        """A Kubernetes Event on the object (``name``: a pod's key, a node's name)."""
        ...
