"""The simulated cluster behind the controller's Cluster port.

Each verb goes through the simulated API server (World), so that its effects reach the scheduler,
the ReplicaSets and the autoscaler exactly as the real operation's would: no shortcut.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from makeroom.controller.port import EvictionBlockedError, NotFoundError
from makeroom.controller.reasons import ObjectKind, Reason
from makeroom.controller.records import RecordKind, Records, Stored
from makeroom.controller.scope import NAME_LABEL, NamespaceLabels
from makeroom.model import AutoscalerKind, OwnerKind, Pod, Resources, Taint, TaintEffect, Toleration, Workload
from makeroom.model.objects import RESERVED_FOR
from makeroom.model.state import ClusterState
from makeroom.sim.world import SURGE_REASON, EvictionRefusedError, World

GENERIC_KIND = "makeroom"

TIMELINE_KINDS: dict[Reason, str] = {
    Reason.RELOCATING: "relocation_started",
    Reason.MOVING: "moved",
    Reason.EVICTED: "relocation_evicted",
    Reason.ROOM_MADE: "relocation_done",
    Reason.ROLLED_BACK: "relocation_rolled_back",
    Reason.FELL_BACK_TO_EVICTION: "migrate_fell_back",
    Reason.CANNOT_HELP: "relocation_futile",
    Reason.ZONE_UNKNOWN: "relocation_zone_unknown",  # never in a scenario: its groups' zones are known
    # The consolidation Events keep the generic kind that the pinned JSON of the seeds carries
    # (tests/golden): kinds of their own would change spec v1's output for seed 4.
    Reason.CONSOLIDATING: GENERIC_KIND,
    Reason.CONSOLIDATED: GENERIC_KIND,
    Reason.CONSOLIDATION_STOPPED: GENERIC_KIND,
    Reason.CONSOLIDATION_UNPRICED: GENERIC_KIND,  # emitted only by `makeroom run`
    Reason.KEEPING_ROOM: "keeping_room_started",
    Reason.ROOM_KEPT: "room_kept",
    Reason.KEEPING_STOPPED: "keeping_room_stopped",
}
"""Each Event reason of the controller as a ``kind`` of the result's timeline (and of the pictures)."""


