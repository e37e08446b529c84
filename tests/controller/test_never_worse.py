"""Never worse than doing nothing (issue 12, item 1, the controller's side): a relocation that cannot
proceed gives up in bounded time, releases everything (nomination, scale-up delay, surge, marks) and
leaves the pod to the autoscaler for a while; the planner already starts none whose victims' budgets
allow nothing now (tests/planner/test_budgets.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from makeroom.controller import ControllerConfig, Strategy
from makeroom.controller.relocator import HANDS_OFF, STUCK_GRACE
from makeroom.controller.steps import RetryKey
from makeroom.controller.validate import Live
from makeroom.model import DisruptionBudget
from makeroom.scenario import parse_scenario
from makeroom.sim import Options, Simulation
from makeroom.sim.clock import Phase
from makeroom.sim.port import SimCluster
from makeroom.sim.runs import attach_controller
from tests.conftest import seed
from tests.controller.support import leftovers
from tests.controller.test_compose import group, text_generator

INTERVAL = ControllerConfig().interval


def seed_1(gpu_max: int) -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(seed(1).read_text())
    for g in raw["node_groups"]:
        if g["name"] == "gpu":
            g["max"] = gpu_max
    raw["duration"] = "1h"
    return raw


def reasons(data: dict[str, Any], reason: str) -> list[dict[str, Any]]:
    return [e for e in data["events"] if e.get("reason") == reason]


def run(raw: dict[str, Any], strategy: Strategy, at: float | None = None, change: Any = None) -> Any:
    scenario = parse_scenario(raw, "variant.yaml")
    sim = Simulation(scenario, Options(strategy=strategy))
    controller = attach_controller(sim, ControllerConfig(strategy=strategy)) if strategy.relocates else None
    if change is not None:
        assert at is not None
        sim.loop.at(at, Phase.WORLD, lambda: change(sim))
    return sim, controller, sim.run().data


def close_the_budget(sim: Simulation) -> None:
    """The API's owner sets its PodDisruptionBudget to maxUnavailable 0 mid-relocation."""
    sim.world.workloads["iris-classifier"].pdb = DisruptionBudget(max_unavailable=0)


def test_a_budget_that_closes_mid_relocation_gives_up_and_lets_the_autoscaler_act() -> None:
    """Before: the evictions were refused until the 15-minute timeout, with the waiting pod nominated
    and its scale-up delayed, and text-generator was Ready at 1,210 s (under none: 330 s)."""
    raw = seed_1(gpu_max=2)
    _, _, none = run(raw, Strategy.NONE, 90.0, close_the_budget)
    sim, _, made = run(raw, Strategy.EVICT, 90.0, close_the_budget)
    (rolled,) = reasons(made, "RelocationRolledBack")
    assert "cannot proceed" in rolled["message"] and "budget of iris-classifier" in rolled["message"]
    assert rolled["t"] <= 90.0 + STUCK_GRACE + 2 * INTERVAL
    text, base = made["workloads"]["text-generator"], none["workloads"]["text-generator"]
    assert text["ready_at_end"] == 1 and base["ready_at_end"] == 1
    # the autoscaler acts as soon as the relocation gives up: later than under none only by how long
    # makeroom tried (it evicted one victim in the meantime)
    assert text["time_to_ready_s"] <= base["time_to_ready_s"] + STUCK_GRACE + 2 * INTERVAL
    assert made["node_groups"]["gpu"]["nodes_added"] == 1
    assert made["workloads"]["iris-classifier"]["ready_at_end"] == 10
    assert leftovers(sim, sim.scenario) == []
    # not held again while the autoscaler acts: the next attempt (if any) waits the hands-off
    again = [e for e in reasons(made, "Relocating") if e["t"] > rolled["t"]]
    assert all(e["t"] >= rolled["t"] + HANDS_OFF for e in again)


def drain_the_new_pods(sim: Simulation) -> None:
    """An admin cordons cpu-0 and drains the pods just made there: the surge's replacements are made
    again and have nowhere to go (the CPU group is at its max, the GPU node's room is held)."""
    world = sim.world
    world.set_cordon("cpu-0", True)
    for pod in list(world.state.pods_on["cpu-0"].values()):
        if pod.created_at > 0:
            world.delete_pod(pod, "drained")


def test_a_surge_whose_replacements_have_nowhere_to_go_gives_up_and_releases_everything() -> None:
    """Before: the surge and the hold stayed until the 15-minute timeout (rolled back at 962 s)."""
    sim, _, made = run(seed_1(gpu_max=1), Strategy.MIGRATE, 70.0, drain_the_new_pods)
    rolled = reasons(made, "RelocationRolledBack")
    assert rolled, "the relocation should give up"
    assert "the new pods of iris-classifier have nowhere to go" in rolled[0]["message"]
    assert rolled[0]["t"] <= 70.0 + STUCK_GRACE + 3 * INTERVAL
    pod = sim.world.state.pods["default/text-generator-0"]
    assert pod.nominated_node is None or pod.node is not None  # no hold left when it gave up
    iris = made["workloads"]["iris-classifier"]
    assert iris["min_ready"] == 10 and iris["ready_at_end"] == 10
    assert leftovers(sim, sim.scenario) == []


