"""Each strategy name and each Event reason is written once in the source, in its enum; everything
else refers to the enum member. (Words that happen to equal a strategy name but mean something else are
listed with their meaning.)"""

from __future__ import annotations

import ast
from pathlib import Path

import makeroom
from makeroom.controller import Reason, Strategy

PACKAGE = Path(makeroom.__file__).parent

# (module, word): the same text with another meaning.
OTHER_MEANINGS = {
    ("kube/cluster.py", "evict"),  # the name of an API verb in logs and metrics
    ("kube/dryrun.py", "evict"),  # the same verb, recorded by the dry run
    ("report/figure.py", "none"),  # matplotlib's "no colour" and "no font embedding"
    ("cli/plan.py", "none"),  # "new nodes: none" in the plan's summary line
    ("planner/types.py", "none"),  # "placed none" in an objective's words
}


def literals(words: set[str]) -> list[tuple[str, str, int]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = str(path.relative_to(PACKAGE))
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words:
                found.append((module, node.value, node.lineno))
    return found


def test_each_strategy_name_is_written_once() -> None:
    found = [(m, w, n) for m, w, n in literals({s.value for s in Strategy}) if (m, w) not in OTHER_MEANINGS]
    assert sorted(w for _, w, _ in found) == sorted(s.value for s in Strategy)
    assert {m for m, _, _ in found} == {"controller/config.py"}


def test_each_event_reason_is_written_once() -> None:
    found = literals({r.value for r in Reason})
    assert sorted(w for _, w, _ in found) == sorted(r.value for r in Reason)
    assert {m for m, _, _ in found} == {"controller/reasons.py"}
