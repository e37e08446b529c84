"""One read-only view of a ClusterState for the code that decides: the planner, consolidation and the
controller's checks that a decision still holds all ask it, so that they never disagree on what is
free, which nodes a pod may use, or what a new node of a group would hold.

It answers:
- free room per node after what nominated pods hold (the scheduler keeps it for them, and the
  autoscaler does not count it as free), and the room a given pod sees (holds of pods of equal or
  higher priority only, as the scheduler's filter counts them);
- which Ready nodes admit a pod spec (labels, affinity, taints, cordon: ``static_fit``), computed once
  per kind of node rather than once per node, and which nodes still being provisioned would;
- what a new node of a group would be (its allocatable, cloned from the group's template) and whether
  it would admit a spec; how many nodes each group has and whether it may grow.

Every fact is computed on first use and kept for the life of the view. A view describes the state at
the moment it was made: after the state changes, make a new one (``stale`` tells).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property

import numpy as np
import numpy.typing as npt

from makeroom.model.fit import label_fit, static_fit
from makeroom.model.nodepool import AutoscalerKind
from makeroom.model.objects import HOSTNAME_LABEL, Node, Pod, PodSpec, Taint
from makeroom.model.provisioning import pool_takes
from makeroom.model.resources import DEFAULT_MAX_PODS, PODS, Vector
from makeroom.model.scheduling import Placement, pod_mask
from makeroom.model.state import ClusterState, Mask

Slots = npt.NDArray[np.intp]

NODE_CONDITION_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/network-unavailable",
        "node.cloudprovider.kubernetes.io/uninitialized",
    }
)
"""Taints that stand for a node's conditions while it comes up (the autoscaler's NodeConditionTaints
that a starting node has): not counted on a node being provisioned."""


class ClusterView:
    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.generation = state.generation
        self._static: dict[PodSpec, Mask] = {}
        self._upcoming: dict[PodSpec, Mask] = {}
        self._template: dict[str, Vector] = {}
        self._admits: dict[tuple[PodSpec, str], bool] = {}
        self._labels: dict[str, npt.NDArray[np.int64]] = {}
        self._others: dict[PodSpec, Mask | None] = {}
        self._fresh: dict[tuple[PodSpec, str], bool] = {}

    @property
    def stale(self) -> bool:
        """Whether the state changed (placements, nodes, nominations) since the view was made."""
        return self.state.generation != self.generation

    # --- nodes -----------------------------------------------------------------------------------
    @cached_property
    def ready(self) -> Mask:
        at = self.state.node_at
        return np.fromiter((nd is not None and nd.ready for nd in at), dtype=np.bool_, count=len(at))

    @cached_property
    def upcoming(self) -> Mask:
        """Nodes that exist but are not Ready yet (being provisioned)."""
        mask: Mask = self.state.alive & ~self.ready
        return mask

    @cached_property
    def group_rank(self) -> dict[str, int]:
        """Groups in order of preference (the order the cluster lists them)."""
        return {name: i for i, name in enumerate(self.state.groups)}

    @cached_property
    def expander_priorities(self) -> dict[str, int]:
        """The cluster-autoscaler's priority expander's priority of each group it may choose, highest
        first: its configuration, else the groups' order."""
        configured = self.state.expander_priorities
        if configured is not None:
            return configured
        return {name: -rank for name, rank in self.group_rank.items()}

    @cached_property
    def slot_rank(self) -> npt.NDArray[np.int64]:
        """Per slot, the rank of its node's group (groups not listed, and empty slots, rank last)."""
        ranks = self.group_rank
        others = len(ranks)
        at = self.state.node_at
        return np.fromiter(
            (others if nd is None else ranks.get(nd.group, others) for nd in at),
            dtype=np.int64,
            count=len(at),
        )

    @cached_property
    def group_size(self) -> dict[str, int]:
        """Nodes per group, Ready or not."""
        counts = np.bincount(self.slot_rank[self.state.alive], minlength=len(self.group_rank) + 1)
        return {name: int(counts[i]) for name, i in self.group_rank.items()}

    def can_grow(self, group: str, adding: int = 0) -> bool:
        """Whether the group may get one more node on top of ``adding`` new ones."""
        return self.group_size[group] + adding < self.state.groups[group].max

    def name(self, slot: int) -> str:
        node = self.state.node_at[slot]
        assert node is not None
        return node.name

    def first(self, mask: Mask) -> int:
        """The preferred node of a non-empty mask: group order, then slot."""
        slots = np.flatnonzero(mask)
        order = np.lexsort((slots, self.slot_rank[slots]))
        return int(slots[order[0]])

    # --- free room -------------------------------------------------------------------------------
    @cached_property
    def holds(self) -> dict[str, tuple[int, Pod]]:
        """Pending pods nominated to a node: pod key -> (slot, pod). The scheduler keeps their room."""
        state = self.state
        out: dict[str, tuple[int, Pod]] = {}
        for node_name, held in state.nominated.items():
            slot = state.slot_of[node_name]
            for pod in held.values():
                if pod.node is None and not pod.terminating:
                    out[pod.key] = (slot, pod)
        return out

    @cached_property
    def free(self) -> Vector:
        """Free room per node after every hold (read-only: copy it to claim room)."""
        free = self.state.free()
        for slot, pod in self.holds.values():
            free[slot] -= self.state.requests_of(pod.spec)
        free.setflags(write=False)
        return free

    def room_for(self, pod: Pod) -> Vector:
        """Free room per node as the scheduler's filter sees it for this pod: after the holds of other
        pods of equal or higher priority only."""
        free = self.state.free()
        for key, (slot, other) in self.holds.items():
            if key != pod.key and other.priority >= pod.priority:
                free[slot] -= self.state.requests_of(other.spec)
        return free

    def room_on(self, slot: int, pod: Pod, leaving: Iterable[Pod] = ()) -> Vector:
        """The room the pod sees on one node (as ``room_for``) once the ``leaving`` pods are gone."""
        state = self.state
        room: Vector = state.alloc[slot] - state.used[slot]
        for key, (held, other) in self.holds.items():
            if held == slot and key != pod.key and other.priority >= pod.priority:
                room = room - state.requests_of(other.spec)
        for other in leaving:
            room = room + state.requests_of(other.spec)
        return room

    # --- which nodes a spec may use --------------------------------------------------------------
    @cached_property
    def _kinds(self) -> tuple[npt.NDArray[np.int64], list[Node]]:
        """Nodes alike for ``static_fit`` (readiness, cordon, taints): per slot its kind, and one
        node of each kind, so that a spec is checked once per kind instead of once per node. Kept on
        the state until its nodes change (a pass over every node's taints, for every plan, was a
        tenth of a plan's time at 5,000 nodes)."""
        hit = self.state.domain_cache.get("node-kinds")
        if hit is not None:
            return hit  # type: ignore[return-value]
        kinds = self._count_kinds()
        self.state.domain_cache["node-kinds"] = kinds
        return kinds

    def _count_kinds(self) -> tuple[npt.NDArray[np.int64], list[Node]]:
        by_id: dict[tuple[bool, bool, int], int] = {}
        by_value: dict[tuple[bool, bool, tuple[Taint, ...]], int] = {}
        sample: list[Node] = []
        at = self.state.node_at
        sig = [-1] * len(at)
        for slot, nd in enumerate(at):
            if nd is None:
                continue
            fast = (nd.ready, nd.unschedulable, id(nd.taints))
            kind = by_id.get(fast)
            if kind is None:
                value = (nd.ready, nd.unschedulable, nd.taints)
                kind = by_value.get(value)
                if kind is None:
                    kind = by_value[value] = len(sample)
                    sample.append(nd)
                by_id[fast] = kind
            sig[slot] = kind
        return np.array(sig, dtype=np.int64), sample

    def label_codes(self, key: str) -> npt.NDArray[np.int64]:
        """Per slot, a code for the node's value of one label (0: no such label, or no node)."""
        codes = self._labels.get(key)
        if codes is None:
            values: dict[str, int] = {}
            at = self.state.node_at
            codes = np.fromiter(
                (
                    0
                    if nd is None or key not in nd.labels
                    else values.setdefault(nd.labels[key], len(values) + 1)
                    for nd in at
                ),
                dtype=np.int64,
                count=len(at),
            )
            self._labels[key] = codes
        return codes

    def static(self, spec: PodSpec) -> Mask:
        """Ready nodes whose labels, affinity, taints and cordon admit the spec, computed once per
        distinct (readiness, cordon, taints) of the nodes and values of the labels the spec reads."""
        mask = self._static.get(spec)
        if mask is not None:
            return mask
        sig, sample = self._kinds
        keys = sorted({k for k, _ in spec.node_selector} | {r.key for t in spec.required_affinity for r in t})
        if not keys:
            ok = np.array([static_fit(spec, node) is None for node in sample] + [False])
            mask = ok[sig] & self.ready
        else:
            slots = np.flatnonzero(self.ready)
            rows = np.stack([sig[slots]] + [self.label_codes(k)[slots] for k in keys], axis=1)
            kinds, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
            fits = np.empty(len(kinds), dtype=np.bool_)
            for i, j in enumerate(first):
                node = self.state.node_at[int(slots[j])]
                assert node is not None
                fits[i] = static_fit(spec, node) is None
            mask = np.zeros(len(self.state.alive), dtype=np.bool_)
            mask[slots] = fits[inverse.reshape(-1)]
        others = self.others(spec)
        if others is not None:
            mask = mask & others
        mask.setflags(write=False)
        self._static[spec] = mask
        return mask

    # --- the rules that look at other pods (model.scheduling) -------------------------------------
    def _matters(self, spec: PodSpec) -> Pod | None:
        """A pod of the spec when other pods can restrict where pods of the spec go, else None."""
        if not spec.places_by_pods and not self.state.anti_affine:
            return None
        return self.state.pod_of_spec.get(id(spec))

    def others(self, spec: PodSpec) -> Mask | None:
        """Nodes where a pod of the spec passes the filters that look at other pods (inter-pod
        affinity, spreading, host ports) with every other pod where it is now (one of the spec's
        pods, taken as the one that moves, not counted); None: no restriction. An approximation for
        the other pods of the spec: the searches check each move exactly (planner/destinations.py)
        and every plan step by step (planner/constraints.py)."""
        if spec in self._others:
            return self._others[spec]
        pod = self._matters(spec)
        mask = None if pod is None else pod_mask(Placement(self.state), pod)
        self._others[spec] = mask
        return mask

    def fresh_takes(self, spec: PodSpec, group: str) -> bool:
        """Whether a new, empty node of the group passes those filters for a pod of the spec."""
        key = (spec, group)
        hit = self._fresh.get(key)
        if hit is None:
            pod = self._matters(spec)
            hit = True
            if pod is not None:
                name = f"new node of {group}"
                number = self.group_size[group]  # the next node's number: its zone, round-robin
                labels = {**self.state.groups[group].node_labels(number), HOSTNAME_LABEL: name}
                where = Placement(self.state, virtual={name: (labels, self.state.groups[group].taints)})
                mask = pod_mask(where, pod)
                hit = mask is None or bool(mask[-1])
            self._fresh[key] = hit
        return hit

    def upcoming_fit(self, spec: PodSpec) -> Mask:
        """Nodes being provisioned, not cordoned, whose labels and taints admit the spec. A node still
        coming up carries the taints of its conditions (a kubelet registers tainted not-ready); they go
        when it is Ready, so, as the autoscaler does for its templates, they do not count."""
        mask = self._upcoming.get(spec)
        if mask is None:
            mask = np.zeros(len(self.state.alive), dtype=np.bool_)
            for slot in np.flatnonzero(self.upcoming):
                node = self.state.node_at[int(slot)]
                assert node is not None
                taints = tuple(t for t in node.taints if t.key not in NODE_CONDITION_TAINTS)
                mask[slot] = not node.unschedulable and label_fit(spec, node.labels, taints) is None
            others = self.others(spec)
            if others is not None:
                mask &= others
            mask.setflags(write=False)
            self._upcoming[spec] = mask
        return mask

    def fits(self, spec: PodSpec, room: Vector) -> Mask:
        """Ready nodes that admit the spec and have ``room`` for it."""
        mask: Mask = self.static(spec) & np.all(room >= self.state.requests_of(spec), axis=1)
        return mask

    # --- new nodes -------------------------------------------------------------------------------
    def template(self, group: str) -> Vector:
        """The allocatable of a new node of the group (read-only)."""
        vec = self._template.get(group)
        if vec is None:
            state = self.state
            cap = dict(state.groups[group].capacity)
            cap.setdefault(PODS, DEFAULT_MAX_PODS * 1000)
            vec = state.index.vector({k: v for k, v in cap.items() if k in state.index.names})
            vec.setflags(write=False)
            self._template[group] = vec
        return vec

    def admits(self, spec: PodSpec, group: str) -> bool:
        """Could a new node of the group take a pod of this spec (labels, taints and size)?"""
        key = (spec, group)
        ok = self._admits.get(key)
        if ok is None:
            ok = self._group_fit(spec, group) and self.fresh_takes(spec, group)
            self._admits[key] = ok
        return ok

    def _group_fit(self, spec: PodSpec, group: str) -> bool:
        state = self.state
        key = (id(spec), group, len(state.index.names))  # a resource seen later widens the vectors
        hit = state.group_fit.get(key)
        if hit is not None:
            return hit[1]
        g = state.groups[group]
        if state.autoscaler is AutoscalerKind.KARPENTER:  # a pool: any of its types
            ok = all(r in state.index.names for r in spec.requests) and pool_takes(g, spec)
        else:
            ok = (
                all(r in state.index.names for r in spec.requests)
                and label_fit(spec, g.node_labels(), g.taints) is None
                and bool((self.template(group) >= state.requests_of(spec)).all())
            )
        state.group_fit[key] = (spec, ok)  # the spec held: its id is not reused while the entry lives
        return ok

    def groups_for(self, spec: PodSpec) -> list[str]:
        """Groups, in order of preference, whose new nodes would take the spec."""
        return [g for g in self.state.groups if self.admits(spec, g)]
