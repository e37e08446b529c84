"""The cluster state: objects plus numpy views of allocatable and requested resources per node.

Both the simulator and the planner read fit through this class, so that a scheduler decision in the
simulator and a destination chosen by the planner can never disagree about what fits. Nodes live in
slots of two (capacity x resources) integer matrices; fit over every node is one vectorised comparison,
which is what keeps a 5,000-node, 150,000-pod cluster cheap to plan on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from makeroom.model.fit import static_fit
from makeroom.model.nodepool import AutoscalerKind
from makeroom.model.objects import (
    HOSTNAME_LABEL,
    NAMESPACE_NAME_LABEL,
    Node,
    NodeGroup,
    Pod,
    PodSpec,
    Workload,
)
from makeroom.model.resources import ResourceIndex, Resources, Vector

Mask = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Room:
    """Free allocatable of one node, and the pods that sit on it."""

    node: Node
    free: Resources


class ClusterState:
    """Nodes, pods, node groups and workloads, with per-node resource accounting kept in step."""

    def __init__(
        self,
        groups: Iterable[NodeGroup],
        workloads: Iterable[Workload] = (),
        resource_names: Iterable[str] = (),
        capacity: int = 64,
        autoscaler: AutoscalerKind = AutoscalerKind.CLUSTER_AUTOSCALER,
    ) -> None:
        self.groups: dict[str, NodeGroup] = {g.name: g for g in groups}
        self.autoscaler = autoscaler  # which autoscaler grows the groups: what it would buy follows it
        # The cluster-autoscaler's priority expander's configuration: group -> priority, highest
        # first (its ConfigMap); None: the groups' order, as a scenario lists them.
        self.expander_priorities: dict[str, int] | None = None
        self.workloads: dict[str, Workload] = {w.name: w for w in workloads}
        names = set(resource_names)
        for g in self.groups.values():
            names.update(g.capacity)
        for w in self.workloads.values():
            names.update(w.spec.requests)
        self.index = ResourceIndex(names)
        width = len(self.index)
        self.alloc: Vector = np.zeros((capacity, width), dtype=np.int64)
        self.used: Vector = np.zeros((capacity, width), dtype=np.int64)
        self.alive: Mask = np.zeros(capacity, dtype=np.bool_)
        self.order: Vector = np.zeros(capacity, dtype=np.int64)  # creation order, for stable ties
        self._added = 0
        self.nodes: dict[str, Node] = {}
        self.slot_of: dict[str, int] = {}
        self.node_at: list[Node | None] = [None] * capacity
        self._free_slots: list[int] = list(range(capacity - 1, -1, -1))
        self.pods: dict[str, Pod] = {}
        self.pods_on: dict[str, dict[str, Pod]] = {}
        self.nominated: dict[str, dict[str, Pod]] = {}
        # Keyed by id(): specs are shared by a workload's replicas and hashing a frozen spec on every
        # lookup dominated the simulator's profile. The spec is kept in the value so its id stays unique.
        self._req_cache: dict[int, tuple[PodSpec, Vector]] = {}
        # whether a group's new node takes a spec by its labels, taints and size (ClusterView.admits):
        # the groups do not change, so it holds for every view of this state (keyed by the width)
        self.group_fit: dict[tuple[int, str, int], tuple[PodSpec, bool]] = {}
        self._mask_cache: dict[int, tuple[PodSpec, Mask]] = {}
        self._nominated_count = 0
        # For the filters that look at other pods (model.scheduling): bound pods by label key and value,
        # bound pods whose spec has required anti-affinity (by spec id) or host ports, and namespaces'
        # labels for namespaceSelector. Kept in step by bind / remove_pod / remove_node.
        self.namespaces: dict[str, dict[str, str]] = {}
        self.by_label: dict[str, dict[str, dict[str, Pod]]] = {}
        self.anti_affine: dict[int, tuple[PodSpec, dict[str, Pod]]] = {}
        self.with_ports: dict[str, Pod] = {}
        self.affine: dict[str, Pod] = {}  # bound pods with pod affinity, or preferred (anti-)affinity
        self.pod_of_spec: dict[int, Pod] = {}  # one pod of each spec (id): its labels and namespace
        # per-node facts (model.scheduling, the view), kept until the nodes change
        self.domain_cache: dict[object, object] = {}
        self.generation = 0  # bumped on every change of placement or nodes, for callers' caches
        self.node_generation = 0  # bumped when nodes come, go, or change labels, taints, readiness

    # --- resources -------------------------------------------------------------------------
    def requests_of(self, spec: PodSpec) -> Vector:
        hit = self._req_cache.get(id(spec))
        if hit is not None:
            return hit[1]
        unknown = set(spec.requests) - set(self.index.names)
        if unknown:
            self._widen(unknown)
        vec = self.index.vector(PodSpec.effective(spec.requests))
        vec.setflags(write=False)
        self._req_cache[id(spec)] = (spec, vec)
        return vec

    def _widen(self, names: set[str]) -> None:
        """A resource first seen after start (a workload deployed later): add matrix columns."""
        old = self.index
        self.index = ResourceIndex(set(old.names) | names)
        order = [self.index.position(n) for n in old.names]
        for attr in ("alloc", "used"):
            grown = np.zeros((len(self.alive), len(self.index)), dtype=np.int64)
            grown[:, order] = getattr(self, attr)
            setattr(self, attr, grown)
        self._req_cache.clear()

    # --- nodes -------------------------------------------------------------------------------
    def add_node(self, node: Node) -> None:
        if node.name in self.nodes:
            raise ValueError(f"node {node.name} exists")
        unknown = set(node.allocatable) - set(self.index.names)
        if unknown:
            self._widen(unknown)
        if not self._free_slots:
            self._grow()
        node.labels.setdefault(HOSTNAME_LABEL, node.name)  # as the kubelet registers every node
        slot = self._free_slots.pop()
        self.nodes[node.name] = node
        self.slot_of[node.name] = slot
        self.node_at[slot] = node
        self.alive[slot] = True
        self._added += 1
        self.order[slot] = self._added
        self.alloc[slot] = self.index.vector(node.allocatable)
        self.used[slot] = 0
        self.pods_on[node.name] = {}
        self.nominated[node.name] = {}
        self.nodes_changed()

    def _grow(self) -> None:
        old = len(self.alive)
        new = old * 2
        width = len(self.index)
        for attr in ("alloc", "used"):
            grown = np.zeros((new, width), dtype=np.int64)
            grown[:old] = getattr(self, attr)
            setattr(self, attr, grown)
        alive = np.zeros(new, dtype=np.bool_)
        alive[:old] = self.alive
        self.alive = alive
        order = np.zeros(new, dtype=np.int64)
        order[:old] = self.order
        self.order = order
        self.node_at.extend([None] * (new - old))
        self._free_slots.extend(range(new - 1, old - 1, -1))

    def remove_node(self, name: str) -> list[Pod]:
        """Remove a node; its pods are returned unbound (their fate is the caller's to decide)."""
        slot = self.slot_of.pop(name)
        del self.nodes[name]
        self.node_at[slot] = None
        self.alive[slot] = False
        self.used[slot] = 0
        self._free_slots.append(slot)
        orphans = list(self.pods_on.pop(name).values())
        for pod in orphans:
            self._unindex(pod)
            pod.node = None
        for pod in self.nominated.pop(name).values():
            pod.nominated_node = None
            self._nominated_count -= 1
        self.nodes_changed()
        return orphans

    def nodes_changed(self) -> None:
        """Call after a node's labels, taints, readiness or cordon changed."""
        self._mask_cache.clear()
        self.domain_cache.clear()
        self.generation += 1
        self.node_generation += 1

    def nodes_of(self, group: str) -> list[Node]:
        return [n for n in self.nodes.values() if n.group == group]

    # --- pods --------------------------------------------------------------------------------
    def add_pod(self, pod: Pod) -> None:
        self.pods[pod.key] = pod
        self.pod_of_spec.setdefault(id(pod.spec), pod)
        self.requests_of(pod.spec)
        if pod.node is not None:
            node = pod.node
            pod.node = None
            self.bind(pod, node)

    def add_pods(self, pods: Iterable[Pod]) -> None:
        """Many pods at once, as from a snapshot: what ``add_pod`` does for each (nominations
        aside), with one update of the requested matrix instead of one per pod."""
        slots: list[int] = []
        vectors: list[Vector] = []
        for pod in pods:
            self.pods[pod.key] = pod
            self.pod_of_spec.setdefault(id(pod.spec), pod)
            vec = self.requests_of(pod.spec)
            if pod.node is not None:
                self.pods_on[pod.node][pod.key] = pod
                self._index(pod)
                slots.append(self.slot_of[pod.node])
                vectors.append(vec)
        if slots:
            np.add.at(self.used, np.asarray(slots), np.stack(vectors))
        self.generation += 1

    def bind(self, pod: Pod, node: str) -> None:
        assert pod.node is None, f"{pod.key} is bound already"
        pod.node = node
        self.pods_on[node][pod.key] = pod
        self._index(pod)
        self.used[self.slot_of[node]] += self.requests_of(pod.spec)
        self.clear_nomination(pod)
        self.generation += 1

    def remove_pod(self, pod: Pod) -> None:
        del self.pods[pod.key]
        self.clear_nomination(pod)
        if pod.node is not None and pod.node in self.pods_on:
            del self.pods_on[pod.node][pod.key]
            self.used[self.slot_of[pod.node]] -= self.requests_of(pod.spec)
        self._unindex(pod)
        pod.node = None
        self.generation += 1

    def _index(self, pod: Pod) -> None:
        for key, value in pod.labels.items():
            self.by_label.setdefault(key, {}).setdefault(value, {})[pod.key] = pod
        if pod.spec.pod_anti_affinity:
            self.anti_affine.setdefault(id(pod.spec), (pod.spec, {}))[1][pod.key] = pod
        if pod.spec.host_ports:
            self.with_ports[pod.key] = pod
        spec = pod.spec
        if spec.pod_affinity or spec.preferred_pod_affinity or spec.preferred_pod_anti_affinity:
            self.affine[pod.key] = pod

    def _unindex(self, pod: Pod) -> None:
        for key, value in pod.labels.items():
            held = self.by_label.get(key, {}).get(value)
            if held is not None:
                held.pop(pod.key, None)
        entry = self.anti_affine.get(id(pod.spec))
        if entry is not None:
            entry[1].pop(pod.key, None)
            if not entry[1]:
                del self.anti_affine[id(pod.spec)]
        self.with_ports.pop(pod.key, None)
        self.affine.pop(pod.key, None)

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        """A namespace's labels, with the name label the API server sets on every namespace."""
        return {**self.namespaces.get(namespace, {}), NAMESPACE_NAME_LABEL: namespace}

    def nominate(self, pod: Pod, node: str | None) -> None:
        self.clear_nomination(pod)
        if node is not None and node in self.nominated:
            pod.nominated_node = node
            self.nominated[node][pod.key] = pod
            self._nominated_count += 1
            self.generation += 1

    def clear_nomination(self, pod: Pod) -> None:
        if pod.nominated_node is not None:
            if self.nominated.get(pod.nominated_node, {}).pop(pod.key, None) is not None:
                self._nominated_count -= 1
                self.generation += 1
            pod.nominated_node = None

    # --- fit ---------------------------------------------------------------------------------
    def static_mask(self, spec: PodSpec) -> Mask:
        """Nodes whose labels, taints, readiness and cordon admit pods of this spec."""
        hit = self._mask_cache.get(id(spec))
        if hit is not None:
            return hit[1]
        mask = np.zeros(len(self.alive), dtype=np.bool_)
        for name, slot in self.slot_of.items():
            mask[slot] = static_fit(spec, self.nodes[name]) is None
        mask.setflags(write=False)
        self._mask_cache[id(spec)] = (spec, mask)
        return mask

    def free(self) -> Vector:
        return self.alloc - self.used

    def free_after_nominations(self) -> Vector:
        """Free room on every node after what every nominated pod holds there (the autoscaler's
        view, and consolidation's: room promised to a pending pod is not free)."""
        free = self.free()
        for node, held in self.nominated.items():
            slot = self.slot_of[node]
            for pod in held.values():
                free[slot] -= self.requests_of(pod.spec)
        return free

    def nominated_load(self, pod: Pod, free: Vector) -> Vector:
        """Free room after holding what pods nominated with equal or higher priority need."""
        out = free
        if not self._nominated_count:
            return out
        copied = False
        for node, held in self.nominated.items():
            if not held:
                continue
            slot = self.slot_of[node]
            for other in held.values():
                if other is pod or other.priority < pod.priority:
                    continue
                if not copied:
                    out = free.copy()
                    copied = True
                out[slot] -= self.requests_of(other.spec)
        return out

    def feasible(self, pod: Pod, free: Vector | None = None) -> Mask:
        """Nodes that can take the pod now, as the scheduler's filter stage decides."""
        room = self.nominated_load(pod, self.free() if free is None else free)
        req = self.requests_of(pod.spec)
        mask: Mask = self.static_mask(pod.spec) & np.all(room >= req, axis=1)
        return mask

    def node_free(self, name: str) -> Resources:
        slot = self.slot_of[name]
        return self.index.resources(self.alloc[slot] - self.used[slot])

    def rooms(self) -> Iterator[Room]:
        for name, node in self.nodes.items():
            yield Room(node, self.node_free(name))

    def pending(self) -> list[Pod]:
        """Pods the scheduler tries to place (a gated pod is not one of them until its gates go)."""
        return [p for p in self.pods.values() if p.node is None and not p.terminating and not p.gated]
