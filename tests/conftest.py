"""Shared helpers: the CLI runner and the bundled seed scenarios (the builders are in tests/builders)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from makeroom.cli import commands  # noqa: F401  (registers every command on the app)
from makeroom.cli.app import app
from tests.builders.scenario import EXAMPLES

SEEDS = {int(p.name.split("-")[1]): p for p in EXAMPLES.glob("seed-*.yaml")}


def seed(n: int) -> Path:
    return SEEDS[n]


def cli(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def cli_json(*args: str | Path) -> Any:
    """The JSON a command prints; its exit status is 0, or 3 when pods are (still) pending."""
    result = cli(*args, "--json")
    assert result.exit_code in (0, 3), result.output
    return json.loads(result.stdout)


@pytest.fixture
def tmp_scenario(tmp_path: Path) -> Any:
    def write(text: str, name: str = "scenario.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write
