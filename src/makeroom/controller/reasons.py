"""The Kubernetes Events that the controller records: on which kind of object, and why.

The real cluster posts them as Events (``kube.cluster``); the simulator writes them into the run's
timeline (``sim.port``). Both read this one list.
"""

from __future__ import annotations

from enum import StrEnum


class ObjectKind(StrEnum):
    """The kind of object an Event is about."""

    POD = "Pod"
    NODE = "Node"
    DEPLOYMENT = "Deployment"

    @property
    def api_version(self) -> str:
        return "apps/v1" if self is ObjectKind.DEPLOYMENT else "v1"

    @property
    def namespaced(self) -> bool:
        return self is not ObjectKind.NODE


class Reason(StrEnum):
    """The ``reason`` of an Event makeroom records."""

    RELOCATING = "Relocating"
    """On a pending pod: makeroom starts making room for it on a node, naming the pods it moves."""
    MOVING = "Moving"
    """On a victim: marked to leave its node (for a pending pod, or for a node being emptied)."""
    EVICTED = "Evicted"
    """On a victim: evicted through the Eviction API, within its PodDisruptionBudget."""
    ROOM_MADE = "RoomMade"
    """On a pending pod: it is bound; the relocation is done and its marks are removed."""
    ROLLED_BACK = "RelocationRolledBack"
    """On a pending pod: the plan no longer held (timed out, node gone, room taken); every mark and
    surge is undone and the pod is planned again after a backoff."""
    CONSOLIDATING = "Consolidating"
    """On a costly node: makeroom starts moving its pods to cheaper nodes so the autoscaler can remove
    it, with the saving per hour."""
    CONSOLIDATED = "Consolidated"
    """On that node: it is empty, left for the autoscaler to remove."""
    CONSOLIDATION_STOPPED = "ConsolidationStopped"
    """On that node: makeroom gave it up (a pod waits, timed out, record unreadable); every mark, surge
    and the taint are undone, and the node is left alone for a cooldown."""

    @property
    def warning(self) -> bool:
        """Whether the Event is a Warning (something makeroom set out to do did not happen)."""
        return self is Reason.ROLLED_BACK
