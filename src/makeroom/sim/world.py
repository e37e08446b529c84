"""The simulated API server, ReplicaSet controllers and kubelets: the objects and their lifecycles.

Every change to the cluster goes through a verb here (create, bind, delete, evict, scale, taint,
provision, remove), which keeps the resource accounting, the ReplicaSets, the recorder and the
scheduler's queue in step. Components and the relocation controller change the world only this way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from makeroom.model import VICTIM_OF, AutoscalerKind, InstanceType, Node, NodeGroup, Pod, Taint, Workload
from makeroom.model.objects import ZONE_LABEL
from makeroom.model.provisioning import node_labels
from makeroom.model.resources import Resources
from makeroom.model.state import ClusterState
from makeroom.sim.clock import EventLoop, Phase
from makeroom.sim.recorder import GroupTrack, Recorder, Removal, WorkloadTrack
from makeroom.sim.replicaset import deletion_order

SURGE_REASON = "makeroom_scale"


class EvictionRefusedError(Exception):
    """HTTP 429: the eviction would break the pod's disruption budget."""


def _group_provision_time(group: NodeGroup) -> float:
    return group.provision_time


class World:
    def __init__(
        self,
        groups: tuple[NodeGroup, ...],
        workloads: tuple[Workload, ...],
        extra_resources: set[str],
        loop: EventLoop,
        recorder: Recorder,
        autoscaler: AutoscalerKind = AutoscalerKind.CLUSTER_AUTOSCALER,
    ) -> None:
        self.loop = loop
        self.rec = recorder
        self.state = ClusterState(groups, workloads, extra_resources, autoscaler=autoscaler)
        self.workloads = self.state.workloads  # one dict: what the controller reads is what runs
        self.workloads.clear()
        self.namespaces: set[str] = {"default"}  # of the workloads deployed: they are never deleted
        self.pods_of: dict[str, dict[str, Pod]] = {}
        self.pending: dict[str, Pod] = {}
        self._pod_numbers: dict[str, int] = {}
        self._node_numbers: dict[str, int] = {g.name: 0 for g in groups}
        self.node_order: dict[str, int] = {}
        self._seq = 0
        self.on_change: list[Callable[[], None]] = []  # wakes the scheduler
        self.on_pod_event: list[Callable[[str], None]] = []  # a pod bound to or leaving a node (by name)
        self.instance_type: dict[str, InstanceType] = {}  # node -> its type, for nodes launched as one
        self.custom: dict[tuple[str, str], dict[str, Any]] = {}
        self.buffers: dict[str, tuple[Resources, int]] = {}  # CapacityBuffers by node group
        """Custom resources by (kind, name), as the API server stores them: makeroom's records."""
        self._reconciling: set[str] = set()
        self.provision_time: Callable[[NodeGroup], float] = _group_provision_time
        """Seconds from a node's creation to Ready; the fleet benchmark draws it per node."""
        for g in groups:
            recorder.groups[g.name] = GroupTrack(g.price_per_hour)

    @property
    def now(self) -> float:
        return self.loop.now

    def changed(self) -> None:
        for wake in self.on_change:
            wake()

    # --- nodes -------------------------------------------------------------------------------
    def provision_node(
        self,
        group: str,
        ready: bool = False,
        instance_type: InstanceType | None = None,
        zone: str | None = None,
    ) -> Node:
        """A node the cloud creates now; it joins Ready after the group's provision time. A pool's
        node is of one of its instance types: its allocatable, labels and price are the type's. Its
        zone is ``zone`` (a NodeClaim's, which Karpenter chose), else the group's round-robin."""
        g = self.state.groups[group]
        number = self._node_numbers[group]
        name = f"{group}-{number}"
        self._node_numbers[group] += 1
        if instance_type is None:
            labels = g.node_labels(number)
            node = Node(name, group, g.capacity, labels, g.taints, ready=ready, created_at=self.now)
        else:
            labels = {**node_labels(g, instance_type), **g.zone_label(number)}
            if zone is not None:
                labels[ZONE_LABEL] = zone
            node = Node(
                name, group, instance_type.capacity, labels, g.taints, ready=ready, created_at=self.now
            )
            self.instance_type[name] = instance_type
        self.state.add_node(node)
        self.node_order[name] = len(self.node_order)
        track = self.rec.groups[group]
        track.advance(self.now)
        track.nodes += 1
        track.peak = max(track.peak, track.nodes)
        if instance_type is not None:
            track.extra_price_per_hour += instance_type.price_per_hour - track.price_per_hour
        if ready:
            track.ready += 1
        else:
            track.added += 1
            if instance_type is None:
                self.rec.event(self.now, "node_provisioning", node=name, group=group)
            else:
                self.rec.event(
                    self.now, "node_provisioning", node=name, group=group, instance_type=instance_type.name
                )
            self.loop.after(self.provision_time(g), Phase.WORLD, lambda: self._node_ready(name))
        return node

    def _node_ready(self, name: str) -> None:
        node = self.state.nodes.get(name)
        if node is None or node.ready:
            return
        node.ready = True
        self.state.nodes_changed()
        self.rec.groups[node.group].ready += 1
        self.rec.event(self.now, "node_ready", node=name, group=node.group)
        self.changed()

    def remove_node(self, name: str, reason: str) -> None:
        """The node and its pods are gone at once (scale-down's last step, or a spot reclaim)."""
        node = self.state.nodes.get(name)
        if node is None:
            self.rec.event(self.now, "node_missing", node=name, reason=reason)
            return
        for pod in list(self.state.pods_on[name].values()):
            self._forget(pod)
        self.state.remove_node(name)
        track = self.rec.groups[node.group]
        track.advance(self.now)
        track.nodes -= 1
        launched = self.instance_type.pop(name, None)
        if launched is not None:
            track.extra_price_per_hour -= launched.price_per_hour - track.price_per_hour
        track.removed += 1
        if node.ready:
            track.ready -= 1
        self.rec.event(self.now, "node_removed", node=name, group=node.group, reason=reason)
        for workload in list(self.workloads):
            self.reconcile(workload)
        self.changed()

    def set_cordon(self, name: str, cordoned: bool) -> None:
        node = self.state.nodes.get(name)
        if node is None:
            self.rec.event(self.now, "node_missing", node=name)
            return
        node.unschedulable = cordoned
        self.state.nodes_changed()
        self.rec.event(self.now, "cordon" if cordoned else "uncordon", node=name)
        self.changed()

    def set_taints(self, name: str, taints: tuple[Taint, ...]) -> None:
        node = self.state.nodes[name]
        node.taints = taints
        self.state.nodes_changed()
        self.changed()

    # --- pods --------------------------------------------------------------------------------
    def _new_pod(self, w: Workload) -> Pod:
        n = self._pod_numbers.get(w.name, 0)
        self._pod_numbers[w.name] = n + 1
        self._seq += 1
        return Pod(
            f"{w.name}-{n}",
            w.spec,
            w.name,
            owner_kind=w.owner_kind,
            created_at=self.now,
            seq=self._seq,
            labels=dict(w.labels),
        )

    def create_pod(self, w: Workload, node: str | None = None, ready: bool = False) -> Pod:
        pod = self._new_pod(w)
        self.state.add_pod(pod)
        self.pods_of[w.name][pod.key] = pod
        if node is None:
            self.pending[pod.key] = pod
            self.rec.event(self.now, "pod_created", pod=pod.name, workload=w.name)
            self.changed()
        else:
            self.state.bind(pod, node)
            if ready:
                self._set_ready(pod)
        return pod

    def bind(self, pod: Pod, node: str) -> None:
        self.pending.pop(pod.key, None)
        self.state.bind(pod, node)
        pod.unschedulable_since = None
        self.rec.event(self.now, "pod_scheduled", pod=pod.name, node=node)
        for hook in self.on_pod_event:
            hook(node)
        key = pod.key
        self.loop.after(pod.spec.startup_time, Phase.WORLD, lambda: self._started(key, node))

    def _started(self, key: str, node: str) -> None:
        pod = self.state.pods.get(key)
        if pod is None or pod.node != node or pod.terminating or pod.ready:
            return
        self._set_ready(pod)
        self.rec.event(self.now, "pod_ready", pod=pod.name, node=node)

    def _set_ready(self, pod: Pod) -> None:
        pod.ready = True
        pod.ready_since = self.now
        if pod.workload in self.rec.workloads:
            track = self.rec.workloads[pod.workload]
            track.advance(self.now)
            track.ready += 1
            track.observe(self.now)

    def _unready(self, pod: Pod) -> None:
        if pod.ready:
            pod.ready = False
            if pod.workload in self.rec.workloads:
                track = self.rec.workloads[pod.workload]
                track.advance(self.now)
                track.ready -= 1
                track.observe(self.now)

    def delete_pod(self, pod: Pod, reason: str, grace: float | None = None) -> None:
        """Graceful deletion: the pod stops being Ready now and releases its node after the grace."""
        if pod.terminating or pod.key not in self.state.pods:
            return
        pod.terminating = True
        self._unready(pod)
        self.state.clear_nomination(pod)
        self.pending.pop(pod.key, None)
        if pod.node is not None:
            for hook in self.on_pod_event:
                hook(pod.node)
        self.rec.event(self.now, reason, pod=pod.name, node=pod.node, workload=pod.workload)
        if pod.workload is not None:
            self.reconcile(pod.workload)
        if pod.node is None:
            self._forget(pod)
            self.changed()
            return
        key = pod.key
        wait = pod.spec.termination_grace if grace is None else grace
        self.loop.after(wait, Phase.WORLD, lambda: self._gone(key))

    def _gone(self, key: str) -> None:
        pod = self.state.pods.get(key)
        if pod is None:
            return
        self.rec.event(self.now, "pod_gone", pod=pod.name, node=pod.node)
        self._forget(pod)
        self.changed()

    def _forget(self, pod: Pod) -> None:
        self._unready(pod)
        if pod.key in self.state.pods:
            self.state.remove_pod(pod)
        self.pending.pop(pod.key, None)
        if pod.workload is not None:
            self.pods_of.get(pod.workload, {}).pop(pod.key, None)

    # --- disruption budgets ------------------------------------------------------------------
    def healthy(self, workload: str) -> int:
        """Ready pods that are not terminating: the recorder keeps exactly this count."""
        track = self.rec.workloads.get(workload)
        return track.ready if track is not None else 0

    def disruptions_allowed(self, workload: str | None) -> int | None:
        """How many more of the workload's pods may be evicted now; None when no budget applies."""
        if workload is None or workload not in self.workloads:
            return None
        w = self.workloads[workload]
        if w.pdb is None:
            return None
        return w.pdb.disruptions_allowed(self.healthy(workload), w.replicas)

    def evict(self, pod: Pod, reason: str = "evicted") -> None:
        """The Eviction API: refused with 429 when the budget has no disruption left."""
        allowed = self.disruptions_allowed(pod.workload)
        if allowed is not None and pod.ready and allowed < 1:
            self.rec.event(self.now, "eviction_refused", pod=pod.name, workload=pod.workload)
            raise EvictionRefusedError(pod.name)
        if allowed is not None and not pod.ready and pod.workload is not None:
            w = self.workloads[pod.workload]
            assert w.pdb is not None
            if self.healthy(pod.workload) < w.pdb.desired_healthy(w.replicas):
                self.rec.event(self.now, "eviction_refused", pod=pod.name, workload=pod.workload)
                raise EvictionRefusedError(pod.name)
        self.rec.count_removal(pod.workload, Removal.EVICTED)
        self.delete_pod(pod, reason)

    # --- workloads ---------------------------------------------------------------------------
    def deploy(self, w: Workload, announce: bool = True) -> None:
        self.workloads[w.name] = w
        self.namespaces.add(w.namespace)
        self.pods_of.setdefault(w.name, {})
        self.rec.workloads[w.name] = WorkloadTrack(
            w.spec.priority, w.replicas, raised_at=self.now, last_t=self.now
        )
        if announce:
            self.rec.event(self.now, "deploy", workload=w.name, replicas=w.replicas)

    def scale(self, name: str, replicas: int, reason: str = "scale") -> None:
        w = self.workloads.get(name)
        if w is None:
            self.rec.event(self.now, "workload_missing", workload=name)
            return
        self.workloads[name] = replace(w, replicas=replicas)
        if reason != SURGE_REASON:  # a relocation's temporary surge is not what the user wants
            track = self.rec.workloads[name]
            track.advance(self.now)
            if replicas > track.desired:
                track.raised_at = self.now
                track.ready_at = None
            track.desired = replicas
            track.observe(self.now)
        self.rec.event(self.now, reason, workload=name, replicas=replicas)
        self.reconcile(name)

    def delete_workload(self, name: str) -> None:
        """As a Deployment deleted in the API (background propagation): its pods terminate with their
        grace period, and the workload is gone at once; no controller sees it again (a deleted model
        is nobody to keep room for, and a trace of thousands of short jobs leaves no trail of them)."""
        if name not in self.workloads:
            return
        self.scale(name, 0, reason="delete")
        del self.workloads[name]

    def reconcile(self, name: str) -> None:
        """The ReplicaSet controller: replacements at once, surplus pods by deletion order."""
        w = self.workloads.get(name)
        if w is None or name in self._reconciling:
            return
        self._reconciling.add(name)
        try:
            active = [p for p in self.pods_of[name].values() if not p.terminating]
            if len(active) < w.replicas:
                for _ in range(w.replicas - len(active)):
                    self.create_pod(w)
            elif len(active) > w.replicas:
                for pod in deletion_order(active)[: len(active) - w.replicas]:
                    if VICTIM_OF in pod.annotations:  # a relocation's victim leaving as planned
                        self.rec.count_removal(pod.workload, Removal.REPLACED)
                        self.delete_pod(pod, "relocated")
                    else:
                        self.delete_pod(pod, "scaled_down")
        finally:
            self._reconciling.discard(name)
