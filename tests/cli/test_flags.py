"""Flags go through the same rules as files: `makeroom run` refuses a timeout that is not finite, an
interval of zero, no moves, a port out of range or in use, an address that is none; `simulate
--report` a path it cannot write; `plan --at` a time that is not finite. Exit 2, one line naming
the flag, before anything starts; never a traceback."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import makeroom.cli.run
from makeroom.controller import ControllerConfig
from makeroom.kube.client import Api, RateLimiter
from makeroom.kube.runner import Runner
from makeroom.model import Expander
from tests.conftest import cli, seed
from tests.kube.fake import FakeApiServer


@pytest.fixture(autouse=True)
def own_logging() -> Iterator[None]:
    """`run` sets up JSON logging on the root logger: put it back for the tests after these."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def fake_cluster(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """`run` connects to an in-memory API server, and its loop returns at once (counted)."""
    api = Api(FakeApiServer(), RateLimiter(0, 1), sleep=lambda s: None)
    monkeypatch.setattr(makeroom.cli.run, "connect_or_exit", lambda *a, **k: (api, "fake"))
    started: list[int] = []

    def run(self: Runner) -> int:
        started.append(1)
        return 0

    monkeypatch.setattr(Runner, "run", run)
    return started


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--timeout=inf"], "--timeout: expected a finite duration"),
        (["--timeout=nan"], "--timeout: expected a finite duration"),
        (["--timeout=0s"], "--timeout: expected a duration of more than 0"),
        (["--interval=0s"], "--interval: expected a period of at least 0.1s"),
        (["--interval=1e999999999"], "--interval: expected a finite duration"),
        (["--cooldown=-5m"], "--cooldown: expected a duration such as"),
        (["--max-moves=0"], "--max-moves: expected a number of pods from 1 to"),
        (["--consolidation-min-saving=nan"], "--consolidation-min-saving: expected a finite number"),
        (["--consolidation-max-moves=0"], "--consolidation-max-moves: expected a number of pods from 1"),
        (["--consolidation-window=0s"], "--consolidation-window: expected a duration of more than 0"),
        (["--metrics-port=99999"], "--metrics-port: expected a port from 0 to 65535"),
        (["--metrics-port=-1"], "--metrics-port: expected a port from 0 to 65535"),
        (["--metrics-host=not-an-ip"], "--metrics-host: expected an IP address"),
        (["--qps=inf"], "--qps: expected a finite number"),
        (["--burst=0"], "--burst: expected a whole number from 1"),
        (["--log-level=loud"], "--log-level: expected one of debug, info, warning, error"),
        (["--autoscaler-expander=cheapest"], "--autoscaler-expander: expected one of least-waste, priority"),
        (["--autoscaler-expander="], "--autoscaler-expander: expected one of least-waste, priority"),
    ],
)
def test_run_refuses_a_bad_flag_before_it_starts(
    fake_cluster: list[int], flags: list[str], line: str
) -> None:
    result = cli("run", *flags)
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"makeroom: {line}"), result.stderr
    assert fake_cluster == []


@pytest.mark.parametrize(
    ("flag", "decides"),
    [("priority,least-waste", Expander.PRIORITY), ("most-pods", Expander.MOST_PODS), ("grpc", Expander.GRPC)],
)
def test_run_reads_the_autoscalers_expander_chain_by_its_first(
    monkeypatch: pytest.MonkeyPatch, fake_cluster: list[int], flag: str, decides: Expander
) -> None:
    seen: list[ControllerConfig] = []
    real = Runner.__init__

    def init(self: Runner, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        seen.append(self.opts.config)

    monkeypatch.setattr(Runner, "__init__", init)
    result = cli("run", f"--autoscaler-expander={flag}")
    assert result.exit_code == 0, result.output
    assert [c.autoscaler_expander for c in seen] == [decides]


def test_run_takes_good_flags(fake_cluster: list[int]) -> None:
    result = cli(
        "run", "--timeout=15m", "--interval=500ms", "--max-moves=1", "--metrics-host=::1", "--metrics-port=0"
    )
    assert result.exit_code == 0, result.output
    assert fake_cluster == [1]


def test_a_metrics_port_in_use_is_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Api(FakeApiServer(), RateLimiter(0, 1), sleep=lambda s: None)
    monkeypatch.setattr(makeroom.cli.run, "connect_or_exit", lambda *a, **k: (api, "fake"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli("run", "--no-leader-elect", "--metrics-host=127.0.0.1", f"--metrics-port={port}")
    assert result.exit_code == 2, result.output
    last = result.stderr.strip().splitlines()[-1]  # after the JSON log line "starting"
    assert last.startswith(f"makeroom: --metrics-port: cannot listen on 127.0.0.1:{port}: "), result.stderr


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_a_report_that_cannot_be_written_is_refused(command: str, tmp_path: Path) -> None:
    for target, message in (
        (tmp_path / "missing" / "run.html", "expected an existing directory"),
        (tmp_path, "expected a report path ending in .png, .svg or .html"),
        (Path("/proc/makeroom-report.png"), "cannot write"),
    ):
        result = cli(command, seed(1), "--report", target)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"makeroom: {target}: ") and message in result.stderr, result.stderr
        assert "Traceback" not in result.output
    directory = tmp_path / "dir.png"
    directory.mkdir()
    result = cli(command, seed(1), "--report", directory)
    assert result.exit_code == 2 and "found a directory" in result.stderr


def test_plan_at_must_be_finite() -> None:
    for at in ("inf", "nan", "1e999999999", "9999999999999h"):
        result = cli("plan", seed(1), "--at", at)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("makeroom: --at: expected"), result.output


def test_bench_sim_hours_must_be_finite_and_at_most_a_year() -> None:
    for hours in ("inf", "1e9", "1e999"):
        result = cli("bench", "sim", "--hours", hours)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("makeroom: --hours: expected"), result.output


@pytest.mark.parametrize("command", [("bench", "sim", "--quick"), ("bench", "plan", "--quick")])
def test_a_bench_result_that_cannot_be_written_is_refused_before_the_runs(
    command: tuple[str, ...], tmp_path: Path
) -> None:
    for how in (("--write",), ("-o",)):
        target = tmp_path / "missing" / "bench.json"
        result = cli(*command, *how, target)
        assert result.exit_code == 2, result.output
        assert f"makeroom: {target}: expected an existing directory" in result.stderr
        assert "Traceback" not in result.output
