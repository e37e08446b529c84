"""Subprocesses in their own process groups, killed as a group on stop, at exit and on signals."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

_LIVE: dict[int, Process] = {}
_LOCK = threading.Lock()
_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (loopback only)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_parent() -> None:
    # In the child, before exec: receive SIGKILL if the parent thread dies (Linux only).
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def kill_group(pgid: int, grace: float = 5.0) -> None:
    """SIGTERM the process group, then SIGKILL it if anything is left after `grace` seconds."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


class ComponentDiedError(RuntimeError):
    """A component process exited; polling stops at once."""


class Process:
    """One component: its command, log file and process group."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: dict[str, str] | None = None,
        detach: bool = False,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self._log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            preexec_fn=None if detach else _die_with_parent,  # noqa: PLW1509
        )
        self.pid = self.popen.pid
        if not detach:
            with _LOCK:
                _LIVE[self.pid] = self

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the group, reap the leader within `grace`, then SIGKILL whatever is left of the group."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=grace)
        with _LOCK:
            _LIVE.pop(self.pid, None)
        with contextlib.suppress(Exception):
            self._log.close()

    def tail(self, lines: int = 30) -> str:
        try:
            data = self.log_path.read_bytes()[-20000:].decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(data.splitlines()[-lines:])


def stop_all() -> None:
    with _LOCK:
        procs = list(_LIVE.values())
    for p in reversed(procs):
        p.stop(grace=2.0)


atexit.register(stop_all)


def _on_signal(signum: int, _frame: object) -> None:
    stop_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install_signal_handlers() -> None:
    """Stop every component on SIGTERM/SIGHUP too (atexit does not run on signals)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _on_signal)


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    interval: float = 0.2,
    on_timeout: Callable[[], str] | None = None,
) -> None:
    """Poll `check` until it is true, or raise TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except ComponentDiedError:
            raise
        except Exception as exc:
            last_exc = exc
        time.sleep(interval)
    extra = f"; last error: {last_exc!r}" if last_exc else ""
    detail = f"\n{on_timeout()}" if on_timeout else ""
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{extra}{detail}")