class SimCluster:
    def __init__(self, world: World) -> None:
        self.world = world

    # Clock
    def now(self) -> float:
        return self.world.now

    def snapshot(self) -> ClusterState:
        self._release_orphans()
        return self.world.state

    def namespaces(self) -> NamespaceLabels:
        # kept by the world as workloads are deployed: a trace's thousands of them are not scanned each tick
        return {n: {NAME_LABEL: n} for n in sorted(self.world.namespaces)}

    def deployment_of(self, pod: str) -> str | None:
        """Every simulated workload is a Deployment: a pod's is the one that made it."""
        found = self.world.state.pods.get(pod)
        if found is None or found.owner_kind is not OwnerKind.REPLICA_SET:
            return None
        return found.workload

    # makeroom's records, as custom resources of the simulated API server: stored as plain fields and
    # parsed on each read, so the controller never holds the stored object itself
    def records(self) -> Records:
        out = Records()
        for (kind, name), fields in self.world.custom.items():
            out.read(RecordKind(kind), name, fields)
        return out

    def save_record(self, record: Stored) -> None:
        self.world.custom[(record.kind.value, record.subject)] = record.to_fields()  # fresh containers

    def delete_record(self, kind: RecordKind, subject: str) -> None:
        self.world.custom.pop((kind.value, subject), None)

    def _pod(self, key: str) -> Pod:
        pod = self.world.state.pods.get(key)
        if pod is None:
            raise NotFoundError(f"pod {key} not found")
        return pod

    def _workload(self, name: str) -> Workload:
        w = self.world.workloads.get(name)
        if w is None:
            raise NotFoundError(f"workload {name} not found")
        return w

    def evict(self, pod: str) -> None:
        target = self._pod(pod)
        if target.terminating:
            return
        try:
            self.world.evict(target, "relocated")
        except EvictionRefusedError:
            raise EvictionBlockedError(f"evicting {pod} would break its disruption budget") from None

    def delete_pod(self, pod: str) -> None:
        self.world.delete_pod(self._pod(pod), "deleted")

    def annotate_pod(self, pod: str, changes: Mapping[str, str | None]) -> None:
        _apply(self._pod(pod).annotations, changes)

    def may_tidy(self, namespace: str) -> bool:
        return True  # the simulated API server has no rate limit

    def add_toleration(self, pod: str, toleration: Toleration) -> None:
        target = self._pod(pod)
        if toleration not in target.spec.tolerations:
            target.spec = replace(target.spec, tolerations=(*target.spec.tolerations, toleration))
            self.world.changed()

    def taint_node(self, node: str, taint: Taint) -> None:
        current = self._node_taints(node)
        self.world.set_taints(node, (*(t for t in current if t.key != taint.key), taint))

    def untaint_node(self, node: str, key: str) -> None:
        self.world.set_taints(node, tuple(t for t in self._node_taints(node) if t.key != key))

    def _node_taints(self, node: str) -> tuple[Taint, ...]:
        found = self.world.state.nodes.get(node)
        if found is None:
            raise NotFoundError(f"node {node} not found")
        return found.taints

    def nominate(self, pod: str, node: str | None) -> None:
        target = self._pod(pod)
        if node is not None and node not in self.world.state.nodes:
            raise NotFoundError(f"node {node} not found")
        self.world.state.nominate(target, node)
        if self.world.state.autoscaler is AutoscalerKind.KARPENTER:
            self._reserve(target, node)
        self.world.changed()

    def _reserve(self, pod: Pod, node: str | None) -> None:
        """Karpenter does not count what a nominated pod holds on its node, and would count that room
        for other pods instead of launching a node for them: besides the nomination, a reservation
        taint that only the pod tolerates holds the room, as the real adapter does under Karpenter."""
        self._release(pod.key)
        if node is None:
            return
        toleration = Toleration(RESERVED_FOR, "Equal", pod.key, TaintEffect.NO_SCHEDULE.value)
        if toleration not in pod.spec.tolerations:
            pod.spec = replace(pod.spec, tolerations=(*pod.spec.tolerations, toleration))
        taint = Taint(RESERVED_FOR, pod.key, TaintEffect.NO_SCHEDULE)
        self.world.set_taints(node, (*self._node_taints(node), taint))

    def _release(self, pod: str) -> None:
        for name, found in self.world.state.nodes.items():
            if any(t.key == RESERVED_FOR and t.value == pod for t in found.taints):
                self.world.set_taints(name, tuple(t for t in found.taints if t.key != RESERVED_FOR))

    def _release_orphans(self) -> None:
        """Reservations whose pod is gone or bound (the real adapter's ``release_orphan_reservations``)."""
        state = self.world.state
        for found in list(state.nodes.values()):
            for t in found.taints:
                if t.key == RESERVED_FOR and (
                    t.value not in state.pods or state.pods[t.value].node is not None
                ):
                    self._release(t.value)

    def scale(self, workload: str, replicas: int) -> None:
        """PATCH deployments/<name>/scale: only a Deployment has it (a StatefulSet of that name: 404)."""
        if self._workload(workload).owner_kind is not OwnerKind.REPLICA_SET:
            raise NotFoundError(f"deployments.apps {workload} not found")
        self.world.scale(workload, replicas, reason=SURGE_REASON)

    def keep_buffer(self, group: str, requests: Resources, replicas: int) -> None:
        """A CapacityBuffer in the simulated API server's store (the simulated autoscalers do not yet
        act on it: docs/headroom.md, "Limits")."""
        if group not in self.world.state.groups:
            raise NotFoundError(f"node group {group} not found")
        if replicas <= 0:
            self.world.buffers.pop(group, None)
        else:
            self.world.buffers[group] = (requests, replicas)
        self.world.rec.event(self.world.now, "capacity_buffer", group=group, replicas=replicas)

    def emit_event(self, kind: ObjectKind, name: str, reason: Reason, message: str) -> None:
        self.world.rec.event(
            self.world.now,
            TIMELINE_KINDS[reason],
            reason=reason.value,
            object=f"{kind.value}/{name}",
            message=message,
        )


def _apply(annotations: dict[str, str], changes: Mapping[str, str | None]) -> None:
    for key, value in changes.items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
