"""PodDisruptionBudgets as the planner counts them.

A budget allows ``healthy - desired_healthy`` disruptions now, where healthy are the workload's Ready
pods that are not being deleted, and the expected count is the workload's replicas. A plan never picks
a victim whose budget allows no disruption now: the eviction would be refused (HTTP 429) and, with
``maxUnavailable: 0`` (or as many healthy replicas required as there are), refused for ever, while the
waiting pod's nomination keeps the autoscaler away. A budget that allows some disruptions but fewer than
the plan's victims of its workload is still usable: the evictions go in turns, each once the previous
victim's replacement is Ready on its destination (which the plan guarantees), so the plan counts the
turns it needs (``turns``) and says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from makeroom.model import OwnerKind, Pod
from makeroom.model.state import ClusterState


@dataclass(frozen=True, slots=True)
class Budgets:
    """What each budgeted workload's PodDisruptionBudget allows now, by workload name, and the
    workloads whose replicas makeroom may raise (Deployments no other controller scales)."""

    allowed: dict[str, int] = field(default_factory=dict)
    scalable: frozenset[str] = frozenset()

    @staticmethod
    def of(state: ClusterState) -> Budgets:
        healthy: dict[str, int] = {}
        budgeted = {name for name, w in state.workloads.items() if w.pdb is not None}
        if budgeted:
            for pod in state.pods.values():
                if pod.workload in budgeted and pod.ready and not pod.terminating and pod.node is not None:
                    healthy[pod.workload] = healthy.get(pod.workload, 0) + 1
        allowed = {}
        for name in budgeted:
            w = state.workloads[name]
            assert w.pdb is not None
            allowed[name] = w.pdb.disruptions_allowed(healthy.get(name, 0), w.replicas)
        scalable = frozenset(
            name
            for name, w in state.workloads.items()
            if w.owner_kind is OwnerKind.REPLICA_SET and w.replicas_owner is None
        )
        return Budgets(allowed, scalable)

    def blocks(self, pod: Pod, make_before_break: bool = False) -> bool:
        """Whether the pod's budget lets none of its pods go now. With make-before-break, a pod of a
        Deployment makeroom may scale is replaced before it goes (its workload never has fewer
        healthy pods than before), and a scale-down is no eviction: its budget does not hold it."""
        if pod.workload is None or self.allowed.get(pod.workload, 1) >= 1:
            return False
        return not (
            make_before_break and pod.owner_kind is OwnerKind.REPLICA_SET and pod.workload in self.scalable
        )

    def turns(self, victims: Iterable[Pod]) -> int:
        """The most rounds of evictions any one budget needs for these victims (1 when every budget
        lets all its victims go at once; 0 with no victims)."""
        counts: dict[str, int] = {}
        some = False
        for v in victims:
            some = True
            if v.workload is not None and v.workload in self.allowed:
                counts[v.workload] = counts.get(v.workload, 0) + 1
        most = 1 if some else 0
        for name, n in counts.items():
            allowed = max(1, self.allowed[name])
            most = max(most, -(-n // allowed))
        return most
