"""InterPodAffinity's filter, as kube-scheduler's plugin of that name decides it.

- Required affinity: every term's topology key must be on the node, and in the node's domain of each
  term there must be a pod that matches all the terms. Exception (the first pod of a group that is
  affine to itself): when no pod anywhere matches all the terms and the pod matches them itself, any
  node with the keys will do.
- Required anti-affinity: no pod matching a term in the node's domain of that term.
- Existing pods' required anti-affinity: no pod whose term matches the incoming pod in the node's
  domain of that term's key.

A term looks in its own pod's namespace unless it names namespaces or a namespaceSelector (matched on
the namespace's labels); matchLabelKeys / mismatchLabelKeys narrow the selector with the labels of the
pod carrying the term (what the API server merges in at creation).
"""

from __future__ import annotations

import numpy as np

from makeroom.model.fit import FitFailure
from makeroom.model.objects import LabelSelector, Pod, PodAffinityTerm
from makeroom.model.scheduling.placement import Placement
from makeroom.model.state import ClusterState, Mask


def selector_of(term: PodAffinityTerm, owner: Pod) -> LabelSelector | None:
    if term.label_selector is None:
        return None
    return term.label_selector.narrowed(owner.labels, term.match_label_keys, term.mismatch_label_keys)


def in_namespaces(state: ClusterState, term: PodAffinityTerm, owner_namespace: str, namespace: str) -> bool:
    if not term.namespaces and term.namespace_selector is None:
        return namespace == owner_namespace
    if namespace in term.namespaces:
        return True
    return term.namespace_selector is not None and term.namespace_selector.matches(
        state.namespace_labels(namespace)
    )


def term_matches(state: ClusterState, term: PodAffinityTerm, owner: Pod, pod: Pod) -> bool:
    """Whether the term, carried by ``owner``, matches ``pod``."""
    selector = selector_of(term, owner)
    return (
        selector is not None
        and in_namespaces(state, term, owner.namespace, pod.namespace)
        and selector.matches(pod.labels)
    )


def _matches_all(state: ClusterState, terms: tuple[PodAffinityTerm, ...], owner: Pod, pod: Pod) -> bool:
    return all(term_matches(state, t, owner, pod) for t in terms)


def _term_pods(placement: Placement, term: PodAffinityTerm, owner: Pod) -> list[tuple[Pod, str]]:
    selector = selector_of(term, owner)
    if selector is None:
        return []
    state = placement.state
    return [
        (p, n)
        for p, n in placement.matching(selector)
        if in_namespaces(state, term, owner.namespace, p.namespace)
    ]


def _in_domains(placement: Placement, key: str, nodes: list[str]) -> Mask:
    """Slots whose node shares the value of label ``key`` with one of the nodes."""
    codes = placement.domains(key)
    taken = {int(codes[placement.slot(n)]) for n in nodes} - {-1}
    if not taken:
        return np.zeros(len(codes), dtype=np.bool_)
    return np.isin(codes, np.fromiter(taken, dtype=np.int64))


def affinity_failures(placement: Placement, pod: Pod) -> list[tuple[FitFailure, Mask]]:
    """Per reason, in kube-scheduler's order, the node slots that fail it."""
    state = placement.state
    size = placement.size
    out: list[tuple[FitFailure, Mask]] = []
    spec = pod.spec
    if spec.pod_affinity:
        terms = spec.pod_affinity
        has_keys = np.ones(size, dtype=np.bool_)
        for t in terms:
            has_keys &= placement.domains(t.topology_key) >= 0
        first = _term_pods(placement, terms[0], pod)
        everyone = [(p, n) for p, n in first if _matches_all(state, terms[1:], pod, p)]
        ok = has_keys.copy()
        counted = False
        for t in terms:
            codes = placement.domains(t.topology_key)
            nodes = [n for _, n in everyone if codes[placement.slot(n)] >= 0]
            counted = counted or bool(nodes)
            ok &= _in_domains(placement, t.topology_key, nodes)
        if not counted and _matches_all(state, terms, pod, pod):
            ok = has_keys
        out.append((FitFailure.POD_AFFINITY, ~ok))
    if spec.pod_anti_affinity:
        bad = np.zeros(size, dtype=np.bool_)
        for t in spec.pod_anti_affinity:
            bad |= _in_domains(placement, t.topology_key, [n for _, n in _term_pods(placement, t, pod)])
        out.append((FitFailure.POD_ANTI_AFFINITY, bad))
    if placement.any_anti_affine():
        bad = np.zeros(size, dtype=np.bool_)
        for other_spec, owners in placement.anti_affine(pod.labels):
            for t in other_spec.pod_anti_affinity:
                if t.label_selector is None or not t.label_selector.matches(pod.labels):
                    continue  # the narrowed selector matches less still: no owner can match
                nodes = [
                    n
                    for owner in owners
                    if (n := placement.node_of(owner)) is not None and term_matches(state, t, owner, pod)
                ]
                bad |= _in_domains(placement, t.topology_key, nodes)
        if bad.any():
            out.append((FitFailure.EXISTING_ANTI_AFFINITY, bad))
    return out
