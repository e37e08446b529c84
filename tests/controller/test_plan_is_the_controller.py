"""`makeroom plan` takes the controller's decision (issue 22, item 1): the same policy from the same
configuration, whichever source gives it (a scenario, the chart's values, a Deployment's arguments),
and the same first decision as the controller in the simulator, on every bundled example and on the
issue's scenario, where the plan now buys the CPU node as the controller does."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from makeroom.cli.run import controller_of_args, controller_of_deployments
from makeroom.controller import ConsolidationConfig, Controller, ControllerConfig, Strategy
from makeroom.controller.policy import plan_policy
from makeroom.controller.records import Records
from makeroom.controller.scope import Scope, Side
from makeroom.controller.sources import config_of_values, scope_of_values
from makeroom.controller.validate import Live
from makeroom.errors import InputError
from makeroom.model import Expander
from makeroom.planner import Plan, Policy, plan
from makeroom.planner.consolidate import Consolidation, consolidate
from makeroom.scenario import parse_scenario
from makeroom.sim import Options, Simulation
from makeroom.sim.runs import attach_controller
from tests.builders.port import FakeCluster
from tests.builders.scenario import EXAMPLES
from tests.builders.state import CPU_NODE, GPU_NODE, StateBuilder
from tests.conftest import cli, cli_json

ISSUE = Path(__file__).parent / "scenarios" / "cheaper-cpu-node.yaml"
CHART_VALUES = Path(__file__).parents[2] / "deploy" / "helm" / "makeroom" / "values.yaml"


# --- one policy ----------------------------------------------------------------------------------------
def waiting_cluster() -> StateBuilder:
    b = StateBuilder([StateBuilder.group("cpu", CPU_NODE, max=3), StateBuilder.group("gpu", GPU_NODE)])
    b.node("cpu")
    b.node("gpu")
    b.fill("iris", {"cpu": "400m", "memory": "1Gi"}, 100, "cpu-0", 5)
    b.fill("iris", {"cpu": "400m", "memory": "1Gi"}, 100, "gpu-0", 5)
    b.fill("batch", {"cpu": "400m", "memory": "1Gi"}, 50, "gpu-0", 2, namespace="jobs")
    pending = b.pod("text-gen", {"cpu": "3", "memory": "12Gi", "nvidia.com/gpu": "1"}, 1000)
    pending.unschedulable_since = 0.0
    return b


CONFIGS = [
    ControllerConfig(),
    ControllerConfig(
        strategy=Strategy.EVICT,
        cooldown=60.0,
        max_moves_in_flight=3,
        autoscaler_expander=Expander.PRIORITY,
        consolidation=ConsolidationConfig(enabled=False),
    ),
    ControllerConfig(autoscaler_expander=Expander.PRICE),
]
SCOPES = [Scope(), Scope(move=Side.of(["default"]))]


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("scope", SCOPES)
def test_the_controller_s_policy_and_plan_s_are_one(config: ControllerConfig, scope: Scope) -> None:
    b = waiting_cluster()
    port = FakeCluster(b.state, time=10.0)
    controller = Controller(port, port, config, scope)
    live = Live(b.state, port.namespaces(), port.now(), port.records())
    theirs = controller.relocations.policy(live, b.state.pending(), Records())
    mine = plan_policy(config, scope, b.state, port.now(), port.namespaces())
    assert theirs == mine
    assert mine.make_before_break is (config.strategy is Strategy.MIGRATE)
    assert mine.expander is config.autoscaler_expander and mine.exact_if_available
    assert ("jobs/batch-0" in mine.pinned) is (scope is SCOPES[1])


def test_the_chart_s_values_and_the_deployment_s_arguments_give_one_config() -> None:
    values: dict[str, Any] = yaml.safe_load(CHART_VALUES.read_text())
    assert config_of_values(values, "values.yaml") == ControllerConfig()  # the chart's defaults
    values["controller"].update({"strategy": "evict", "cooldown": "5m", "maxMoves": 4})
    values["nodeGroups"]["autoscalerExpander"] = "priority,least-waste"
    values["consolidation"]["enabled"] = False
    values["scope"]["move"]["namespaces"] = ["default"]
    # the Deployment's arguments as the chart renders them from these values
    args = ["--strategy=evict", "--interval=2s", "--timeout=15m", "--cooldown=5m", "--max-moves=4"]
    args += ["--no-consolidate", "--autoscaler-expander=priority,least-waste", "--move-namespace=default"]
    deployment = {
        "metadata": {"namespace": "makeroom", "name": "makeroom"},
        "spec": {"template": {"spec": {"containers": [{"name": "makeroom", "args": ["run", *args]}]}}},
    }
    live = controller_of_deployments([deployment])
    assert live is not None and live.source == "the Deployment makeroom/makeroom"
    from_values = config_of_values(values, "values.yaml")
    assert live.config == from_values == controller_of_args(args, "x")[0]
    assert from_values.strategy is Strategy.EVICT and from_values.max_moves_in_flight == 4
    assert live.scope == scope_of_values(values, "values.yaml")
    assert controller_of_deployments([]) is None


def test_values_out_of_range_are_refused_by_their_key_path() -> None:
    with pytest.raises(InputError) as err:
        config_of_values({"controller": {"maxMoves": 0, "strategy": "none"}}, "v.yaml")
    text = str(err.value)
    assert "v.yaml: controller.maxMoves:" in text and "v.yaml: controller.strategy: expected evict or" in text
    result = cli("plan", ISSUE, "--values", str(CHART_VALUES), "--max-moves", "0")
    assert result.exit_code == 2 and "--max-moves" in result.stderr


# --- the same first decision ---------------------------------------------------------------------------
def decision(result: Plan | dict[str, Any]) -> dict[str, Any]:
    data = result.to_json() if isinstance(result, Plan) else result
    return {
        "placements": [(p["pod"], p["node"], p["new_node_group"], p["reason"]) for p in data["placements"]],
        "moves": sorted(
            (m["pod"], m["from_node"], m["to_node"], m["to_new_node_group"]) for m in data["moves"]
        ),
        "scale_ups": data["scale_ups"],
        "unplaceable": [(u["pod"], u["reason"]) for u in data["unplaceable"]],
    }


@dataclass
class First:
    """The controller's first decision in the simulator: when, and its relocation plan or the
    consolidation it found."""

    at: float = -1.0
    plan: Plan | None = None
    consolidation: Consolidation | None = None


def first_decision(path: Path, strategy: Strategy, seed: int, monkeypatch: pytest.MonkeyPatch) -> First:
    scenario = parse_scenario(yaml.safe_load(path.read_text()), str(path))
    sim = Simulation(scenario, Options(strategy=strategy, seed=seed, keep_samples=False))
    first = First()

    def planning(state: Any, policy: Policy, *rest: Any) -> Plan:
        made = plan(state, policy, *rest)
        if first.at < 0:
            first.at, first.plan = sim.world.now, made
        return made

    def consolidating(state: Any, policy: Any) -> Consolidation | None:
        found = consolidate(state, policy)
        if first.at < 0 and found is not None:  # a search that finds nothing decides nothing
            first.at, first.consolidation = sim.world.now, found
        return found

    monkeypatch.setattr("makeroom.controller.relocator.plan", planning)
    monkeypatch.setattr("makeroom.controller.consolidator.consolidate", consolidating)
    attach_controller(sim, scenario.spec.controller_config(strategy))
    sim.run()
    return first


CASES = [
    *[(p, Strategy.MIGRATE, 0) for p in sorted(EXAMPLES.glob("*.yaml"))],
    (ISSUE, Strategy.MIGRATE, 0),
    (ISSUE, Strategy.EVICT, 0),
    (EXAMPLES / "seed-1-relocate.yaml", Strategy.EVICT, 3),
    (EXAMPLES / "seed-3-no-needless-gpu-node.yaml", Strategy.MIGRATE, 7),
]


@pytest.mark.parametrize(("path", "strategy", "seed"), CASES, ids=lambda c: getattr(c, "stem", str(c)))
def test_plan_takes_the_controller_s_first_decision(
    path: Path, strategy: Strategy, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = first_decision(path, strategy, seed, monkeypatch)
    assert first.at >= 0, "the controller never decided anything"
    shown = cli_json("plan", path, "--at", f"{first.at:g}", "--strategy", strategy.value, "--seed", str(seed))
    if first.plan is not None:
        assert decision(shown) == decision(first.plan)
    else:  # nothing waited: the controller started a consolidation, the one plan shows
        found = first.consolidation
        assert found is not None and not shown["unplaceable"]
        assert all(p["reason"] == "fits-now" for p in shown["placements"])
        got = shown["consolidation"]
        assert (got["node"], sorted(m["pod"] for m in got["moves"])) == (
            found.node,
            sorted(s.pod.name for s in found.shifts),
        )


def test_on_the_issue_s_scenario_plan_buys_the_cpu_node_as_the_controller_does() -> None:
    shown = cli_json("plan", ISSUE)
    assert decision(shown)["placements"] == [("model-0", "gpu-0", None, "relocation")]
    assert shown["scale_ups"] == {"cpu": 1} and len(shown["moves"]) == 2
    run = cli("simulate", ISSUE, "--strategy", "migrate", "-o", "json")
    data = yaml.safe_load(run.stdout)
    assert data["node_groups"]["cpu"]["nodes_added"] == 1 and data["node_groups"]["gpu"]["nodes_added"] == 0
    # told the expander least-waste (whose ties may grow a GPU node for a CPU replica), plan keeps
    # the rival caution and buys the GPU node instead
    cautious = cli_json("plan", ISSUE, "--autoscaler-expander", "least-waste")
    assert cautious["scale_ups"] == {"gpu": 1} and cautious["moves"] == []
    assert (
        replace(ControllerConfig(), autoscaler_expander=Expander.PRIORITY).autoscaler_expander == "priority"
    )


def test_plan_says_which_configuration_it_planned_with(tmp_path: Path) -> None:
    """The chart's values win over the scenario's sections, and the flags over both."""
    values: dict[str, Any] = yaml.safe_load(CHART_VALUES.read_text())  # expander least-waste
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    result = cli("plan", ISSUE, "--values", str(path))
    assert result.exit_code == 3
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith(f"planned as the controller would with {path}: strategy migrate, expander least")
    assert "place model-0 on a new gpu node" in result.stdout  # the rival caution of least-waste
    flagged = cli("plan", ISSUE, "--values", str(path), "--autoscaler-expander", "price", "--json")
    data = yaml.safe_load(flagged.stdout)
    assert data["scale_ups"] == {"cpu": 1}  # under price the CPU node is the expander's choice
    assert "expander price" in flagged.stderr


@pytest.mark.parametrize("arg", ["--interval=0s", "--bogus", "--strategy=none"])
def test_a_deployment_s_argument_run_would_refuse_is_named_with_the_deployment(
    arg: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit) as exit_:
        controller_of_args([arg], "the Deployment makeroom/makeroom")
    assert exit_.value.exit_code == 2
    assert capsys.readouterr().err.startswith("makeroom: the Deployment makeroom/makeroom: ")
