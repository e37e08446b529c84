"""docs/security.md's tables of attacks: every row names the test that checks it, and every test it
names exists (a renamed or deleted test would leave a promise nothing checks)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
DOC = ROOT / "docs" / "security.md"
TEST = re.compile(r"`(test_[a-z0-9_]+)`")


def attack_rows() -> list[list[str]]:
    """The rows of the tables whose last column is "checked by"."""
    rows: list[list[str]] = []
    checked_by = False
    for line in DOC.read_text().splitlines():
        if not line.startswith("|"):
            checked_by = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[-1] == "checked by":
            checked_by = True
        elif checked_by and not set(cells[0]) <= {"-", " "}:
            rows.append(cells)
    return rows


def defined_tests() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        found |= set(re.findall(r"^\s*def (test_[a-z0-9_]+)\(", path.read_text(), re.MULTILINE))
    return found


def test_every_attack_names_a_test() -> None:
    rows = attack_rows()
    assert len(rows) >= 20  # both tables: issue 11's and issue 20's
    assert [r[0] for r in rows if not TEST.search(r[-1])] == []


def test_every_test_the_page_names_exists() -> None:
    named = set(TEST.findall(DOC.read_text()))
    assert sorted(named - defined_tests()) == []
