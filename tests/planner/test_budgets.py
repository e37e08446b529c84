"""PodDisruptionBudgets in the plan (issue 12, item 1): a plan never picks victims their budgets will
not let go, counts what each budget allows now, and so a relocation that could never proceed is not
started: the waiting pod is left to the autoscaler, no worse than with no makeroom at all."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from makeroom.controller import Strategy
from makeroom.model import DisruptionBudget, OwnerKind, Workload
from makeroom.planner import NotMovable, PlacementReason, Policy, UnplaceableReason, not_movable, plan
from makeroom.planner.budgets import Budgets
from makeroom.scenario import parse_scenario
from makeroom.sim import Options, Simulation
from tests.planner.feasibility import check_feasible
from tests.planner.helpers import CPU_NODE, GPU_NODE, Cluster, example

IRIS = {"cpu": "400m", "memory": "1Gi"}
TEXT_GEN = {"cpu": "3", "memory": "12Gi", "nvidia.com/gpu": "1"}


def seed_like(budget: DisruptionBudget | None, gpu_max: int = 1, ready: int = 10) -> Cluster:
    """seed-1: five iris replicas on cpu-0 and five on gpu-0 (``ready`` of them Ready), iris under
    ``budget``, and a text-generator pending."""
    c = Cluster([Cluster.group("cpu", CPU_NODE, 1, 0.17), Cluster.group("gpu", GPU_NODE, gpu_max, 0.53)])
    c.node("cpu")
    c.node("gpu")
    iris = c.fill("iris", IRIS, 100, "cpu-0", 5) + c.fill("iris", IRIS, 100, "gpu-0", 5)
    for i, pod in enumerate(iris):
        pod.ready = i < ready
    c.state.workloads["iris"] = Workload("iris", iris[0].spec, 10, pdb=budget)
    c.pod("text-gen", TEXT_GEN, 1000)
    return c


def test_a_budget_that_allows_no_disruption_keeps_its_pods_where_they_are() -> None:
    c = seed_like(DisruptionBudget(max_unavailable=0))
    policy = Policy()
    iris = next(p for p in c.state.pods.values() if p.node == "gpu-0")
    assert not_movable(iris, policy, Budgets.of(c.state)) is NotMovable.DISRUPTION_BUDGET
    assert not_movable(iris, policy) is None  # the pod alone may move: it is its budget that holds it
    for exact in (False, True):
        result = plan(c.state, Policy(exact=exact))
        check_feasible(c.state, result, Policy(exact=exact))
        assert result.moves == ()
        assert [u.reason for u in result.unplaceable] == [UnplaceableReason.NO_ROOM_TO_MAKE]


def test_with_a_budget_that_allows_none_the_pod_is_left_to_the_autoscaler() -> None:
    c = seed_like(DisruptionBudget(max_unavailable=0), gpu_max=2)
    result = plan(c.state, Policy())
    assert result.moves == ()
    assert [(p.reason, p.new_node_group) for p in result.placements] == [(PlacementReason.NEW_NODE, "gpu")]


def test_a_budget_is_counted_on_the_healthy_pods_now() -> None:
    # maxUnavailable 1 of 10, but one iris replica is not Ready: no disruption is allowed now
    degraded = seed_like(DisruptionBudget(max_unavailable=1), ready=9)
    assert plan(degraded.state, Policy()).moves == ()
    # all Ready: one at a time, so the three victims go in three turns, and the plan says so
    healthy = seed_like(DisruptionBudget(max_unavailable=1))
    result = plan(healthy.state, Policy())
    assert len(result.moves) == 3
    (placement,) = result.placements
    assert "in 3 turns" in placement.detail
    # minAvailable 70%: three may go at once
    loose = seed_like(DisruptionBudget(min_available="70%"))
    (placement,) = plan(loose.state, Policy()).placements
    assert placement.reason is PlacementReason.RELOCATION and "turns" not in placement.detail


@pytest.mark.parametrize(
    ("owner", "replicas_owner", "movable"),
    [
        (OwnerKind.REPLICA_SET, None, True),  # a Deployment makeroom surges: replaced before it goes
        (OwnerKind.REPLICA_SET, "HorizontalPodAutoscaler/iris", False),  # makeroom may not scale it
        (OwnerKind.STATEFUL_SET, None, False),  # never surged: it would be evicted, and refused
    ],
)
def test_make_before_break_moves_only_what_it_replaces_first(
    owner: OwnerKind, replicas_owner: str | None, movable: bool
) -> None:
    c = seed_like(DisruptionBudget(max_unavailable=0))
    w = c.state.workloads["iris"]
    w.owner_kind, w.replicas_owner = owner, replicas_owner
    for pod in c.state.pods.values():
        if pod.workload == "iris":
            pod.owner_kind = owner
    policy = Policy(make_before_break=True)
    result = plan(c.state, policy)
    check_feasible(c.state, result, policy)
    assert (len(result.moves) == 3) is movable


def _variant() -> dict[str, Any]:
    """Issue 12's case: seed-1 with the victims' budget at maxUnavailable 0 and the GPU group at max 2."""
    data: dict[str, Any] = yaml.safe_load(example("seed-1").read_text())
    for g in data["node_groups"]:
        if g["name"] == "gpu":
            g["max"] = 2
    for w in data["workloads"]:
        if w["name"] == "iris-classifier":
            w["pdb"] = {"max_unavailable": 0}
    data["duration"] = "1h"
    return data


def _outcome(strategy: str) -> dict[str, Any]:
    scenario = parse_scenario(_variant(), "seed-1-budget-0.yaml")
    result: dict[str, Any] = Simulation(scenario, Options(strategy=Strategy(strategy))).run().data
    return result


@pytest.mark.parametrize("strategy", ["evict", "migrate"])
def test_seed_1_with_a_budget_of_zero_ends_no_worse_than_none(strategy: str) -> None:
    none, made = _outcome("none"), _outcome(strategy)
    text, base = made["workloads"]["text-generator"], none["workloads"]["text-generator"]
    assert base["ready_at_end"] == 1  # the autoscaler adds a GPU node
    assert text["ready_at_end"] == 1, made["pending_at_end"]
    assert text["time_to_ready_s"] <= base["time_to_ready_s"]
    assert text["unavailable_replica_seconds"] <= base["unavailable_replica_seconds"]
    iris = made["workloads"]["iris-classifier"]
    assert (
        iris["unavailable_replica_seconds"]
        <= none["workloads"]["iris-classifier"]["unavailable_replica_seconds"]
    )
    assert made["pending_at_end"] == []
    if strategy == "evict":
        # nothing may be evicted: the plan starts no relocation and the autoscaler acts
        assert not any(e["kind"] == "eviction_refused" for e in made["events"])
