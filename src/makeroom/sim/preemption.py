"""kube-scheduler's DefaultPreemption, on the shared cluster state.

For a pod that fits nowhere: on every node that would take it with all lower-priority pods gone,
remove them all, then reprieve them one by one, most important first and budget-violating ones before
the others, while the pod still fits. Pick the node by fewest budget violations, lowest highest-victim
priority, lowest priority sum, fewest victims, latest start. Nothing here checks whether a victim can
run anywhere else: that is exactly the gap makeroom fills.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from makeroom.model import Pod, PreemptionPolicy
from makeroom.model.scheduling import Placement, pod_mask
from makeroom.model.state import ClusterState


@dataclass(frozen=True, slots=True)
class Preemption:
    node: str
    victims: tuple[Pod, ...]
    pdb_violations: int

    def rank(self) -> tuple[int, int, int, int, float]:
        top = max(v.priority for v in self.victims)
        earliest_start_of_top = min(
            (v.ready_since or v.created_at) for v in self.victims if v.priority == top
        )
        return (
            self.pdb_violations,
            top,
            sum(v.priority for v in self.victims),
            len(self.victims),
            -earliest_start_of_top,
        )


def eligible_to_preempt(state: ClusterState, pod: Pod) -> bool:
    """PodEligibleToPreemptOthers: not for policy Never, nor while victims on the nominated node
    are still terminating."""
    if pod.spec.preemption_policy == PreemptionPolicy.NEVER:
        return False
    if pod.nominated_node is not None and pod.nominated_node in state.pods_on:
        for other in state.pods_on[pod.nominated_node].values():
            if other.terminating and other.priority < pod.priority:
                return False
    return True


def _importance(p: Pod) -> tuple[int, float]:
    return (-p.priority, p.ready_since if p.ready_since is not None else p.created_at)


def find_preemption(
    state: ClusterState,
    pod: Pod,
    disruptions_allowed: Callable[[str | None], int | None],
) -> Preemption | None:
    req = state.requests_of(pod.spec)
    free = state.nominated_load(pod, state.free())
    could_fit = state.static_mask(pod.spec) & np.all(state.alloc >= req, axis=1)
    best: Preemption | None = None
    best_rank: tuple[int, int, int, int, float] | None = None
    others_matter = pod.spec.places_by_pods or bool(state.anti_affine)

    def passes(slot: int, gone: list[Pod]) -> bool:
        """The filters that look at other pods, with ``gone`` removed (only when they can fail)."""
        if not others_matter:
            return True
        mask = pod_mask(Placement(state, {p.key: None for p in gone}), pod)
        return mask is None or bool(mask[slot])

    for slot in np.flatnonzero(could_fit):
        node = state.node_at[int(slot)]
        assert node is not None
        lower = [
            p for p in state.pods_on[node.name].values() if p.priority < pod.priority and not p.terminating
        ]
        if not lower:
            continue
        room = free[slot].copy()
        for p in lower:
            room += state.requests_of(p.spec)
        if not np.all(room >= req) or not passes(int(slot), lower):
            continue
        budget: dict[str | None, int] = {}
        violating: list[Pod] = []
        fine: list[Pod] = []
        for p in sorted(lower, key=_importance):
            if p.workload not in budget:
                allowed = disruptions_allowed(p.workload)
                budget[p.workload] = allowed if allowed is not None else len(lower) + 1
            if budget[p.workload] > 0:
                budget[p.workload] -= 1
                fine.append(p)
            else:
                violating.append(p)
        victims: list[Pod] = []
        violations = 0
        order = [(p, True) for p in violating] + [(p, False) for p in fine]
        for i, (p, violates) in enumerate(order):
            need = state.requests_of(p.spec)
            # reprieved if the pod still fits with it back (the pods not decided yet still gone)
            if np.all(room - need >= req) and passes(int(slot), [*victims, *(q for q, _ in order[i + 1 :])]):
                room -= need
            else:
                victims.append(p)
                violations += violates
        if not victims:  # pragma: no cover - the pod would have fit without preemption
            continue
        choice = Preemption(node.name, tuple(victims), violations)
        rank = choice.rank()
        if best_rank is None or rank < best_rank:
            best, best_rank = choice, rank
    return best
