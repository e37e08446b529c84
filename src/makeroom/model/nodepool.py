"""What a Karpenter NodePool says besides what any node group says: instance types with prices, and
its disruption settings; and which autoscaler a cluster runs.

A NodePool is a node group whose nodes need not be alike: it lists instance types (each with its own
allocatable and price), orders itself among the other pools by ``weight``, caps itself by ``limits``
(per resource, and ``nodes``), and says when its nodes may be consolidated (``spec.disruption``). The
fields that every group has (labels, taints, requirements, weight, limits) are on ``NodeGroup``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from makeroom.model.resources import Resources

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
NODES = "nodes"  # the node count as a NodePool limit (spec.limits.nodes)
DISRUPTED_TAINT = "karpenter.sh/disrupted"  # NoSchedule, on a node Karpenter is taking away
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"  # on a pod or a node: Karpenter never disrupts it


class AutoscalerKind(StrEnum):
    """Which autoscaler the cluster runs."""

    CLUSTER_AUTOSCALER = "cluster-autoscaler"
    """Node groups of identical nodes between a min and a max (kubernetes/autoscaler)."""
    KARPENTER = "karpenter"
    """NodePools: weighted, limited by resources, of several instance types (kubernetes-sigs/karpenter)."""


class ConsolidationPolicy(StrEnum):
    """A NodePool's ``spec.disruption.consolidationPolicy``."""

    WHEN_EMPTY = "WhenEmpty"
    """Only nodes without pods (DaemonSet pods aside) are consolidated."""
    WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"
    """Also nodes whose pods fit elsewhere, or on one cheaper replacement node."""


@dataclass(frozen=True, slots=True)
class NodeBudget:
    """One entry of ``spec.disruption.budgets``: at most ``nodes`` (a count, or a percentage of the
    pool's nodes rounded up) disrupted at once, for the listed reasons (empty: every reason)."""

    nodes: int | str = "10%"
    reasons: tuple[str, ...] = ()

    def allowed(self, total: int) -> int:
        if isinstance(self.nodes, str):
            percent = int(self.nodes.rstrip("%"))
            return -(-percent * total // 100)
        return self.nodes


REASON_EMPTY = "Empty"
REASON_UNDERUTILIZED = "Underutilized"


@dataclass(frozen=True, slots=True)
class Disruption:
    """A NodePool's ``spec.disruption``; Karpenter's defaults."""

    policy: ConsolidationPolicy = ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
    consolidate_after: float | None = 0.0  # seconds; None: Never (consolidation off)
    budgets: tuple[NodeBudget, ...] = (NodeBudget(),)

    def allowed(self, total: int, reason: str) -> int:
        """Nodes of a pool of ``total`` that may be disrupted at once for ``reason``."""
        found = [b.allowed(total) for b in self.budgets if not b.reasons or reason in b.reasons]
        return min(found) if found else 1 << 30


@dataclass(frozen=True, slots=True)
class InstanceType:
    """One kind of node a pool may launch: its allocatable, its price, and the labels it carries."""

    name: str
    capacity: Resources
    price_per_hour: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)