def test_a_pod_rolled_back_is_left_to_the_autoscaler_for_a_while() -> None:
    """Before: the backoff after a roll-back was dropped at once (the step that rolled back had
    succeeded), so the pod was planned and held again on the next round, and the autoscaler, which
    skips a nominated pod, never got its turn."""
    sim, controller, _ = run(seed_1(gpu_max=1), Strategy.MIGRATE, 70.0, drain_the_new_pods)
    sim_port = SimCluster(sim.world)
    key = "default/text-generator-0"
    hold = controller.steps.retry[RetryKey.hands_off(key)]
    assert hold.attempts >= 1
    live = Live(sim.world.state, sim_port.namespaces(), hold.at - 1.0, sim_port.records())
    policy = controller.relocations.policy(live, sim.world.state.pending(), sim_port.records())
    assert key in policy.skip
    # each roll-back in a row doubles the hands-off, up to the timeout
    first = controller.relocations
    first._hands_off("default/x", 0.0)
    first._hands_off("default/x", 100.0)
    again = controller.steps.retry[RetryKey.hands_off("default/x")]
    assert again.at == 100.0 + 2 * HANDS_OFF and again.attempts == 2


# --- never worse than none, for every strategy (issue 22, item 4) -----------------------------------
SHAPES = {
    "small": {"cpu": "400m", "memory": "1Gi"},
    "cpu-heavy": {"cpu": "1500m", "memory": "2Gi"},
    "memory-heavy": {"cpu": "500m", "memory": "5Gi"},
}
BUDGETS = [None, {"max_unavailable": 1}, {"min_available": "50%"}, {"max_unavailable": 0}]


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    """A CPU group and a GPU group, APIs of varied request shapes (on GPU nodes too) under varied
    budgets, GPU pods that arrive and leave, and the autoscaler's scale-down on."""
    cpu_nodes = draw(st.integers(1, 2))
    gpu_nodes = draw(st.integers(1, 3))
    nodes = [f"cpu-{i}" for i in range(cpu_nodes)] + [f"gpu-{i}" for i in range(gpu_nodes)]
    apis: list[dict[str, Any]] = []
    # what the APIs may take per node (milli-CPU, GiB), leaving a GPU pod's 3 CPUs and 12 GiB possible
    left = {n: [3500, 15] for n in nodes}
    for a in range(draw(st.integers(1, 3))):
        shape = draw(st.sampled_from(sorted(SHAPES)))
        cpu, mem = {"small": (400, 1), "cpu-heavy": (1500, 2), "memory-heavy": (500, 5)}[shape]
        placement = {}
        for n in nodes:
            most = min(3, left[n][0] // cpu, left[n][1] // mem)
            k = draw(st.integers(1 if n == "gpu-0" and a == 0 and most else 0, most))
            left[n][0] -= k * cpu
            left[n][1] -= k * mem
            if k:
                placement[n] = k
        if not placement:
            continue
        w: dict[str, Any] = {
            "name": f"api-{a}",
            "replicas": sum(placement.values()),
            "priority": draw(st.sampled_from([10, 100, 100, 500])),
            "requests": SHAPES[shape],
            "startup_time": "20s",
            "termination_grace": "30s",
            "placement": placement,
        }
        budget = draw(st.sampled_from(BUDGETS))
        if budget is not None:
            w["pdb"] = budget
        apis.append(w)
    first = draw(st.integers(1, gpu_nodes + 1))
    scale = [("1m", first)]
    if draw(st.booleans()):
        scale.append((draw(st.sampled_from(["5m", "12m"])), 0))
    model, events = text_generator(scale)
    return {
        "version": 1,
        "name": "generated",
        "duration": "25m",
        "autoscaler": {"scale_down_unneeded_time": "2m", "scale_down_delay_after_add": "2m"},
        "node_groups": [
            group("cpu", cpu_nodes, cpu_nodes + draw(st.integers(0, 2))),
            group("gpu", gpu_nodes, gpu_nodes + draw(st.integers(0, 1)), gpu=True),
        ],
        "workloads": [*apis, model],
        "events": events,
    }


@pytest.mark.parametrize("strategy", [Strategy.EVICT, Strategy.MIGRATE])
@settings(max_examples=15, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=clusters())
def test_never_fewer_ready_replicas_than_none(strategy: Strategy, data: dict[str, Any]) -> None:
    """Every workload ends with at least as many Ready replicas as under none, whatever the strategy,
    request shapes, budgets and the autoscaler's scale-down."""
    made = run(data, strategy)[2]
    none = run(data, Strategy.NONE)[2]
    for name, w in made["workloads"].items():
        base = none["workloads"][name]
        assert w["ready_at_end"] >= base["ready_at_end"], (strategy, name, w, base, data)


def test_a_pod_its_owner_deleted_mid_relocation_is_routine_and_a_stuck_one_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Roll-backs are logged for operators: one for a waiting pod its owner removed meanwhile (a
    scale-down, a finished task; hundreds in a trace replay) is not a warning; one that gave up is."""

    def scale_down(sim: Simulation) -> None:
        sim.world.scale("text-generator", 0)

    caplog.set_level(logging.INFO, logger="makeroom.controller")
    _, _, made = run(seed_1(gpu_max=2), Strategy.EVICT, 70.0, scale_down)
    assert made["workloads"]["text-generator"]["ready_at_end"] == 0
    (gone,) = [r for r in caplog.records if r.getMessage() == "relocation rolled back"]
    assert gone.levelno == logging.INFO and "is gone" in gone.__dict__["reason"]
    caplog.clear()
    run(seed_1(gpu_max=1), Strategy.MIGRATE, 70.0, drain_the_new_pods)
    stuck = [r for r in caplog.records if r.getMessage() == "relocation rolled back"]
    assert stuck and all(r.levelno == logging.WARNING for r in stuck)
