"""kubectl's manners: -h, --version, -o json|yaml|table|wide with --json kept, NO_COLOR, one error prefix,
documented exit statuses, help that reads at 80 columns; and a plan a user can trust."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner, Result

from makeroom.cli.app import app
from makeroom.cli.common import ExitStatus, Output, format_or_file
from tests.conftest import cli, seed

COMMANDS = [
    ["simulate"],
    ["compare"],
    ["demo"],
    ["plan"],
    ["run"],
    ["snapshot"],
    ["bench", "sim"],
    ["bench", "plan"],
    ["bench", "fgd"],
    ["trace", "dlrm"],
    ["trace", "gpu"],
]


def cli80(*args: str) -> Result:
    """The command in a terminal 80 columns wide."""
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "80"}, catch_exceptions=False)


def test_version() -> None:
    result = cli("--version")
    assert result.exit_code == 0
    assert result.stdout.startswith("makeroom ") and result.stdout.strip() != "makeroom"


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_help_with_h_reads_at_80_columns(command: list[str]) -> None:
    result = cli80(*command, "-h")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"Usage: makeroom {' '.join(command)}")
    assert [line for line in lines if len(line) > 80] == []
    # every flag's name is printed whole, never cut with an ellipsis
    assert "…" not in result.stdout


def test_root_help_lists_the_exit_statuses() -> None:
    text = " ".join(cli80("-h").stdout.split())
    for status in ExitStatus:
        assert f"{status.value} " in text
    assert "3 pods still pending" in text


def test_o_json_is_the_json_of_the_spec_and_yaml_the_same_data() -> None:
    old = cli("simulate", seed(2), "--strategy", "migrate", "--json")
    new = cli("simulate", seed(2), "--strategy", "migrate", "-o", "json")
    as_yaml = cli("simulate", seed(2), "--strategy", "migrate", "-o", "yaml")
    assert old.exit_code == new.exit_code == as_yaml.exit_code == 0
    assert new.stdout == old.stdout  # byte for byte
    assert yaml.safe_load(as_yaml.stdout) == json.loads(old.stdout)


def test_unknown_format_and_conflicting_flags_are_refused() -> None:
    bad = cli("simulate", seed(1), "-o", "xml")
    assert bad.exit_code == 2
    assert bad.stderr.strip() == "makeroom: -o: expected one of table, wide, json, yaml, got 'xml'"
    both = cli("simulate", seed(1), "-o", "yaml", "--json")
    assert both.exit_code == 2 and both.stderr.startswith("makeroom: --json and -o yaml")


def test_every_error_has_one_prefix(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: x\nduration: 1m\nnode_groups: []\nworkloads: []\n")
    cases = [
        cli("simulate", bad),
        cli("simulate", seed(1), "--strategy", "magic"),
        cli("simulate", seed(1), "--nope"),
        cli("simulate"),
        cli("plan", seed(1), "--at", "soon"),
        cli("compare", seed(1), "--strategies", ","),
    ]
    for result in cases:
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert lines and all(line.startswith("makeroom: ") for line in lines), result.stderr
        assert "Traceback" not in result.output


def test_exit_status_says_whether_pods_are_still_pending() -> None:
    assert cli("simulate", seed(1), "--strategy", "none").exit_code == ExitStatus.PENDING
    assert cli("simulate", seed(1), "--strategy", "migrate").exit_code == ExitStatus.OK
    assert cli("compare", seed(1)).exit_code == ExitStatus.OK  # a strategy places every pod
    assert cli("compare", seed(1), "--strategies", "none").exit_code == ExitStatus.PENDING
    assert cli("plan", seed(1)).exit_code == ExitStatus.PENDING  # the plan says how to place it
    assert cli("plan", seed(1), "--at", "0").exit_code == ExitStatus.OK


def run_makeroom(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "makeroom", *args],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
        timeout=120,
    )


def test_no_color_means_no_styling_at_all() -> None:
    args = ("simulate", str(seed(1)), "--strategy", "migrate")
    styled = run_makeroom(*args, FORCE_COLOR="1", COLUMNS="100")
    assert "\x1b[" in styled.stdout  # the check below can fail
    plain = run_makeroom(*args, FORCE_COLOR="1", NO_COLOR="1", COLUMNS="100")
    assert plain.returncode == 0
    assert "\x1b[" not in plain.stdout and "\x1b[" not in plain.stderr


def test_old_file_flags_still_work_for_one_release(tmp_path: Path) -> None:
    fmt, path = format_or_file(
        str(tmp_path / "out.json"), (Output.TABLE, Output.JSON, Output.YAML), "--write"
    )
    assert (fmt, path) == (Output.TABLE, tmp_path / "out.json")
    assert format_or_file("yaml", (Output.TABLE, Output.YAML), "--write") == (Output.YAML, None)
    assert format_or_file("", (Output.TABLE, Output.YAML), "--write") == (Output.TABLE, None)
    with pytest.raises(typer.Exit) as refused:  # a format, not this command's: no file of that name
        format_or_file("json", (Output.TABLE, Output.YAML), "--write")
    assert refused.value.exit_code == 2


def test_an_old_file_flag_is_checked_before_the_benchmark_runs(tmp_path: Path) -> None:
    result = cli("bench", "plan", "-o", tmp_path / "missing" / "out.json")
    assert result.exit_code == 2 and "expected an existing directory" in result.stderr


# --- plan --------------------------------------------------------------------------------------------


def test_plan_by_default_at_the_first_pending_moment_and_says_so() -> None:
    result = cli("plan", seed(1))
    lines = result.stdout.splitlines()
    assert lines[0].startswith("planning at 1m00s, the first moment a pod is pending (text-generator-0)")
    assert "--at chooses another" in lines[0]
    assert lines[1].startswith("seed-1-relocate at 1m00s: 1 pending pod: 1 placed (1 relocation); 3 moves")
    assert sum(line.strip().startswith("move ") for line in lines) == 3


def test_plan_header_counts_what_follows() -> None:
    result = cli("plan", seed(4))
    lines = result.stdout.splitlines()
    assert "no pod is ever pending" in lines[0]
    assert lines[1] == next(x for x in lines if x.startswith("seed-4-consolidate at 0s: nothing is pending"))
    header = next(x for x in lines if x.startswith("consolidation of gpu-0"))
    assert "5 moves, new nodes: cpu +1, saves $0.36/h" in header
    assert sum(line.strip().startswith("move ") for line in lines) == 5


def test_plan_reasons_do_not_contradict_themselves() -> None:
    text = cli("plan", seed(2)).stdout
    assert "to 1 new node(s) costing $0.17/h" in text
    assert "a new node for it is not possible (every group it may use is at its max)" in text
    assert "no group it may use can grow" not in text


def test_plan_json_stays_data_and_the_note_goes_to_stderr() -> None:
    result = cli("plan", seed(1), "-o", "json")
    data = json.loads(result.stdout)
    assert data["stats"]["pending"] == 1
    assert "planning at 1m00s" in result.stderr


def test_plan_beyond_the_scenario_is_refused() -> None:
    result = cli("plan", seed(1), "--at", "2h")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "makeroom: --at: expected a time within the scenario's 20m00s, got 2h00m"
    )
