"""The simulated Karpenter, against what Karpenter v1.14's source does (sim/karpenter*.py cite it):
which pool and type a pending pod gets, batching, limits, the provisioning delay, and consolidation
(emptiness, single- and multi-node, budgets, validation, drains within budgets)."""

from __future__ import annotations

import json
from typing import Any

from makeroom.model import AutoscalerKind
from makeroom.sim import Options, Simulation
from makeroom.sim.karpenter import Karpenter
from tests.builders.scenario import group, kinds, run, scenario, workload

KARPENTER = {"kind": "karpenter"}


def pool(name: str, *types: dict[str, Any], **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "instance_types": list(types), "min": 0, "max": 5, "initial": 0}
    out.update(kw)
    return out


def itype(name: str, cpu: str, price: float, mem: str = "16Gi", gpu: int = 0) -> dict[str, Any]:
    capacity: dict[str, Any] = {"cpu": cpu, "memory": mem}
    if gpu:
        capacity["nvidia.com/gpu"] = gpu
    return {"name": name, "capacity": capacity, "price_per_hour": price}


WHEN_EMPTY = {"consolidation_policy": "WhenEmpty"}


def scale_ups(result: Any) -> list[tuple[float, str, str]]:
    return [(e["t"], e["group"], e["instance_type"]) for e in kinds(result, "scale_up")]


# --- provisioning ---------------------------------------------------------------------------------


