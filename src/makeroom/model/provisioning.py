"""Karpenter's choice of a node for a pod: the first NodePool, by weight, that admits the pod and has
an instance type big enough for it within the pool's remaining limits; the cheapest type that fits.

This follows Karpenter v1.14's ``provisioning/scheduling``: pools are tried in ``OrderByWeight`` order
(weight, highest first; equal weights by name, descending); a pool is skipped when its ``nodes`` limit
is used up, and its types are filtered by what its resource limits leave; a type fits when the pod's
requests fit its allocatable and its labels, the pool's requirements and taints admit the pod. Of the
types that fit, the cloud launches the cheapest.

Pure, and shared by the simulator's Karpenter and the planner (what the autoscaler would buy), so that
the two never disagree about Karpenter's choice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from makeroom.model.fit import label_fit
from makeroom.model.nodepool import INSTANCE_TYPE_LABEL, NODEPOOL_LABEL, NODES, InstanceType
from makeroom.model.objects import GROUP_LABEL, NodeGroup, NodeSelectorRequirement, PodSpec
from makeroom.model.resources import Resources


def pool_order(groups: Iterable[NodeGroup]) -> list[NodeGroup]:
    """Karpenter's order of NodePools: weight, highest first (no weight counts as 0); equal weights
    by name, descending."""
    by_name = sorted(groups, key=lambda g: g.name, reverse=True)
    return sorted(by_name, key=lambda g: -(g.weight or 0))


def launchable(group: NodeGroup) -> tuple[InstanceType, ...]:
    """The pool's instance types that its requirements allow (the requirements on a label the type
    carries filter it; others become node labels)."""
    out = []
    for it in group.types():
        labels = type_labels(it)
        if all(req.matches(labels) for req in group.requirements if req.key in labels):
            out.append(it)
    return tuple(out)


def type_labels(it: InstanceType) -> dict[str, str]:
    return {**it.labels, INSTANCE_TYPE_LABEL: it.name}


def requirement_labels(requirements: Sequence[NodeSelectorRequirement]) -> dict[str, str]:
    """Requirements with one ``In`` value become labels of every node the pool launches."""
    return {r.key: r.values[0] for r in requirements if r.operator == "In" and len(r.values) == 1}


def node_labels(group: NodeGroup, it: InstanceType | None) -> dict[str, str]:
    """The labels of a node Karpenter launches in the pool (of instance type ``it``)."""
    labels = {**requirement_labels(group.requirements), **group.labels}
    if it is not None:
        labels.update(type_labels(it))
    labels[NODEPOOL_LABEL] = group.name
    labels[GROUP_LABEL] = group.name
    return labels


def admits(group: NodeGroup, spec: PodSpec, it: InstanceType) -> bool:
    """The pod may run on a node of this type in this pool: labels, requirements, taints."""
    return label_fit(spec, node_labels(group, it), group.taints) is None


def within(capacity: Resources, remaining: Resources, limited: Iterable[str]) -> bool:
    """A node of this capacity stays within what the pool's limits leave (``limited`` names the
    resources the pool limits)."""
    return all(capacity[name] <= remaining[name] for name in limited if name != NODES)


@dataclass(frozen=True, slots=True)
class Headroom:
    """What a pool's limits leave: per limited resource, and nodes (None: not limited)."""

    resources: Resources
    limited: frozenset[str]
    nodes: int | None

    def admits(self, it: InstanceType) -> bool:
        if self.nodes is not None and self.nodes <= 0:
            return False
        return within(it.capacity, self.resources, self.limited)

    def after(self, options: Sequence[InstanceType]) -> Headroom:
        """Less the largest of the options, per resource (Karpenter's pessimistic ``subtractMax``)."""
        largest: dict[str, int] = {}
        for it in options:
            for name in self.limited:
                largest[name] = max(largest.get(name, 0), it.capacity[name])
        return Headroom(
            self.resources - Resources(largest),
            self.limited,
            None if self.nodes is None else self.nodes - 1,
        )


def headroom(group: NodeGroup, used: Resources, nodes: int) -> Headroom:
    """The pool's limits less what its ``nodes`` existing nodes (of total allocatable ``used``) take."""
    limited = frozenset(n for n in group.limits if n != NODES)
    return Headroom(group.limits - used, limited, group.max - nodes)


def fitting(group: NodeGroup, spec: PodSpec, requests: Resources, room: Headroom) -> tuple[InstanceType, ...]:
    """The pool's instance types that admit the pod, hold ``requests`` and stay within ``room``."""
    return tuple(
        it
        for it in launchable(group)
        if room.admits(it) and requests.fits_in(it.capacity) and admits(group, spec, it)
    )


def pool_takes(group: NodeGroup, spec: PodSpec) -> bool:
    """A new node of the pool, of some type it may launch, could take a pod of this spec."""
    requests = PodSpec.effective(spec.requests)
    return any(admits(group, spec, it) and requests.fits_in(it.capacity) for it in launchable(group))


def cheapest(options: Sequence[InstanceType]) -> InstanceType:
    """The type the cloud launches among a NodeClaim's options: the cheapest (ties: as listed)."""
    return min(options, key=lambda it: it.price_per_hour)


@dataclass(frozen=True, slots=True)
class Choice:
    """Karpenter's answer for one pod: the pool and the type a new node would have."""

    group: NodeGroup
    instance_type: InstanceType


def choose(
    groups: Iterable[NodeGroup],
    spec: PodSpec,
    requests: Resources,
    room: Mapping[str, Headroom],
) -> Choice | None:
    """The first pool, in Karpenter's order, that can launch a node for one pod within its
    ``room``, and the cheapest of its types that fit; None when no pool can."""
    for group in pool_order(groups):
        options = fitting(group, spec, requests, room[group.name])
        if options:
            return Choice(group, cheapest(options))
    return None
