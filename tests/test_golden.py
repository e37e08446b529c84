"""The JSON contract of spec v1, pinned: `makeroom simulate SEED --strategy S --json` for every bundled
seed under every strategy must print exactly the bytes in ``tests/golden/`` (taken from the code before
the results became typed). A change here is a change to what users and their tests read: it needs a
reason, not a regenerated file.

To take a deliberate change, regenerate with ``MAKEROOM_WRITE_GOLDEN=1 pytest tests/test_golden.py``
and review the diff."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import SEEDS, cli

GOLDEN = Path(__file__).parent / "golden"
STRATEGIES = ("none", "preemption", "evict", "migrate")
CASES = [(path, strategy) for _, path in sorted(SEEDS.items()) for strategy in STRATEGIES]


@pytest.mark.parametrize(("path", "strategy"), CASES, ids=[f"{p.stem}-{s}" for p, s in CASES])
def test_seed_json_is_unchanged(path: Path, strategy: str) -> None:
    result = cli("simulate", path, "--strategy", strategy, "--json")
    pending = bool(json.loads(result.stdout)["pending_at_end"])
    assert result.exit_code == (3 if pending else 0), result.output  # 3: pods still pending at the end
    golden = GOLDEN / f"{path.stem}-{strategy}.json"
    if os.environ.get("MAKEROOM_WRITE_GOLDEN") == "1":
        golden.write_text(result.stdout)
    assert result.stdout == golden.read_text(), f"{golden.name}: the JSON of the seed changed"


def test_every_golden_file_is_checked() -> None:
    expected = {f"{p.stem}-{s}.json" for p, s in CASES}
    assert {p.name for p in GOLDEN.glob("*.json")} == expected
