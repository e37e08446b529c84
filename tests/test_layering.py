"""The layering of design.md: model and planner pure, controller behind its port, sim and kube
siblings that never import each other, and only kube talks to a Kubernetes client."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import makeroom

PACKAGE = Path(makeroom.__file__).parent
ROOT = PACKAGE.parent.parent


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_import_linter_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint), str(ROOT / "pyproject.toml")],
        cwd=ROOT / "src",
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" not in result.stdout.lower().replace("0 broken", "")


def test_only_kube_imports_a_kubernetes_client() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.is_relative_to(PACKAGE / "kube"):
            continue
        if any(m == "kubernetes" or m.startswith("kubernetes.") for m in imports_of(path)):
            offenders.append(str(path.relative_to(PACKAGE)))
    assert offenders == []


def test_model_and_planner_do_no_io() -> None:
    forbidden = {"os", "subprocess", "socket", "time", "datetime", "random", "pathlib", "yaml"}
    offenders = []
    for layer in ("model", "planner"):
        for path in (PACKAGE / layer).rglob("*.py"):
            bad = {m.split(".")[0] for m in imports_of(path)} & forbidden
            if bad:
                offenders.append(f"{path.relative_to(PACKAGE)}: {sorted(bad)}")
    assert offenders == []
