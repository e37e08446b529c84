"""The layering of docs/architecture.md: a `layers` contract over every module of the package (cli on
top; bench and report; sim and kube, siblings that never import each other; the file formats; the
controller behind its port; the planner; the pure model at the bottom), and only kube talks to a
Kubernetes client."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
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


def layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["type"] == "layers" and "containers" not in c
    ]
    return [[m.strip() for m in re.split(r"[|:]", layer)] for layer in contract["layers"]]


def test_the_layers_cover_every_module_of_the_package_once() -> None:
    top = {
        f"makeroom.{p.stem}"
        for p in PACKAGE.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }
    listed = [m for layer in layers() for m in layer]
    assert sorted(listed) == sorted(top)


def test_the_architecture_doc_lists_the_layers() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for layer in layers():
        line = " | ".join(f"`{m.removeprefix('makeroom.')}`" for m in layer)
        assert line in doc, f"docs/architecture.md does not show the layer {line}"


def test_every_planner_module_has_its_layer() -> None:
    """The planner's layers contract (pyproject.toml) names every module, so a new one must be put
    in its place, and the contract keeps the planner free of import cycles."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [
        c for c in config["tool"]["importlinter"]["contracts"] if c.get("containers") == ["makeroom.planner"]
    ]
    layered = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
    modules = {p.stem for p in (PACKAGE / "planner").glob("*.py")} - {"__init__"}
    assert modules == layered


def test_the_planner_imports_its_modules_at_the_top() -> None:
    """An import inside a function hides a dependency from the layers (and was how a cycle hid)."""
    offenders = []
    for path in (PACKAGE / "planner").rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom) and (inner.module or "").startswith("makeroom"):
                        offenders.append(f"{path.name}:{inner.lineno}")
    assert offenders == []


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
