"""The simulated Karpenter packs pods onto new NodeClaims as Karpenter's scheduler does with the
constraints that look at other pods (issue 19): required anti-affinity, topology spread (a pool's
zones counted as domains even before a node is there), its ScheduleAnyway spread respected until it
cannot be, and the volume's zone."""

from __future__ import annotations

from collections import Counter
from typing import Any

from makeroom.model import ZONE_LABEL
from makeroom.sim import Simulation
from makeroom.sim.karpenter import Karpenter
from tests.builders.scenario import kinds, run, scenario, workload
from tests.sim.test_karpenter import KARPENTER, itype, pool

ON_HOST = {"topology_key": "kubernetes.io/hostname"}


def spread(key: str = ZONE_LABEL, when: str = "DoNotSchedule", skew: int = 1) -> dict[str, Any]:
    return {"max_skew": skew, "topology_key": key, "when_unsatisfiable": when}


def launched(sim: Simulation) -> dict[str, str]:
    """Every node Karpenter launched, by name, with its zone."""
    assert isinstance(sim.autoscaler, Karpenter)
    return {n: sim.world.state.nodes[n].labels.get(ZONE_LABEL, "") for n in sim.autoscaler.launched_at}


def where(sim: Simulation, name: str) -> list[str]:
    return sorted(p.node or "" for p in sim.world.state.pods.values() if p.workload == name)


def test_required_anti_affinity_on_hostname_opens_a_claim_per_replica_in_one_pass() -> None:
    s = scenario(
        [pool("p", itype("big", "16", 0.8, mem="64Gi"))],
        [workload("api", 3, cpu="1", anti_affinity=[ON_HOST])],
        autoscaler=KARPENTER,
    )
    sim, result = run(s)
    ups = kinds(result, "scale_up")
    assert len(ups) == 3 and len({e["t"] for e in ups}) == 1  # three claims in the first batch
    assert len(set(where(sim, "api"))) == 3
    assert result.workloads["api"].ready_at_end == 3


def test_without_constraints_the_same_replicas_share_one_claim() -> None:
    """The control for the test above: the constraint, not the type, decides the claims."""
    s = scenario(
        [pool("p", itype("big", "16", 0.8, mem="64Gi"))],
        [workload("api", 3, cpu="1")],
        autoscaler=KARPENTER,
    )
    sim, result = run(s)
    assert len(kinds(result, "scale_up")) == 1
    assert len(set(where(sim, "api"))) == 1


def test_zone_spread_launches_in_each_of_the_pools_zones() -> None:
    """Karpenter counts the pool's zones as domains before any node is there: a second replica may
    not join the first one's claim in zone a while b and c hold none."""
    s = scenario(
        [pool("p", itype("big", "16", 0.8, mem="64Gi"), zones=["a", "b", "c"])],
        [workload("api", 3, cpu="1", topology_spread=[spread()])],
        autoscaler=KARPENTER,
    )
    sim, result = run(s)
    assert sorted(launched(sim).values()) == ["a", "b", "c"]
    assert result.workloads["api"].ready_at_end == 3
    zones = Counter(launched(sim)[n] for n in where(sim, "api"))
    assert zones == Counter({"a": 1, "b": 1, "c": 1})


def test_the_new_claim_goes_to_the_zone_with_fewest_replicas_not_the_next_round_robin_one() -> None:
    """Replicas run in zones a and c, and b's node is full; the third replica's claim must be in b,
    where the pool's round-robin would put its fourth node in a (the spread then refuses it there)."""
    s = scenario(
        [pool("p", itype("small", "2", 0.1), zones=["a", "b", "c"], initial=3, max=5)],
        [
            workload("api", 2, cpu="1500m", topology_spread=[spread()], placement={"p-0": 1, "p-2": 1}),
            workload("filler", 1, cpu="1500m", placement={"p-1": 1}),
        ],
        events=[{"at": "1m", "scale": {"workload": "api", "replicas": 3}}],
        autoscaler=KARPENTER,
    )
    sim, result = run(s)
    assert list(launched(sim).values()) == ["b"]
    assert result.workloads["api"].ready_at_end == 3


def test_schedule_anyway_spread_is_respected_while_it_can_be_then_relaxed() -> None:
    """Karpenter's Respect policy: ScheduleAnyway counts as DoNotSchedule (one claim per zone) until
    the pod fits nowhere; with the pool's nodes limited to one, the rest still get a place."""
    soft = [spread(when="ScheduleAnyway")]
    s = scenario(
        [pool("p", itype("big", "16", 0.8, mem="64Gi"), zones=["a", "b"])],
        [workload("api", 2, cpu="1", topology_spread=soft)],
        autoscaler=KARPENTER,
    )
    sim, _ = run(s)
    assert sorted(launched(sim).values()) == ["a", "b"]
    limited = scenario(
        [pool("p", itype("big", "16", 0.8, mem="64Gi"), zones=["a", "b"], max=1)],
        [workload("api", 2, cpu="1", topology_spread=soft)],
        autoscaler=KARPENTER,
    )
    sim, result = run(limited)
    assert len(launched(sim)) == 1
    assert result.workloads["api"].ready_at_end == 2


def test_a_replica_karpenter_cannot_place_by_its_constraints_gets_no_node() -> None:
    """One replica per node and a pool limited to two nodes: the third replica stays pending and
    Karpenter says it could not scale up, rather than packing it onto a claim the scheduler refuses."""
    s = scenario(
        [pool("p", itype("big", "16", 0.8, mem="64Gi"), max=2)],
        [workload("api", 3, cpu="1", anti_affinity=[ON_HOST])],
        autoscaler=KARPENTER,
    )
    sim, result = run(s)
    assert len(launched(sim)) == 2
    assert result.workloads["api"].ready_at_end == 2
    assert kinds(result, "no_scale_up")


def test_consolidation_does_not_pack_replicas_that_must_stay_apart() -> None:
    """The same cluster as test_multi_node_consolidation_takes_several_nodes_at_once, where two of the
    three nodes go: with one replica per node required, no node may go (the scheduler would leave the
    moved replicas pending)."""
    budgets = {"budgets": [{"nodes": "100%"}]}
    s = scenario(
        [pool("p", itype("m", "4", 0.2), initial=3, max=3, disruption=budgets)],
        [workload("api", 3, cpu="1", anti_affinity=[ON_HOST], placement={"p-0": 1, "p-1": 1, "p-2": 1})],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    assert kinds(result, "scale_down") == []
    assert result.workloads["api"].ready_at_end == 3
