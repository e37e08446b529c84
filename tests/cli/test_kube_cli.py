"""makeroom run / snapshot / plan --kubeconfig / cleanup without the kube extra or a usable cluster: one
clear line, exit 2."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

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


# --- every cluster command fails in one line (issue 21) -----------------------------------------------
CLUSTER_COMMANDS = [
    ["run"],
    ["snapshot", "--write", "out.yaml"],
    ["plan"],
    ["cleanup"],
]


def _stderr_lines(result: Any) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


@pytest.mark.parametrize("module", ["kubernetes", "prometheus_client"])
@pytest.mark.parametrize("command", CLUSTER_COMMANDS, ids=lambda c: c[0])
def test_without_the_kube_extra_one_line_names_it_exit_2(
    command: list[str], module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now fails as if not installed
    kc = tmp_path / "kc"
    kc.write_text(KUBECONFIG.replace("{port}", str(free_port())))
    result = cli(*command, "--kubeconfig", kc)
    assert result.exit_code == 2
    (line,) = _stderr_lines(result)
    assert line.startswith(f"makeroom: makeroom {command[0]}") and "needs the kube extra" in line
    assert f"no module {module}" in line and "pip install 'makeroom[kube]'" in line


def test_without_the_kube_extra_the_real_entry_point_prints_no_traceback(tmp_path: Path) -> None:
    """As after `make demo` (makeroom alone): the installed entry point, in a process of its own whose
    imports of the extra's modules fail."""
    blocked = "import sys; sys.modules['kubernetes'] = None; sys.modules['prometheus_client'] = None; "
    result = subprocess.run(
        [sys.executable, "-c", blocked + "from makeroom.cli.main import main; main()", "run", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "makeroom: makeroom run needs the kube extra (no module kubernetes, prometheus_client): "
        "pip install 'makeroom[kube]'"
    ]


class _Refusing(BaseHTTPRequestHandler):
    """An API server that refuses every credential, as kube-apiserver answers a bad token."""

    def do_GET(self) -> None:
        body = json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": "Unauthorized",
                "code": 401,
            }
        ).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def refusing_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("command", CLUSTER_COMMANDS, ids=lambda c: c[0])
def test_a_refused_credential_is_one_line_exit_2(
    command: list[str], refusing_server: str, tmp_path: Path
) -> None:
    kc = tmp_path / "kc"
    kc.write_text(KUBECONFIG.replace("https://127.0.0.1:{port}", refusing_server))
    result = cli(*command, "--kubeconfig", kc)
    assert result.exit_code == 2
    (line,) = _stderr_lines(result)
    assert line.startswith("makeroom: the API server at ") and "refused the credentials: " in line
    assert "401: Unauthorized" in line


@pytest.mark.parametrize("command", CLUSTER_COMMANDS, ids=lambda c: c[0])
def test_an_unreachable_server_is_one_line_exit_2(command: list[str], tmp_path: Path) -> None:
    kc = tmp_path / "kc"
    kc.write_text(KUBECONFIG.replace("{port}", str(free_port())))
    result = cli(*command, "--kubeconfig", kc)
    assert result.exit_code == 2
    (line,) = _stderr_lines(result)
    assert line.startswith("makeroom: the API server at https://127.0.0.1:") and "does not answer" in line


@pytest.mark.parametrize("command", CLUSTER_COMMANDS, ids=lambda c: c[0])
def test_a_broken_kubeconfig_is_one_line_exit_2(command: list[str], tmp_path: Path) -> None:
    bad = tmp_path / "kc"
    bad.write_text("apiVersion: v1\nkind: Config\nclusters: 3\n")
    result = cli(*command, "--kubeconfig", bad)
    assert result.exit_code == 2
    (line,) = _stderr_lines(result)
    assert line.startswith(f"makeroom: {bad}: ")


def test_run_says_nothing_before_its_one_line_when_the_server_does_not_answer(tmp_path: Path) -> None:
    """`makeroom run` logs JSON from its start: the probe's retries must not show before the error."""
    kc = tmp_path / "kc"
    kc.write_text(KUBECONFIG.replace("{port}", str(free_port())))
    result = subprocess.run(
        [sys.executable, "-m", "makeroom", "run", "--kubeconfig", str(kc)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and "does not answer" in result.stderr, result.stderr
    assert result.stdout == ""
