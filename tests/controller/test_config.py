"""One definition of each of the controller's defaults and ranges: the scenario format, the flags of
`makeroom run` and the Helm chart's values all agree with controller/config.py, and out-of-range
values are refused the same way everywhere."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from makeroom.cli import commands  # noqa: F401  (registers the commands)
from makeroom.cli.app import app
from makeroom.controller import ConsolidationConfig, ControllerConfig, Strategy
from makeroom.controller.config import duration_text, knobs, metadata_of
from makeroom.kube.client import ConnectOptions
from makeroom.kube.options import RunOptions
from makeroom.model import parse_duration
from makeroom.scenario.schema import ControllerSpec
from tests.conftest import cli, seed

CHART_VALUES = Path(__file__).parents[2] / "deploy" / "helm" / "makeroom" / "values.yaml"


def run_flags() -> dict[str, Any]:
    """The options of `makeroom run` by their first name (typer's own click types)."""
    command: Any = typer.main.get_command(app)
    return {p.opts[0]: p for p in command.commands["run"].params}


def as_value(default: Any) -> Any:
    """A flag's or a chart value's text as the config holds it."""
    if isinstance(default, str) and default[-1:] in "smh" and default[:1].isdigit():
        return parse_duration(default)
    if default is None or isinstance(default, list):  # a repeated flag, a list of the chart's
        return tuple(default or ())
    return default


def helm_value(path: str) -> Any:
    node: Any = yaml.safe_load(CHART_VALUES.read_text())
    for part in path.split("."):
        node = node[part]
    return node


def test_the_scenario_defaults_are_the_configs() -> None:
    spec = ControllerSpec()
    assert spec.strategy is Strategy.NONE  # spec v1: no controller unless the file asks for one
    assert spec.config(Strategy.MIGRATE) == ControllerConfig()


@pytest.mark.parametrize(("path", "default"), knobs())
def test_each_knob_has_one_default_in_flags_and_chart(path: str, default: Any) -> None:
    meta = metadata_of(path)
    assert meta["doc"], f"{path} is undocumented"
    if meta["flag"] is not None:
        flag = run_flags()[meta["flag"].split("/")[0]]
        assert as_value(flag.default) == default, f"{meta['flag']} defaults to {flag.default!r}"
    if meta["helm"] is not None:
        assert as_value(helm_value(meta["helm"])) == default, f"values.yaml {meta['helm']}"


def test_the_run_options_defaults_are_the_flags_and_the_charts() -> None:
    run, connect, flags = RunOptions(identity=""), ConnectOptions(), run_flags()
    pairs = [
        ("--metrics-port", "metrics.port", run.metrics_port),
        ("--metrics-auth", "metrics.auth", run.metrics_auth),
        ("--nomination", "controller.nomination", run.nomination.value),
        ("--qps", "controller.rateLimit.qps", connect.qps),
        ("--burst", "controller.rateLimit.burst", connect.burst),
        ("--autoscaler-namespace", "nodeGroups.autoscalerNamespace", run.autoscaler_namespace),
        ("--lease-name", "leaderElection.leaseName", run.lease_name),
    ]
    for flag, helm, default in pairs:
        assert flags[flag].default == default, flag
        assert helm_value(helm) == default, helm


def test_durations_print_as_the_flags_write_them() -> None:
    assert [duration_text(s) for s in (2.0, 900.0, 600.0, 1800.0, 3600.0, 90.0, 0.5)] == [
        "2s",
        "15m",
        "10m",
        "30m",
        "1h",
        "90s",
        "0.5s",
    ]


def test_problems_name_each_knob_out_of_range() -> None:
    bad = ControllerConfig(
        interval=0.0,
        timeout=-1.0,
        cooldown=math.inf,
        max_moves_in_flight=0,
        backoff=4.0,
        max_backoff=1.0,
        consolidation=ConsolidationConfig(min_saving=1.5, max_moves=0, window=0.0, wait=math.nan),
    )
    found = {p.path: p.message for p in bad.problems()}
    assert set(found) == {
        "interval",
        "timeout",
        "cooldown",
        "max_moves_in_flight",
        "max_backoff",
        "consolidation.min_saving",
        "consolidation.max_moves",
        "consolidation.window",
        "consolidation.wait",
    }
    assert found["interval"] == "expected a period of at least 0.1s, got 0.0"
    assert found["consolidation.min_saving"] == "expected a share 0 or more and at most 1, got 1.5"
    assert "finite" in found["cooldown"] and "finite" in found["consolidation.wait"]
    assert ControllerConfig().problems() == []


def test_a_strategy_given_as_text_becomes_the_enum() -> None:
    assert ControllerConfig(strategy="evict").strategy is Strategy.EVICT  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ControllerConfig(strategy="teleport")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--interval", "0s"], "--interval"),
        (["--max-moves", "0"], "--max-moves"),
        (["--consolidation-min-saving", "1.5"], "--consolidation-min-saving"),
        (["--consolidation-min-saving", "nan"], "--consolidation-min-saving"),
        (["--max-moves", "-5"], "--max-moves"),
        (["--consolidation-max-moves", "0"], "--consolidation-max-moves"),
        (["--consolidation-window", "0s"], "--consolidation-window"),
        (["--headroom-target", "gpu:0:workload=ml/model"], "--headroom-target"),
        (["--headroom-target", "gpu:2:teleport=x"], "--headroom-target"),
        (["--headroom-target", "gpu:two:workload=ml/model"], "--headroom-target"),
        (["--headroom-max-price", "nan"], "--headroom-max-price"),
        (["--headroom-max-moves-per-hour", "0"], "--headroom-max-moves-per-hour"),
        (["--headroom-cpu-buffer", "-1"], "--headroom-cpu-buffer"),
        (["--headroom-cooldown", "-1s"], "--headroom-cooldown"),
    ],
)
def test_run_refuses_a_knob_out_of_range_naming_its_flag(args: list[str], flag: str) -> None:
    result = cli("run", *args, "--kubeconfig", "/nonexistent")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"makeroom: {flag}: expected"), result.stderr


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        ("interval: 0s", "controller.interval"),
        ("max_moves_in_flight: 0", "controller.max_moves_in_flight"),
        ("consolidation: {min_saving: 2}", "controller.consolidation.min_saving"),
        ("consolidation: {window: 0s}", "controller.consolidation.window"),
        ("cooldown: .inf", "controller.cooldown"),
        ("consolidation: {min_saving: .nan}", "controller.consolidation.min_saving"),
        ("headroom: {max_price_per_hour: -1}", "controller.headroom.max_price_per_hour"),
        ("headroom: {cpu_buffer: 1.5}", "controller.headroom.cpu_buffer"),
        ("headroom: {max_moves_per_hour: 0}", "controller.headroom.max_moves_per_hour"),
    ],
)
def test_a_scenario_knob_out_of_range_is_refused_with_its_key_path(
    edit: str, path: str, tmp_path: Path
) -> None:
    text = seed(1).read_text()
    assert "\ncontroller:" not in text
    target = tmp_path / "knob.yaml"
    target.write_text(text + f"controller: {{strategy: migrate, {edit}}}\n")
    result = cli("simulate", target)
    assert result.exit_code == 2
    assert f"{target}: {path}: expected" in result.stderr, result.stderr


