"""makeroom run / snapshot / plan --kubeconfig without a usable cluster: a clear message, exit 2."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.conftest import cli

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("command", [["run"], ["snapshot", "--write", "out.yaml"], ["plan"]])
def test_missing_kubeconfig_exits_2(command: list[str], tmp_path: Path) -> None:
    result = cli(*command, "--kubeconfig", tmp_path / "nope")
    assert result.exit_code == 2
    assert "no such file" in result.output and "Traceback" not in result.output


def test_broken_kubeconfig_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "kc"
    bad.write_text("apiVersion: v1\nkind: Config\nclusters: 3\n")
    result = cli("snapshot", "--write", tmp_path / "o.yaml", "--kubeconfig", bad)
    assert result.exit_code == 2 and "makeroom:" in result.output


def test_unreachable_api_server_exits_2(tmp_path: Path) -> None:
    kc = tmp_path / "kc"
    kc.write_text(KUBECONFIG.replace("{port}", str(free_port())))
    result = cli("plan", "--kubeconfig", kc)
    assert result.exit_code == 2
    assert "does not answer" in result.output and "Traceback" not in result.output


def test_unknown_strategy_exits_2(tmp_path: Path) -> None:
    assert cli("run", "--strategy", "teleport").exit_code == 2


def test_plan_needs_a_file_or_a_kubeconfig() -> None:
    result = cli("plan")
    assert result.exit_code == 2 and "--kubeconfig" in result.output
