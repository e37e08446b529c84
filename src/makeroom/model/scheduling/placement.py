"""Where the pods are, as the filters that look at other pods see it: the state's placement, or the
state's with some pods moved (the steps of a plan), without changing the state. Nodes a plan adds
(not in the state yet) are virtual nodes: their labels and taints, in slots after the state's.

Pods are found through the state's label index, so a selector costs the pods it may match rather than
every pod of the cluster. Per-node facts (a label's value per node slot) are cached on the state until
its nodes change.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import numpy as np
import numpy.typing as npt

from makeroom.model.objects import LabelSelector, Pod, PodSpec, Taint
from makeroom.model.state import ClusterState, Mask

Codes = npt.NDArray[np.int64]
VirtualNode = tuple[Mapping[str, str], tuple[Taint, ...]]  # labels, taints


class Placement:
    def __init__(
        self,
        state: ClusterState,
        moved: Mapping[str, str | None] | None = None,
        virtual: Mapping[str, VirtualNode] | None = None,
    ) -> None:
        self.state = state
        # pod key -> the node it is on in this hypothesis (None: gone); pods not named stay put.
        self.moved: dict[str, str | None] = dict(moved or {})
        self.virtual: dict[str, VirtualNode] = dict(virtual or {})
        self._virtual_slot = {name: len(state.alive) + i for i, name in enumerate(self.virtual)}
        self.size = len(state.alive) + len(self.virtual)
        self._domains: dict[str, Codes] = {}

    def move(self, pod: Pod, node: str | None) -> None:
        self.moved[pod.key] = node

    def without(self, pod: Pod) -> Placement:
        """This placement with the pod taken off its node (a pod being placed is not counted)."""
        if self.node_of(pod) is None:
            return self
        return Placement(self.state, {**self.moved, pod.key: None}, self.virtual)

    def node_of(self, pod: Pod) -> str | None:
        node = self.moved.get(pod.key, pod.node)
        if node is None or (node not in self.state.slot_of and node not in self.virtual):
            return None
        return node

    def _extra(self) -> Iterator[Pod]:
        """Pods not bound in the state that this placement puts on a node."""
        for key, node in self.moved.items():
            if node is None:
                continue
            pod = self.state.pods.get(key)
            if pod is not None and pod.node is None:
                yield pod

    def matching(self, selector: LabelSelector) -> Iterator[tuple[Pod, str]]:
        """Placed pods whose labels the selector matches, with their node."""
        for pod in _candidates(self.state, selector):
            if selector.matches(pod.labels):
                node = self.node_of(pod)
                if node is not None:
                    yield pod, node
        for pod in self._extra():
            if selector.matches(pod.labels):
                node = self.node_of(pod)
                if node is not None:
                    yield pod, node

    def anti_affine(self, labels: Mapping[str, str]) -> Iterator[tuple[PodSpec, Iterable[Pod]]]:
        """Pods with required anti-affinity whose terms may match a pod of these labels, grouped by
        their spec (``node_of`` says where each is). Specs are found by the labels their terms'
        matchLabels require, so a pod costs the specs that may concern it, not all of them."""
        extra: dict[int, tuple[PodSpec, list[Pod]]] = {}
        for pod in self._extra():
            if pod.spec.pod_anti_affinity:
                extra.setdefault(id(pod.spec), (pod.spec, []))[1].append(pod)
        index = _anti_index(self.state)
        keys = set(index.get(None, ()))
        for pair in labels.items():
            keys.update(index.get(pair, ()))
        for key in keys:
            spec, pods = self.state.anti_affine[key]
            more = extra.pop(key, None)
            yield spec, pods.values() if more is None else [*pods.values(), *more[1]]
        yield from extra.values()

    def with_ports(self) -> Iterator[tuple[Pod, str]]:
        for pod in [*self.state.with_ports.values(), *self._extra()]:
            node = self.node_of(pod)
            if pod.spec.host_ports and node is not None:
                yield pod, node

    def any_anti_affine(self) -> bool:
        return bool(self.state.anti_affine) or any(p.spec.pod_anti_affinity for p in self._extra())

    # --- per-node facts --------------------------------------------------------------------------
    def domains(self, key: str) -> Codes:
        """Per node slot, a code for the node's value of the label (-1: no such label, or no node)."""
        if not self.virtual:
            return domains(self.state, key)[0]
        hit = self._domains.get(key)
        if hit is None:
            codes, values = domains(self.state, key)
            values = dict(values)
            extra = [
                -1 if key not in labels else values.setdefault(labels[key], len(values))
                for labels, _ in self.virtual.values()
            ]
            hit = self._domains[key] = np.concatenate([codes, np.array(extra, dtype=np.int64)])
        return hit

    def alive(self) -> Mask:
        if not self.virtual:
            return self.state.alive
        return np.concatenate([self.state.alive, np.ones(len(self.virtual), dtype=np.bool_)])

    def slot(self, node: str) -> int:
        virtual = self._virtual_slot.get(node)
        return self.state.slot_of[node] if virtual is None else virtual


def _anti_index(state: ClusterState) -> dict[tuple[str, str] | None, list[int]]:
    """The specs of ``state.anti_affine`` by a label pair each term's matchLabels requires (None:
    a term that requires none), rebuilt when the state changed."""
    hit = state.domain_cache.get("anti-index")
    if hit is not None and hit[0] == state.generation:  # type: ignore[index]
        return hit[1]  # type: ignore[index,no-any-return]
    index: dict[tuple[str, str] | None, list[int]] = {}
    for key, (spec, _) in state.anti_affine.items():
        for term in spec.pod_anti_affinity:
            selector = term.label_selector
            if selector is None:
                continue
            first = selector.match_labels[0] if selector.match_labels else None
            index.setdefault(first, []).append(key)
    state.domain_cache["anti-index"] = (state.generation, index)
    return index


def domains(state: ClusterState, key: str) -> tuple[Codes, dict[str, int]]:
    """Per node slot of the state, a code for the node's value of the label (-1: none), and the codes
    of the values; cached until the nodes change."""
    cache_key = ("domain", key)
    hit = state.domain_cache.get(cache_key)
    if hit is not None:
        return hit  # type: ignore[return-value]
    values: dict[str, int] = {}
    at = state.node_at
    codes = np.fromiter(
        (
            -1 if nd is None or key not in nd.labels else values.setdefault(nd.labels[key], len(values))
            for nd in at
        ),
        dtype=np.int64,
        count=len(at),
    )
    codes.setflags(write=False)
    state.domain_cache[cache_key] = (codes, values)
    return codes, values


def _candidates(state: ClusterState, selector: LabelSelector) -> Iterable[Pod]:
    """Bound pods that may match the selector: those of its narrowest label, or all when it names none
    that narrows (only NotIn / DoesNotExist, or the empty selector)."""
    best: list[dict[str, Pod]] | None = None
    size = -1
    for key, value in selector.match_labels:
        found = state.by_label.get(key, {}).get(value, {})
        if best is None or len(found) < size:
            best, size = [found], len(found)
    for req in selector.match_expressions:
        if req.operator == "In":
            by_value = state.by_label.get(req.key, {})
            found_all = [by_value[v] for v in req.values if v in by_value]
        elif req.operator == "Exists":
            found_all = list(state.by_label.get(req.key, {}).values())
        else:
            continue
        n = sum(len(f) for f in found_all)
        if best is None or n < size:
            best, size = found_all, n
    if best is None:
        return (p for held in state.pods_on.values() for p in held.values())
    return (p for found in best for p in found.values())
