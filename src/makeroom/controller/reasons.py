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
    CANNOT_HELP = "RoomNotUsed"
    """On a pending pod: the room makeroom made for it stayed unused (the scheduler would not place
    it there); makeroom moves nothing more for it. Recorded once per pod."""
    FELL_BACK_TO_EVICTION = "EvictedBeforeReplaced"
    """On a victim of a make-before-break move (migrate, consolidation): it was evicted, within its
    PodDisruptionBudget, before a replacement of its was Ready; the message says why (the Fallback)."""
    ZONE_UNKNOWN = "NewNodeZoneUnknown"
    """On a pending pod, once: a constraint by zone (its own, or a pod's that would move for it)
    needs a new node of a group spread over several zones whose template gives no zone, so makeroom
    moves nothing for it; the message names the constraint and the group."""
    CONSOLIDATING = "Consolidating"
    """On a costly node: makeroom starts moving its pods to cheaper nodes so the autoscaler can remove
    it, with the saving per hour."""
    CONSOLIDATED = "Consolidated"
    """On that node: it is empty, left for the autoscaler to remove."""
    CONSOLIDATION_UNPRICED = "ConsolidationUnpriced"
    """On makeroom's own pod, once: consolidation is on but no node group has a price, so it never
    starts (UNPRICED)."""
    CONSOLIDATION_STOPPED = "ConsolidationStopped"
    """On that node: makeroom gave it up (a pod waits, timed out, record unreadable); every mark, surge
    and the taint are undone, and the node is left alone for a cooldown."""
    KEEPING_ROOM = "KeepingRoom"
    """On a GPU node: makeroom moves CPU-only pods off it, make-before-break, to keep headroom for
    GPU pods (docs/headroom.md)."""
    ROOM_KEPT = "RoomKept"
    """On that node: its CPU-only pods left; the room is free for the GPU pods it is kept for."""
    KEEPING_STOPPED = "KeepingRoomStopped"
    """On that node: makeroom gave the move up (a pod waits, timed out, refused); marks and surges
    are undone."""

    @property
    def warning(self) -> bool:
        """Whether the Event is a Warning (something makeroom set out to do did not happen)."""
        return self in (
            Reason.ROLLED_BACK,
            Reason.FELL_BACK_TO_EVICTION,
            Reason.CONSOLIDATION_UNPRICED,
            Reason.CANNOT_HELP,
            Reason.ZONE_UNKNOWN,
        )


class Fallback(StrEnum):
    """Why a victim of a make-before-break move was evicted before a replacement of its was Ready
    (the ``why`` label of makeroom_relocation_fallbacks_total)."""

    REPLICAS_OWNED = "replicas-owned"
    """Another controller (an HPA, KEDA...) sets its workload's replicas: makeroom may not surge it."""
    NOT_A_DEPLOYMENT = "not-a-deployment"
    """Its workload is not a Deployment that controls it (a StatefulSet...): only Deployments are
    surged; other pods move by eviction, within their budget."""
    NOT_REPLACED = "not-replaced"
    """After the surge shrank back, its ReplicaSet removed other pods than it (not-Ready ones go
    first): it left with fewer Ready pods than wanted."""
    NO_WORKLOAD = "no-workload"
    """Its workload is gone."""

    @property
    def why(self) -> str:
        return {
            Fallback.REPLICAS_OWNED: "another controller sets its workload's replicas",
            Fallback.NOT_A_DEPLOYMENT: "its workload is not a Deployment makeroom may surge",
            Fallback.NOT_REPLACED: "its ReplicaSet removed other pods when the surge ended",
            Fallback.NO_WORKLOAD: "its workload is gone",
        }[self]


UNPRICED = (
    "consolidation is on, but no node group has a price, so no group is cheaper than another and it "
    "never starts: give each group's price_per_hour (--groups FILE; the chart's nodeGroups.groups)"
)
"""What ``plan``, the log and the ConsolidationUnpriced Event say when no group has a price."""
