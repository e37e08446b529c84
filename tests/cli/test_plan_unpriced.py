"""`makeroom plan` says once when consolidation cannot start because no node group has a price (issue
21): otherwise it would show nothing, as if there were nothing to save."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

import makeroom.examples
from makeroom.controller.reasons import UNPRICED
from tests.conftest import cli

SEED_4 = Path(makeroom.examples.__file__).parent / "seed-4-consolidate.yaml"


def unpriced_seed_4(tmp_path: Path) -> Path:
    data = yaml.safe_load(SEED_4.read_text())
    for g in data["node_groups"]:
        g["price_per_hour"] = 0  # a scenario must say so (issue 25); a cluster's groups file may not
    path = tmp_path / "seed-4-unpriced.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_plan_says_once_that_consolidation_without_prices_never_starts(tmp_path: Path) -> None:
    result = cli("plan", unpriced_seed_4(tmp_path))
    assert result.stdout.splitlines().count(UNPRICED) == 1
    assert "consolidation of" not in result.stdout
    as_json = cli("plan", unpriced_seed_4(tmp_path), "-o", "json")
    assert json.loads(as_json.stdout)["consolidation"] is None  # stdout stays the plan object
    assert UNPRICED in as_json.stderr


def test_plan_with_prices_or_without_consolidation_says_nothing_of_it(tmp_path: Path) -> None:
    assert UNPRICED not in cli("plan", SEED_4).output
    assert UNPRICED not in cli("plan", unpriced_seed_4(tmp_path), "--no-consolidate").output
