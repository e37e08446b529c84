"""Which timeline events a picture marks, in which lane, with which marker; and their aggregation."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from makeroom.controller.reasons import Reason
from makeroom.sim.recorder import TimelineEvent

# Lanes of the events panel, top to bottom.
LANES: tuple[str, ...] = ("scenario", "nodes", "disruption", "relocation", "other")


@dataclass(frozen=True, slots=True)
class EventStyle:
    lane: str
    marker: str
    label: str
    size: float = 42.0
    filled: bool = True
    trigger: bool = False  # also drawn as a faint vertical line across every panel of the column
    counted: bool = True  # label a mark that stands for several events with its count


# Known kinds, in the order of the rows of the events panel; the label names the row with the reason of
# the Kubernetes Event it stands for (report.story tells the same events in words under the same names).
KNOWN: Mapping[str, EventStyle] = {
    "deploy": EventStyle("scenario", "P", "Deploy", 50.0, trigger=True),
    "scale": EventStyle("scenario", "D", "Scale", 34.0, trigger=True),
    "delete": EventStyle("scenario", "X", "Delete", 50.0, trigger=True),
    "cordon": EventStyle("scenario", "s", "Cordon", 34.0, filled=False, trigger=True),
    "uncordon": EventStyle("scenario", "s", "Uncordon", 34.0, trigger=True),
    "scale_up": EventStyle("nodes", "^", "TriggeredScaleUp"),
    "no_scale_up": EventStyle("nodes", "^", "NotTriggerScaleUp", filled=False),
    "node_ready": EventStyle("nodes", "o", "NodeReady", 36.0),
    "scale_down": EventStyle("nodes", "v", "ScaleDown"),
    "scale_down_failed": EventStyle("nodes", "v", "ScaleDownFailed", filled=False),
    "node_removed": EventStyle("nodes", "x", "RemovingNode", 48.0),
    "preempted": EventStyle("disruption", "v", "Preempted", 46.0),
    "evicted": EventStyle("disruption", "X", "ScaleDown: evicted", 46.0),
    "eviction_refused": EventStyle("disruption", "|", "EvictionBlocked", 60.0, counted=False),
    "relocation_started": EventStyle("relocation", ">", Reason.RELOCATING),
    "moved": EventStyle("relocation", "o", Reason.MOVING, 36.0, filled=False),
    "makeroom_scale": EventStyle("relocation", "D", "ScalingReplicaSet", 30.0, filled=False),
    "relocation_evicted": EventStyle("relocation", "X", Reason.EVICTED, 40.0),
    "relocated": EventStyle("relocation", "x", "moved pod gone", 36.0),
    "relocation_done": EventStyle("relocation", "*", Reason.ROOM_MADE, 80.0),
    "relocation_rolled_back": EventStyle("relocation", "<", Reason.ROLLED_BACK, filled=False),
    Reason.CONSOLIDATING: EventStyle("relocation", ">", Reason.CONSOLIDATING, filled=False),
    Reason.CONSOLIDATED: EventStyle("relocation", "*", Reason.CONSOLIDATED, 60.0, filled=False),
    Reason.CONSOLIDATION_STOPPED: EventStyle("relocation", "<", Reason.CONSOLIDATION_STOPPED),
    "keeping_room_started": EventStyle("relocation", ">", Reason.KEEPING_ROOM, filled=False),
    "room_kept": EventStyle("relocation", "*", Reason.ROOM_KEPT, 60.0, filled=False),
    "keeping_room_stopped": EventStyle("relocation", "<", Reason.KEEPING_STOPPED),
}

# Kinds left off the picture: per-pod bookkeeping that the curves already show, or duplicates.
IGNORED: frozenset[str] = frozenset(
    {
        "pod_created",
        "pod_scheduled",
        "pod_ready",
        "pod_gone",
        "scaled_down",  # a pod deleted because its ReplicaSet shrank: the scale or delete shows it
        "pod_unschedulable",
        "nominated",
        "preempted_by",  # the same victim as "preempted", seen from the preemptor
        "node_provisioning",  # at the same instant as its scale_up
        "node_missing",
        "workload_missing",
    }
)

RELOCATION_GENERIC = EventStyle("relocation", "d", "", 34.0, filled=False)
OTHER = EventStyle("other", "d", "", 30.0)


def style_of(kind: str) -> EventStyle | None:
    """The style for a kind; None for kinds left off. Unknown kinds are drawn generically."""
    if kind in IGNORED:
        return None
    known = KNOWN.get(kind)
    if known is not None:
        return known
    if kind.startswith(("relocation", "relocate", "migrat", "move")):
        return RELOCATION_GENERIC
    return OTHER


@dataclass(frozen=True, slots=True)
class Mark:
    """Events of one kind and one group/workload that fall into one time bin."""

    t_s: float  # time of the first of them
    kind: str
    key: str | None  # the node group or workload that gives the colour; None for neutral
    count: int


def _owner(name: Any, owners: Collection[str]) -> str | None:
    """The workload of a pod or the group of a node, from the names <owner>-<n>."""
    if isinstance(name, str) and "-" in name:
        owner = name.rsplit("-", 1)[0]
        if owner in owners:
            return owner
    return None


def color_key(event: TimelineEvent, workloads: Collection[str], groups: Collection[str] = ()) -> str | None:
    """The group or workload whose colour an event takes: named in the event, or the owner of its pod or
    node (the workload before the node: a preempted pod is coloured as its workload)."""
    group = event.get("group")
    if isinstance(group, str):
        return group
    workload = event.get("workload")
    if isinstance(workload, str):
        return workload
    return _owner(event.get("pod"), workloads) or _owner(event.get("node"), groups)


def drawn_kind(event: TimelineEvent) -> str:
    """The row of an event: its kind, or for makeroom's consolidation Events (which share the kind
    ``makeroom`` in the timeline), the Event's reason."""
    reason = event.get("reason")
    if event.kind == "makeroom" and isinstance(reason, str):
        return reason
    return event.kind