def test_a_pending_pod_gets_a_node_of_the_first_pool_by_weight() -> None:
    s = scenario(
        [
            pool("cheap", itype("small", "4", 0.1), weight=10),
            pool("preferred", itype("big", "8", 0.5), weight=50),
        ],
        [workload("api", 1, cpu="1")],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    assert scale_ups(result) == [(1.0, "preferred", "big")]  # weight wins over price
    assert result.workloads["api"].ready_at_end == 1


def test_equal_weights_go_by_name_descending_as_karpenter_orders_them() -> None:
    s = scenario(
        [pool("alpha", itype("a", "4", 0.1), weight=5), pool("beta", itype("b", "4", 0.1), weight=5)],
        [workload("api", 1, cpu="1")],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    assert scale_ups(result)[0][1] == "beta"


def test_without_weights_the_list_order_is_the_preference() -> None:
    s = scenario(
        [pool("zeta", itype("z", "4", 0.3)), pool("alpha", itype("a", "4", 0.1))],
        [workload("api", 1, cpu="1")],
        autoscaler=KARPENTER,
    )
    assert [g.weight for g in s.groups] == [100, 99]
    _, result = run(s)
    assert scale_ups(result)[0][1] == "zeta"


def test_the_cheapest_type_that_holds_the_batch_is_launched() -> None:
    types = (itype("xl", "16", 0.8, mem="64Gi"), itype("s", "2", 0.1), itype("m", "4", 0.2))
    small = scenario([pool("p", *types)], [workload("api", 1, cpu="1")], autoscaler=KARPENTER)
    assert scale_ups(run(small)[1]) == [(1.0, "p", "s")]
    bigger = scenario([pool("p", *types)], [workload("api", 3, cpu="1")], autoscaler=KARPENTER)
    assert scale_ups(run(bigger)[1]) == [(1.0, "p", "m")]  # one NodeClaim for the batch of three


def test_a_pod_no_type_can_hold_waits() -> None:
    s = scenario([pool("p", itype("s", "2", 0.1))], [workload("api", 1, cpu="3")], autoscaler=KARPENTER)
    _, result = run(s)
    assert scale_ups(result) == []
    assert kinds(result, "no_scale_up")
    assert result.pending_at_end == ["api-0"]


def test_a_batch_closes_one_idle_second_after_the_last_pod() -> None:
    s = scenario(
        [pool("p", itype("m", "2", 0.2))],  # two of the pods fill one node
        [workload("a", 0, cpu="1"), workload("b", 0, cpu="1"), workload("c", 0, cpu="1")],
        events=[
            {"at": 10, "scale": {"workload": "a", "replicas": 1}},
            {"at": 10.5, "scale": {"workload": "b", "replicas": 1}},
            {"at": 15, "scale": {"workload": "c", "replicas": 1}},
        ],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    ups = kinds(result, "scale_up")
    assert [(e["t"], e["pods"]) for e in ups] == [(11.5, ["a-0", "b-0"]), (16.0, ["c-0"])]


def test_a_batch_closes_at_its_max_duration_while_pods_keep_coming() -> None:
    events = [{"at": 10 + i * 0.5, "scale": {"workload": "a", "replicas": i + 1}} for i in range(30)]
    s = scenario(
        [pool("p", itype("m", "64", 0.2, mem="256Gi"))],
        [workload("a", 0, cpu="1")],
        events=events,
        autoscaler={"kind": "karpenter", "karpenter": {"batch_max_duration": "4s"}},
    )
    _, result = run(s)
    first = kinds(result, "scale_up")[0]
    assert first["t"] == 14.0
    assert len(first["pods"]) == 9  # those that came in the four seconds


def test_the_node_limit_caps_a_pool_and_the_next_pool_takes_the_rest() -> None:
    s = scenario(
        [pool("first", itype("f", "2", 0.1), max=1), pool("second", itype("s", "2", 0.3))],
        [workload("api", 2, cpu="1500m")],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    assert sorted(g for _, g, _ in scale_ups(result)) == ["first", "second"]
    assert result.workloads["api"].ready_at_end == 2


def test_resource_limits_filter_the_types_within_what_is_left() -> None:
    s = scenario(
        [pool("p", itype("big", "8", 0.3), itype("small", "2", 0.2), limits={"cpu": "6"})],
        [workload("api", 4, cpu="1500m")],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    # The big type would break the limit of 6 CPU, so each pod gets a small node, until the limit
    # is used up: three nodes, the fourth pod waits.
    assert scale_ups(result) == [(1.0, "p", "small")] * 3
    assert result.pending_at_end == ["api-3"]


def test_the_pessimistic_limit_keeps_a_second_claim_out_in_one_pass() -> None:
    # Two pods of 3 CPU: each needs its own node; the first claim may be of either type, so Karpenter
    # subtracts the largest (8) from the limit (10) and the second claim only fits a 2-CPU type: none.
    s = scenario(
        [pool("p", itype("big", "8", 0.3), itype("mid", "4", 0.2), limits={"cpu": "10"})],
        [workload("api", 2, cpu="3", mem="10Gi")],
        autoscaler=KARPENTER,
    )
    _, result = run(s, until=5)
    assert len(scale_ups(result)) == 1
    _, later = run(s, until=30)
    assert len(scale_ups(later)) == 2  # the pod triggers again 10 s later: 10 - 4 leaves room for mid


def test_a_node_is_ready_after_the_pools_provision_time() -> None:
    s = scenario(
        [pool("p", itype("m", "4", 0.2), provision_time="90s")],
        [workload("api", 1, cpu="1")],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    (ready,) = kinds(result, "node_ready")
    assert ready["t"] == 91.0
    assert result.node_groups["p"].nodes_added == 1


def test_a_node_coming_up_is_counted_and_no_second_is_bought() -> None:
    s = scenario(
        [pool("p", itype("m", "4", 0.2), provision_time="5m")],
        [workload("api", 1, cpu="1"), workload("late", 0, cpu="1")],
        events=[{"at": 60, "scale": {"workload": "late", "replicas": 1}}],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    assert len(scale_ups(result)) == 1  # "late" fits on the node still coming up
    assert result.workloads["late"].ready_at_end == 1


def test_a_nominated_pod_is_left_to_the_scheduler() -> None:
    s = scenario(
        [pool("p", itype("m", "4", 0.2), initial=1, max=3)],
        [workload("fill", 4, cpu="1", placement={"p": 4}), workload("api", 0, cpu="1")],
        events=[{"at": 30, "scale": {"workload": "api", "replicas": 1}}],
        autoscaler=KARPENTER,
    )
    sim = Simulation(s, Options())
    sim.run(until=30.0)
    (pod,) = [p for p in sim.world.pending.values() if p.workload == "api"]
    sim.world.state.nominate(pod, "p-0")  # as makeroom or a preemption does
    result = sim.run()
    assert scale_ups(result) == []
    assert result.pending_at_end == ["api-0"]


def test_a_pod_stuck_at_the_limit_gets_a_node_when_the_limit_frees() -> None:
    s = scenario(
        [pool("p", itype("m", "2", 0.2), initial=1, max=1, disruption=WHEN_EMPTY)],
        [workload("fill", 1, cpu="2", placement={"p": 1}), workload("api", 1, cpu="2")],
        events=[{"at": 120, "remove_node": {"node": "p-0"}}],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    ups = scale_ups(result)
    assert ups and 120 < ups[0][0] <= 131  # its next trigger, at most 10 s later, and a batch


def test_a_v1_scenario_runs_the_cluster_autoscaler_and_can_be_run_under_karpenter() -> None:
    s = scenario([group("cpu", max=2, initial=0)], [workload("api", 1)])
    assert s.autoscaler is AutoscalerKind.CLUSTER_AUTOSCALER
    assert not isinstance(Simulation(s, Options()).autoscaler, Karpenter)
    sim = Simulation(s, Options(autoscaler=AutoscalerKind.KARPENTER))
    assert isinstance(sim.autoscaler, Karpenter)
    result = sim.run()
    assert scale_ups(result) == [(1.0, "cpu", "cpu")]  # one type, named after the group


def test_a_pool_node_costs_its_types_price() -> None:
    s = scenario(
        [pool("p", itype("s", "2", 0.1), itype("m", "4", 0.4), provision_time=0)],
        [workload("api", 3, cpu="1")],
        duration="1h",
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    assert scale_ups(result) == [(1.0, "p", "m")]
    assert abs(result.node_groups["p"].cost - 0.4 * 3599 / 3600) < 1e-6


# --- consolidation --------------------------------------------------------------------------------


def test_an_empty_node_goes_after_validation() -> None:
    s = scenario([pool("p", itype("m", "4", 0.2), initial=1)], [], autoscaler=KARPENTER)
    _, result = run(s)
    (down,) = kinds(result, "scale_down")
    assert (down["t"], down["node"], down["empty"]) == (15.0, "p-0", True)
    assert kinds(result, "node_removed")[0]["t"] == 15.0


def test_consolidate_after_waits_from_the_last_pod_event() -> None:
    s = scenario(
        [pool("p", itype("m", "4", 0.2), initial=1, disruption={"consolidate_after": "5m"})],
        [workload("api", 1, cpu="1", placement={"p": 1})],
        events=[{"at": 60, "delete": {"workload": "api"}}],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    (down,) = kinds(result, "scale_down")
    assert 360 + 15 <= down["t"] < 360 + 15 + 10  # 5 min after the pod left, at a poll, validated


def test_consolidate_after_never_keeps_every_node() -> None:
    s = scenario(
        [pool("p", itype("m", "4", 0.2), initial=2, disruption={"consolidate_after": "Never"})],
        [],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    assert kinds(result, "scale_down") == []


def test_when_empty_keeps_an_underutilized_node_and_the_other_policy_deletes_it() -> None:
    def cluster(policy: str) -> Any:
        return scenario(
            [pool("p", itype("m", "4", 0.2), initial=2, disruption={"consolidation_policy": policy})],
            [workload("api", 2, cpu="1", placement={"p-0": 1, "p-1": 1})],
            autoscaler=KARPENTER,
        )

    _, kept = run(cluster("WhenEmpty"))
    assert kinds(kept, "scale_down") == []
    _, packed = run(cluster("WhenEmptyOrUnderutilized"))
    (down,) = kinds(packed, "scale_down")
    assert down["empty"] is False and down["reason"] == "Underutilized"
    assert packed.node_groups["p"].nodes_at_end == 1
    assert packed.workloads["api"].ready_at_end == 2


def test_a_node_whose_pods_fit_one_cheaper_node_is_replaced() -> None:
    s = scenario(
        [
            pool("small", itype("s", "4", 0.1), weight=50),
            pool("dear", itype("d", "4", 0.9), weight=10, initial=1),
        ],
        [workload("api", 2, cpu="1", placement={"dear": 2})],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    up = kinds(result, "scale_up")[0]
    assert (up["t"], up["group"], up["reason"]) == (15.0, "small", "Underutilized")
    assert result.node_groups["dear"].nodes_at_end == 0
    assert result.node_groups["small"].nodes_at_end == 1
    assert result.workloads["api"].ready_at_end == 2
    # make-before-break: the old node drains only once its replacement is Ready (2 min)
    assert kinds(result, "evicted")[0]["t"] >= 15 + 120


def test_no_replacement_unless_it_is_cheaper() -> None:
    s = scenario(
        [pool("p", itype("s", "4", 0.5), initial=1, max=3)],
        [workload("api", 2, cpu="1", placement={"p": 2})],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    assert kinds(result, "scale_down") == []


def test_multi_node_consolidation_takes_several_nodes_at_once() -> None:
    s = scenario(
        [pool("p", itype("m", "4", 0.2), initial=3, max=3, disruption={"budgets": [{"nodes": "100%"}]})],
        [workload("api", 3, cpu="1", placement={"p-0": 1, "p-1": 1, "p-2": 1})],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    downs = kinds(result, "scale_down")
    assert len(downs) == 2 and {d["t"] for d in downs} == {15.0}  # one command, two nodes
    assert result.node_groups["p"].nodes_at_end == 1
    assert result.workloads["api"].ready_at_end == 3


def test_the_default_budget_is_ten_percent_rounded_up() -> None:
    s = scenario(
        [pool("p", itype("m", "4", 0.2), initial=3, max=3)],
        [workload("api", 3, cpu="1", placement={"p-0": 1, "p-1": 1, "p-2": 1})],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    assert [d["t"] for d in kinds(result, "scale_down")] == [15.0, 70.0]  # one node at a time


def test_budgets_cap_nodes_disrupted_at_once() -> None:
    s = scenario(
        [pool("p", itype("m", "4", 0.2), initial=4, disruption={"budgets": [{"nodes": 1}]})],
        [],
        autoscaler=KARPENTER,
    )
    _, result = run(s, until=20)
    assert len(kinds(result, "scale_down")) == 1
    zero = scenario(
        [pool("p", itype("m", "4", 0.2), initial=2, disruption={"budgets": [{"nodes": 0}]})],
        [],
        autoscaler=KARPENTER,
    )
    assert kinds(run(zero)[1], "scale_down") == []
    other_reason = scenario(
        [
            pool(
                "p",
                itype("m", "4", 0.2),
                initial=2,
                disruption={"budgets": [{"nodes": 0, "reasons": ["Underutilized"]}]},
            )
        ],
        [],
        autoscaler=KARPENTER,
    )
    assert len(kinds(run(other_reason)[1], "scale_down")) == 2  # the budget is for another reason


def test_a_pod_whose_budget_allows_no_disruption_keeps_its_node() -> None:
    s = scenario(
        [pool("p", itype("m", "4", 0.2), initial=2)],
        [workload("api", 2, cpu="1", placement={"p-0": 1, "p-1": 1}, pdb={"max_unavailable": 0})],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    assert kinds(result, "scale_down") == []


def test_do_not_disrupt_keeps_a_pods_node() -> None:
    s = scenario(
        [pool("p", itype("m", "4", 0.2), initial=2)],
        [workload("api", 2, cpu="1", placement={"p-0": 1, "p-1": 1})],
        autoscaler=KARPENTER,
    )
    sim = Simulation(s, Options())
    for pod in sim.world.state.pods.values():
        pod.annotations["karpenter.sh/do-not-disrupt"] = "true"
    assert kinds(sim.run(), "scale_down") == []


def test_a_drain_evicts_within_the_budget() -> None:
    s = scenario(
        [
            pool("small", itype("s", "8", 0.1), weight=50),
            pool("dear", itype("d", "8", 0.9), weight=10, initial=1),
        ],
        [workload("api", 4, cpu="1", placement={"dear": 4}, pdb={"max_unavailable": 1}, startup_time="20s")],
        autoscaler=KARPENTER,
    )
    _, result = run(s)
    assert result.workloads["api"].min_ready == 3  # never two down at once
    assert result.workloads["api"].evicted == 4
    assert result.node_groups["dear"].nodes_at_end == 0


def test_a_change_during_validation_abandons_the_command() -> None:
    s = scenario(
        [pool("p", itype("m", "4", 0.2), initial=1)],
        [workload("api", 0, cpu="1")],
        events=[{"at": 5, "scale": {"workload": "api", "replicas": 1}}],
        autoscaler=KARPENTER,
    )
    _, result = run(s, until=120)
    assert kinds(result, "scale_down") == []  # empty at 0 s, busy at 15 s
    assert result.workloads["api"].ready_at_end == 1


def test_a_karpenter_run_is_deterministic() -> None:
    s = scenario(
        [pool("a", itype("a", "4", 0.2), initial=2), pool("b", itype("b", "8", 0.3))],
        [workload("api", 6, cpu="1", placement={"a": 4}), workload("more", 3, cpu="2")],
        events=[{"at": 120, "delete": {"workload": "more"}}],
        autoscaler=KARPENTER,
    )
    first = json.dumps(run(s)[1].to_json())
    assert first == json.dumps(run(s)[1].to_json())


# --- makeroom's hold on a node, next to Karpenter ---------------------------------------------------


def test_under_karpenter_a_nomination_also_reserves_the_node_and_is_released() -> None:
    from makeroom.model.objects import RESERVED_FOR
    from makeroom.sim.port import SimCluster

    s = scenario(
        [pool("p", itype("m", "1", 0.2), initial=2, max=2)],
        [workload("fill", 2, cpu="1", placement={"p": 2}), workload("api", 2, cpu="1")],
        autoscaler=KARPENTER,
    )
    sim, _ = run(s, until=0.0)
    port = SimCluster(sim.world)
    first, second = sorted(sim.world.pending.values(), key=lambda p: p.seq)
    port.nominate(first.key, "p-1")
    assert [(t.key, t.value) for t in sim.world.state.nodes["p-1"].taints] == [(RESERVED_FOR, first.key)]
    assert any(t.key == RESERVED_FOR and t.value == first.key for t in first.spec.tolerations)
    port.nominate(first.key, None)
    assert sim.world.state.nodes["p-1"].taints == ()
    port.nominate(second.key, "p-0")
    sim.world.delete_pod(second, "deleted")  # the pod goes: its reservation is an orphan
    port.snapshot()
    assert sim.world.state.nodes["p-0"].taints == ()


def test_under_the_cluster_autoscaler_a_nomination_is_only_a_nomination() -> None:
    from makeroom.sim.port import SimCluster

    s = scenario(
        [group("cpu", cpu="1", max=1)], [workload("fill", 1, placement={"cpu": 1}), workload("api", 1)]
    )
    sim, _ = run(s, until=0.0)
    (pod,) = sim.world.pending.values()
    SimCluster(sim.world).nominate(pod.key, "cpu-0")
    assert sim.world.state.nodes["cpu-0"].taints == ()