def test_the_scenario_docs_show_the_defaults() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "scenarios.md").read_text()
    durations = {
        "interval",
        "timeout",
        "cooldown",
        "consolidation.window",
        "consolidation.wait",
        "headroom.cooldown",
    }
    for path, default in knobs():
        if path == "headroom.targets":
            continue  # a list, shown by example (docs/scenarios.md, "Headroom")
        if path in ("strategy", "backoff", "max_backoff", "autoscaler_expander", "move_jobs_in"):
            # not controller keys of a scenario (its expander is autoscaler.expander; a simulated run
            # moves no Job pod, as the controller's default)
            continue
        if path in durations:
            text = duration_text(default)
        elif isinstance(default, bool):
            text = str(default).lower()
        else:
            text = str(default)
        assert f"{path.rsplit('.', 1)[-1]}: {text}" in doc, path


def test_the_scope_s_defaults_are_one_in_flags_chart_and_code() -> None:
    from makeroom.controller.scope import DEFAULT_SELECTOR, Scope

    flags = run_flags()
    for side, prefix in (("roomFor", "--room-for"), ("move", "--move")):
        assert flags[f"{prefix}-namespace-selector"].default == DEFAULT_SELECTOR
        assert helm_value(f"scope.{side}.namespaceSelector") == DEFAULT_SELECTOR
        assert (
            helm_value(f"scope.{side}.namespaces") == [] and helm_value(f"scope.{side}.priorityClasses") == []
        )
    assert Scope().room_for.selector.text == Scope().move.selector.text == DEFAULT_SELECTOR
    assert flags["--records-namespace"].default == RunOptions(identity="").records_namespace


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--room-for-namespace-selector", "team in ()"], "--room-for-namespace-selector"),
        (["--move-namespace-selector", "a in (b"], "--move-namespace-selector"),
    ],
)
def test_run_refuses_a_selector_it_cannot_read_naming_its_flag(args: list[str], flag: str) -> None:
    result = cli("run", *args, "--kubeconfig", "/nonexistent")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"makeroom: {flag}: "), result.stderr


def test_the_chart_s_headroom_values_reach_the_controller(tmp_path: Path) -> None:
    from makeroom.cli.run import controller_of_args
    from makeroom.controller.config import HeadroomConfig, RoomTarget

    args = [
        "--strategy=headroom",
        "--headroom-target=gpu:2:workload=ml/model",
        "--headroom-target=gpu:1:priority-class=api-critical",
        "--headroom-max-price=0.5",
        "--headroom-cooldown=10m",
        "--headroom-cpu-buffer=3",
    ]
    config, _ = controller_of_args(args, "deployment makeroom")
    assert config.strategy is Strategy.HEADROOM
    assert config.headroom == HeadroomConfig(
        targets=(
            RoomTarget("gpu", 2, workload="ml/model"),
            RoomTarget("gpu", 1, priority_class="api-critical"),
        ),
        max_price_per_hour=0.5,
        cooldown=600.0,
        cpu_buffer=3,
    )


def test_a_headroom_target_out_of_range_is_named() -> None:
    from makeroom.controller.config import HeadroomConfig, RoomTarget

    bad = HeadroomConfig(targets=(RoomTarget("gpu", 0, workload="m"), RoomTarget("gpu", 1)))
    found = [(p.path, p.message) for p in ControllerConfig(headroom=bad).problems()]
    assert found == [
        ("headroom.targets", "[0].count: expected a number of pods from 1 to 150000, got 0"),
        ("headroom.targets", "[1].for: expected exactly one of priority_class, workload, requests"),
    ]
    good = HeadroomConfig(targets=(RoomTarget("gpu", 2, priority_class="api-critical"),))
    assert ControllerConfig(headroom=good).problems() == []
