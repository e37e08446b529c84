"""Only Deployments are surged (issue 12, item 3, wrong kinds): a StatefulSet's pods move within their
budget by eviction, and migrate says so in an Event for each; nothing is ever scaled through
``deployments/<name>/scale`` for them (the simulated API answers 404 there, as the real one does)."""

from __future__ import annotations

from typing import Any

import pytest

from makeroom.controller import ControllerConfig, NotFoundError, Reason, Strategy
from makeroom.controller.reasons import Fallback
from makeroom.model import OwnerKind
from makeroom.scenario import load_scenario
from makeroom.sim import Options, Simulation
from makeroom.sim.port import SimCluster
from makeroom.sim.runs import attach_controller
from tests.conftest import seed
from tests.controller.support import leftovers


def run_with(owner: OwnerKind, replicas_owner: str | None = None) -> tuple[Simulation, dict[str, Any]]:
    scenario = load_scenario(seed(1))
    for w in scenario.workloads:
        if w.name == "iris-classifier":
            w.owner_kind, w.replicas_owner = owner, replicas_owner
    sim = Simulation(scenario, Options(strategy=Strategy.MIGRATE))
    attach_controller(sim, ControllerConfig(strategy=Strategy.MIGRATE))
    return sim, sim.run().data


def fallbacks(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in data["events"] if e.get("reason") == Reason.FELL_BACK_TO_EVICTION.value]


def test_the_simulated_api_has_no_scale_of_a_deployment_for_a_statefulset() -> None:
    scenario = load_scenario(seed(1))
    for w in scenario.workloads:
        w.owner_kind = OwnerKind.STATEFUL_SET
    sim = Simulation(scenario, Options(strategy=Strategy.MIGRATE))
    port = SimCluster(sim.world)
    assert {p.owner_kind for p in sim.world.state.pods.values()} == {OwnerKind.STATEFUL_SET}
    with pytest.raises(NotFoundError):
        port.scale("iris-classifier", 13)
    assert port.deployment_of("default/iris-classifier-5") is None


@pytest.mark.parametrize(
    ("owner", "replicas_owner", "why"),
    [
        (OwnerKind.STATEFUL_SET, None, Fallback.NOT_A_DEPLOYMENT),
        (OwnerKind.REPLICA_SET, "HorizontalPodAutoscaler/iris-classifier", Fallback.REPLICAS_OWNED),
    ],
    ids=["statefulset", "hpa"],
)
def test_victims_makeroom_may_not_surge_move_by_eviction_within_their_budget_and_say_so(
    owner: OwnerKind, replicas_owner: str | None, why: Fallback
) -> None:
    sim, data = run_with(owner, replicas_owner)
    assert not [e for e in data["events"] if e["kind"] == "makeroom_scale"]  # never scaled
    assert data["workloads"]["text-generator"]["ready_at_end"] == 1
    iris = data["workloads"]["iris-classifier"]
    assert iris["evicted"] == 3 and iris["min_ready"] >= 9  # one at a time: maxUnavailable 1
    said = fallbacks(data)
    assert len(said) == 3 and all(why.why in e["message"] for e in said)
    assert leftovers(sim, sim.scenario) == []
