"""The model's value rules: tolerations, budgets, a pod's effective requests, and resource arithmetic."""

from __future__ import annotations

import pytest

from makeroom.model import (
    DELETION_COST,
    DisruptionBudget,
    Pod,
    PodSpec,
    Resources,
    Taint,
    TaintEffect,
    Toleration,
)

GPU = Taint("nvidia.com/gpu", "present")


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (Toleration("nvidia.com/gpu", "Exists"), GPU, True),
        (Toleration("nvidia.com/gpu", "Equal", "present"), GPU, True),
        (Toleration("nvidia.com/gpu", "Equal", "absent"), GPU, False),
        (Toleration("other", "Exists"), GPU, False),
        (Toleration("", "Exists"), GPU, True),  # an empty key with Exists tolerates everything
        (Toleration("", "Equal"), GPU, False),
        (Toleration("nvidia.com/gpu", "Exists", effect="NoExecute"), GPU, False),
        (Toleration("nvidia.com/gpu", "Exists", effect="NoSchedule"), GPU, True),
    ],
)
def test_tolerations_match_as_kubernetes_matches_them(
    toleration: Toleration, taint: Taint, tolerated: bool
) -> None:
    assert toleration.tolerates(taint) is tolerated


@pytest.mark.parametrize(
    ("budget", "expected", "desired_healthy"),
    [
        (DisruptionBudget(max_unavailable=1), 4, 3),
        (DisruptionBudget(max_unavailable="50%"), 5, 2),  # 50 % of 5 rounds up to 3 unavailable
        (DisruptionBudget(min_available=2), 4, 2),
        (DisruptionBudget(min_available="50%"), 5, 3),  # rounds up, as Kubernetes does
        (DisruptionBudget(max_unavailable=10), 4, 0),
    ],
)
def test_budgets_scale_percentages_up(budget: DisruptionBudget, expected: int, desired_healthy: int) -> None:
    assert budget.desired_healthy(expected) == desired_healthy


def test_a_budget_allows_only_the_healthy_pods_above_its_floor() -> None:
    budget = DisruptionBudget(max_unavailable=1)
    assert budget.disruptions_allowed(healthy=4, expected=4) == 1
    assert budget.disruptions_allowed(healthy=3, expected=4) == 0
    assert budget.disruptions_allowed(healthy=2, expected=4) == 0  # never negative


def test_every_pod_takes_a_pod_slot() -> None:
    requests = Resources.parse({"cpu": "500m"})
    assert PodSpec.effective(requests) == Resources({"cpu": 500, "pods": 1000})
    slots = Resources.parse({"cpu": "500m", "pods": 2})
    assert PodSpec.effective(slots) == slots


def test_a_pod_is_named_by_its_namespace_and_reads_its_deletion_cost() -> None:
    spec = PodSpec(Resources.parse({"cpu": 1}), priority=10)
    pod = Pod("web-0", spec, "web", namespace="apps", annotations={DELETION_COST: "-5"})
    assert (pod.key, pod.priority, pod.deletion_cost(), pod.bound) == ("apps/web-0", 10, -5, False)
    pod.annotations[DELETION_COST] = "not a number"
    assert pod.deletion_cost() == 0


def test_system_critical_pods_are_known_by_priority_or_class() -> None:
    ordinary = PodSpec(Resources(), priority=1000)
    assert not Pod("a", ordinary).is_system_critical()
    assert Pod("b", PodSpec(Resources(), priority=2_000_000_000)).is_system_critical()
    assert Pod("c", PodSpec(Resources(), priority_class="system-node-critical")).is_system_critical()


def test_resources_are_milli_units_where_missing_is_zero() -> None:
    a = Resources.parse({"cpu": "1.5", "memory": "1Gi"})
    b = Resources.parse({"cpu": "500m", "nvidia.com/gpu": 1})
    assert a["cpu"] == 1500 and a["nvidia.com/gpu"] == 0 and "nvidia.com/gpu" not in a
    assert (a + b)["cpu"] == 2000 and (a - b)["nvidia.com/gpu"] == -1000
    assert (a - b).is_negative() and not a.is_negative()
    assert b.requests_gpu() and not a.requests_gpu()
    assert a.scaled(2)["cpu"] == 3000
    assert Resources({"cpu": 0}) == Resources() and hash(Resources({"cpu": 0})) == hash(Resources())


def test_fits_in_compares_every_requested_resource() -> None:
    room = Resources.parse({"cpu": "2", "memory": "4Gi"})
    assert Resources.parse({"cpu": "2"}).fits_in(room)
    assert not Resources.parse({"cpu": "2001m"}).fits_in(room)
    assert not Resources.parse({"nvidia.com/gpu": 1}).fits_in(room)  # a resource the node lacks is 0
    assert Resources().fits_in(Resources())


def test_taint_effects_default_to_no_schedule() -> None:
    assert Taint("k").effect is TaintEffect.NO_SCHEDULE
