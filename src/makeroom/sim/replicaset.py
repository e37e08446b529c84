"""The ReplicaSet controller's choice of which pods to delete on scale-down.

Mirrors controller.ActivePodsWithRanks: unscheduled before scheduled, pending before running, not
ready before ready, lower pod-deletion-cost first, more replicas doubled up on the same node first,
ready for less time first, newer first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from makeroom.model import Pod


def deletion_order(pods: Sequence[Pod]) -> list[Pod]:
    per_node = Counter(p.node for p in pods if p.node is not None)

    def rank(p: Pod) -> tuple[int, int, int, int, int, float, float, int]:
        return (
            p.node is not None,
            p.node is not None and p.ready,
            p.ready,
            p.deletion_cost(),
            -per_node[p.node] if p.node is not None else 0,
            -(p.ready_since or 0.0) if p.ready else 0.0,
            -p.created_at,
            -p.seq,
        )

    return sorted(pods, key=rank)
