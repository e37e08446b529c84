"""One broken scenario per rule: each is refused with exit status 2 and a message naming the file, the
key path and what was expected; never a traceback, never a partial result on stdout."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import cli

BROKEN = sorted((Path(__file__).parent / "broken").glob("*.yaml"))


def expectation(path: Path) -> tuple[str, str]:
    head = dict(
        line[2:].split(": ", 1) for line in path.read_text().splitlines()[:2] if line.startswith("# expect")
    )
    return head["expect-path"].strip(), head["expect-message"].strip()


def test_there_is_a_broken_file_per_rule() -> None:
    assert len(BROKEN) >= 25


@pytest.mark.parametrize("path", BROKEN, ids=[p.stem for p in BROKEN])
@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_broken_scenario_is_refused(path: Path, command: str) -> None:
    key_path, message = expectation(path)
    result = cli(command, path)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    prefix = f"makeroom: {path}: {key_path}: " if key_path else f"makeroom: {path}: "
    lines = [line for line in result.stderr.splitlines() if line.startswith(prefix)]
    assert lines, result.stderr
    assert any(message in line for line in lines), result.stderr


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = (BROKEN[0].parent / "min-above-max.yaml").read_text()
    text = text.replace("initial: 1\n  - name: gpu", "initial: 9\n  - name: gpu")  # a second rule broken
    path = tmp_path / "two-problems.yaml"
    path.write_text(text)
    result = cli("simulate", path)
    assert result.exit_code == 2
    assert f"{path}: node_groups[0].min: expected min <= max" in result.stderr
    assert f"{path}: node_groups[0].initial: expected initial <= max" in result.stderr


def test_missing_file_is_exit_2(tmp_path: Path) -> None:
    result = cli("simulate", tmp_path / "nope.yaml")
    assert result.exit_code == 2
    assert "nope.yaml: no such file" in result.stderr


def test_unknown_strategy_option_is_exit_2() -> None:
    from tests.conftest import seed

    result = cli("simulate", seed(1), "--strategy", "magic")
    assert result.exit_code == 2
    assert "--strategy" in result.stderr and "magic" in result.stderr


def test_bad_report_suffix_is_exit_2(tmp_path: Path) -> None:
    from tests.conftest import seed

    result = cli("simulate", seed(1), "--report", tmp_path / "x.pdf")
    assert result.exit_code == 2
    assert "x.pdf" in result.stderr and ".png, .svg or .html" in result.stderr
