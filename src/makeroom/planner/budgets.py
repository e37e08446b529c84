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

from makeroom.model import OwnerKind, Pod
from makeroom.model.state import ClusterState


class Budgets:
    """What each budgeted workload's PodDisruptionBudget allows now, by workload name.

    Counted when first asked, for all budgeted workloads in one pass over the pods (a plan that looks
    at no pod of a budgeted workload never pays for it)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._allowed: dict[str, int] | None = None

    @staticmethod
    def of(state: ClusterState) -> Budgets:
        return Budgets(state)

    @property
    def allowed(self) -> dict[str, int]:
        if self._allowed is None:
            state = self.state
            budgeted = {name for name, w in state.workloads.items() if w.pdb is not None}
            healthy = dict.fromkeys(budgeted, 0)
            if budgeted:
                for pod in state.pods.values():
                    if (
                        pod.workload in budgeted
                        and pod.ready
                        and not pod.terminating
                        and pod.node is not None
                    ):
                        healthy[pod.workload] += 1
            allowed = {}
            for name in budgeted:
                w = state.workloads[name]
                assert w.pdb is not None
                # Under several budgets, no eviction is ever allowed (the API server answers 500).
                several = bool(w.more_pdbs)
                allowed[name] = 0 if several else w.pdb.disruptions_allowed(healthy[name], w.replicas)
            self._allowed = allowed
        return self._allowed

    def budgeted(self, workload: str | None) -> bool:
        w = self.state.workloads.get(workload) if workload is not None else None
        return w is not None and w.pdb is not None

    def blocks(self, pod: Pod, make_before_break: bool = False) -> bool:
        """Whether the pod's budget lets none of its pods go now. With make-before-break, a pod of a
        Deployment makeroom may scale is replaced before it goes (its workload never has fewer
        healthy pods than before), and a scale-down is no eviction: its budget does not hold it."""
        if not self.budgeted(pod.workload) or self.allowed[pod.workload or ""] >= 1:
            return False
        if make_before_break and pod.owner_kind is OwnerKind.REPLICA_SET:
            w = self.state.workloads[pod.workload or ""]
            return not (w.owner_kind is OwnerKind.REPLICA_SET and w.replicas_owner is None)
        return True

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
