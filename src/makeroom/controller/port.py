"""The Cluster port: everything the controller may read or do, each a real Kubernetes operation.

The simulator and the Kubernetes adapter implement it; the controller sees nothing else. Every verb
names its objects by key (``namespace/name`` for pods, ``namespace/name`` for workloads, the name for
nodes), so that an implementation never hands the controller a live object to mutate.

makeroom's own records (what it decided and how far it got) go to a store that only makeroom writes
(``records``, ``save_record``, ``delete_record``): custom resources in its own namespace on a real
cluster, never annotations on objects a tenant may write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from makeroom.controller.reasons import ObjectKind, Reason
from makeroom.controller.records import RecordKind, Records, Stored
from makeroom.controller.scope import NamespaceLabels
from makeroom.model import Resources, Taint, Toleration
from makeroom.model.state import ClusterState


class ClusterError(Exception):
    """A cluster operation failed; the controller logs it and tries again later."""


class NotFoundError(ClusterError):
    """The object is gone (HTTP 404)."""


class EvictionBlockedError(ClusterError):
    """The eviction would break a PodDisruptionBudget (HTTP 429): try again after a backoff."""


class EvictionRefusedError(ClusterError):
    """The eviction can never succeed as things are (HTTP 500: the pod has more than one
    PodDisruptionBudget): a refusal, never retried."""


class ConflictError(ClusterError):
    """The object changed under the request (HTTP 409)."""


class BuffersUnavailableError(ClusterError):
    """The cluster has no CapacityBuffer API makeroom may use (the resource is not installed, or
    makeroom is not allowed to write it): keep the room without the autoscaler's buffers."""


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on the clock that pod annotations and timestamps use."""
        ...


class Cluster(Protocol):
    def snapshot(self) -> ClusterState:
        """The cluster as the controller may plan on it. Read-only: never mutate what it returns."""
        ...

    def namespaces(self) -> NamespaceLabels:
        """Every namespace's labels (which only an admin sets), for the scope's selectors."""
        ...

    def deployment_of(self, pod: str) -> str | None:
        """The Deployment (a workload key) that controls the pod through its ReplicaSet, by owner
        references and their uids as the cluster has them now; None when no Deployment does."""
        ...

    def records(self) -> Records:
        """makeroom's records, read from its own store as they are now (never from a stale cache)."""
        ...

    def save_record(self, record: Stored) -> None:
        """Create or replace the record of ``record.subject``."""
        ...

    def delete_record(self, kind: RecordKind, subject: str) -> None:
        """Remove a record; one already gone is no error."""
        ...

    def evict(self, pod: str) -> None:
        """The Eviction API. Raises EvictionBlockedError on 429, NotFoundError when gone."""
        ...

    def delete_pod(self, pod: str) -> None: ...

    def annotate_pod(self, pod: str, changes: Mapping[str, str | None]) -> None:
        """Merge-patch metadata.annotations: a None value removes the key."""
        ...

    def may_tidy(self, namespace: str) -> bool:
        """Whether a write that can wait for a later round (removing a mark no record explains) may be
        sent on an object of ``namespace`` now. Never waits: each namespace gets its turns, from what
        the writes that cannot wait leave, so one tenant's objects hold back nobody else's."""
        ...

    def add_toleration(self, pod: str, toleration: Toleration) -> None:
        """Tolerations may be added to a running pod (never removed): Kubernetes allows only that."""
        ...

    def taint_node(self, node: str, taint: Taint) -> None: ...

    def untaint_node(self, node: str, key: str) -> None: ...

    def nominate(self, pod: str, node: str | None) -> None:
        """Set (or clear, with None) status.nominatedNodeName through the pod's status subresource."""
        ...

    def scale(self, workload: str, replicas: int) -> None:
        """Set spec.replicas through the scale subresource."""
        ...

    def keep_buffer(self, group: str, requests: Resources, replicas: int) -> None:
        """Ask the autoscaler to keep room for ``replicas`` pods of ``requests`` in ``group``
        (a CapacityBuffer; 0 removes it)."""
        ...

    def emit_event(self, kind: ObjectKind, name: str, reason: Reason, message: str) -> None:
        """A Kubernetes Event on the object (``name``: a pod's key, a node's name)."""
        ...
