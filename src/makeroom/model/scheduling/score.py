"""PodTopologySpread's score (ScheduleAnyway), as kube-scheduler's default profile gives it.

A pod with spread constraints of its own is scored by its ScheduleAnyway ones (nodes lacking one of
their keys score 0); a pod of a controller without any, by the system defaults: at most a skew of 3 per
hostname and 5 per zone over the pods of its workload, each counted only on nodes with the key. Per
node: for each constraint, the matching pods in the node's domain times log(domains + 2), plus maxSkew
- 1; then normalised to 0-100 over the feasible nodes, fewer pods scoring higher.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from makeroom.model.objects import HOSTNAME_LABEL, ZONE_LABEL, Pod, UnsatisfiableAction
from makeroom.model.scheduling.placement import Placement
from makeroom.model.scheduling.podtopologyspread import selector_of
from makeroom.model.state import Mask

Scores = npt.NDArray[np.int64]
SYSTEM_DEFAULTS = ((HOSTNAME_LABEL, 3), (ZONE_LABEL, 5))


def spread_score(placement: Placement, pod: Pod, mask: Mask, workload_counts: Scores | None) -> Scores:
    """Per slot, 0-100. ``workload_counts``: per slot, the running pods of the pod's workload (the
    system defaults' selector); None for a pod without a controller."""
    size = len(mask)
    own = pod.spec.topology_spread
    terms: list[tuple[str, int, Scores]] = []
    require_all = bool(own)
    if own:
        for c in own:
            if c.when_unsatisfiable is not UnsatisfiableAction.SCHEDULE_ANYWAY:
                continue
            counts = np.zeros(size, dtype=np.int64)
            selector = selector_of(c, pod)
            if selector is not None:
                for other, node in placement.matching(selector):
                    if other.namespace == pod.namespace and not other.terminating:
                        counts[placement.slot(node)] += 1
            terms.append((c.topology_key, c.max_skew, counts))
    elif workload_counts is not None:
        terms = [(key, skew, workload_counts) for key, skew in SYSTEM_DEFAULTS]
    if not terms:
        return np.zeros(size, dtype=np.int64)
    raw = np.zeros(size, dtype=np.float64)
    scored = mask.copy()
    for key, skew, counts in terms:
        codes = placement.domains(key)[:size]
        has = codes >= 0
        if require_all:
            scored &= has
        if not (has & mask).any():
            continue
        width = int(codes.max()) + 1
        per_domain = np.bincount(codes[has], weights=counts[has], minlength=width)
        domains = len(np.unique(codes[mask & has]))
        weight = math.log(domains + 2)
        raw += np.where(has, per_domain[np.maximum(codes, 0)] * weight + (skew - 1), 0.0)
    rounded = np.round(raw).astype(np.int64)
    if not scored.any():
        return np.zeros(size, dtype=np.int64)
    lo, hi = int(rounded[scored].min()), int(rounded[scored].max())
    if hi == 0:
        return np.where(scored, 100, 0).astype(np.int64)
    return np.where(scored, 100 * (hi + lo - rounded) // hi, 0).astype(np.int64)