def _weight(event: TimelineEvent) -> int:
    if event.kind == "scale_up":
        nodes = event.get("nodes")
        if isinstance(nodes, int) and not isinstance(nodes, bool) and nodes > 0:
            return nodes
    return 1


def aggregate(
    events: Iterable[TimelineEvent],
    duration_s: float,
    workloads: Collection[str],
    groups: Collection[str] = (),
    bins: int = 400,
) -> list[Mark]:
    """Marks for the drawn events: same kind and colour within 1/bins of the run share one mark."""
    width = duration_s / bins if duration_s > 0 else 1.0
    found: dict[tuple[str, str | None, int], list[float]] = {}
    for event in events:
        kind, t = drawn_kind(event), event.t
        if style_of(kind) is None:
            continue
        key = color_key(event, workloads, groups)
        slot = found.setdefault((kind, key, int(t // width)), [float(t), 0.0])
        slot[1] += _weight(event)
    marks = [Mark(t, kind, key, int(n)) for (kind, key, _), (t, n) in found.items()]
    marks.sort(key=lambda m: (m.t_s, m.kind, m.key or ""))
    return marks


def label_of(kind: str) -> str:
    """The row label for a kind: its known label, or the kind itself."""
    style = style_of(kind)
    return style.label if style is not None and style.label else kind


def row_order(kinds: Iterable[str]) -> list[str]:
    """Drawn kinds in row order: by lane, known kinds as KNOWN lists them, then the others by name."""
    known = list(KNOWN)

    def key(kind: str) -> tuple[int, int, str]:
        style = style_of(kind)
        assert style is not None
        return (LANES.index(style.lane), known.index(kind) if kind in KNOWN else len(known), kind)

    return sorted({k for k in kinds if style_of(k) is not None}, key=key)
