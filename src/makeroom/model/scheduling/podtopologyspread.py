"""PodTopologySpread, as kube-scheduler's plugin of that name decides it.

For each DoNotSchedule constraint of the pod: the domains are the values of its topology key on the
eligible nodes (nodes carrying every constraint's key; under nodeAffinityPolicy Honor, the default,
only nodes matching the pod's nodeSelector and required node affinity; under nodeTaintsPolicy Honor,
not the default, only nodes whose taints the pod tolerates). A domain counts the pods of the pod's own
namespace that match the constraint's selector (narrowed by matchLabelKeys with the pod's labels) and are
not terminating. A node passes when it has the key and its domain's count, plus one if the pod matches
the selector itself, minus the least count over the domains is at most maxSkew; the least count is 0
while there are fewer domains than minDomains.
"""

from __future__ import annotations

import numpy as np

from makeroom.model.fit import FitFailure, node_affinity_matches, untolerated_taint
from makeroom.model.objects import (
    InclusionPolicy,
    LabelSelector,
    Pod,
    PodSpec,
    TopologySpreadConstraint,
    UnsatisfiableAction,
)
from makeroom.model.scheduling.placement import Codes, Placement
from makeroom.model.state import Mask


def selector_of(c: TopologySpreadConstraint, pod: Pod) -> LabelSelector | None:
    if c.label_selector is None:
        # kube-scheduler merges matchLabelKeys into the nil selector's (absent) requirements: what is
        # left is the merged labels alone.
        own = tuple((k, pod.labels[k]) for k in c.match_label_keys if k in pod.labels)
        return LabelSelector(own) if own else None
    return c.label_selector.narrowed(pod.labels, c.match_label_keys)


def _by_node(placement: Placement, spec: PodSpec, what: str) -> Mask:
    """Per slot, whether the node matches the spec's node affinity ("affinity") or its taints are all
    tolerated ("taints"); cached per spec until the nodes change."""
    state = placement.state
    key = (what, id(spec))
    hit = state.domain_cache.get(key)
    if hit is not None:
        mask: Mask = hit[1]  # type: ignore[index]
    else:
        at = state.node_at
        if what == "affinity":
            flags = (nd is not None and node_affinity_matches(spec, nd.labels) for nd in at)
        else:
            flags = (nd is not None and untolerated_taint(spec, nd.taints) is None for nd in at)
        mask = np.fromiter(flags, dtype=np.bool_, count=len(at))
        state.domain_cache[key] = (spec, mask)
    if not placement.virtual:
        return mask
    extra = [
        node_affinity_matches(spec, labels) if what == "affinity" else untolerated_taint(spec, taints) is None
        for labels, taints in placement.virtual.values()
    ]
    return np.concatenate([mask, np.array(extra, dtype=np.bool_)])


def counts(
    placement: Placement, pod: Pod, c: TopologySpreadConstraint, keys: tuple[str, ...]
) -> tuple[Codes, Mask, int]:
    """Per domain code, the matching pods; per slot, whether the node is eligible; the number of codes."""
    eligible = placement.alive().copy()
    for k in keys:
        eligible &= placement.domains(k) >= 0
    if c.node_affinity_policy is InclusionPolicy.HONOR:
        eligible &= _by_node(placement, pod.spec, "affinity")
    if c.node_taints_policy is InclusionPolicy.HONOR:
        eligible &= _by_node(placement, pod.spec, "taints")
    codes = placement.domains(c.topology_key)
    width = int(codes.max()) + 1 if len(codes) else 0
    per = np.zeros(width, dtype=np.int64)
    selector = selector_of(c, pod)
    if selector is not None:
        for other, node in placement.matching(selector):
            if other.namespace != pod.namespace or other.terminating:
                continue
            slot = placement.slot(node)
            if eligible[slot]:
                per[codes[slot]] += 1
    return per, eligible, width


def spread_failures(placement: Placement, pod: Pod) -> list[tuple[FitFailure, Mask]]:
    hard = [
        c for c in pod.spec.topology_spread if c.when_unsatisfiable is UnsatisfiableAction.DO_NOT_SCHEDULE
    ]
    if not hard:
        return []
    keys = tuple(dict.fromkeys(c.topology_key for c in hard))
    size = placement.size
    missing = np.zeros(size, dtype=np.bool_)
    skewed = np.zeros(size, dtype=np.bool_)
    for c in hard:
        codes = placement.domains(c.topology_key)
        missing |= codes < 0
        per, eligible, width = counts(placement, pod, c, keys)
        present = np.zeros(width, dtype=np.bool_)
        present[codes[eligible]] = True
        domains = int(present.sum())
        if domains == 0:
            continue  # nothing to be skewed against: kube-scheduler's minimum is then unbounded
        least = int(per[present].min())
        if c.min_domains is not None and domains < c.min_domains:
            least = 0
        selector = selector_of(c, pod)
        own = 1 if selector is not None and selector.matches(pod.labels) else 0
        at = np.where(codes >= 0, per[np.maximum(codes, 0)] if width else 0, 0)
        skewed |= (codes >= 0) & (at + own - least > c.max_skew)
    return [(FitFailure.SPREAD_LABEL, missing), (FitFailure.SPREAD, skewed & ~missing)]
