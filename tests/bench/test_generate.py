"""The churn cluster of ``makeroom bench sim``: a valid scenario with the pods asked for, at every size
the command accepts (``--nodes 10 --pods 10`` once asked for -1 replicas per workload)."""

from __future__ import annotations

import pytest

from makeroom.bench.generate import churn_scenario


@pytest.mark.parametrize(("nodes", "pods"), [(10, 10), (10, 11), (10, 1_000), (1_000, 30_000), (37, 5_003)])
def test_the_cluster_holds_the_pods_asked_for(nodes: int, pods: int) -> None:
    scenario = churn_scenario(nodes=nodes, pods=pods, hours=1)  # parse_scenario refuses a bad one
    workloads = scenario.spec.workloads
    assert sum(w.replicas for w in workloads) == pods
    assert all(w.replicas >= 0 for w in workloads)
    assert sum(g.initial for g in scenario.spec.node_groups) == nodes
