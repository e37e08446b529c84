"""Fixtures for the end-to-end tests against a real control plane (see e2e/README.md).

The control plane is session-scoped; each test works in its own labelled namespace and the objects
it made are removed after it. Missing binaries (the cluster-autoscaler among them) FAIL the tests
(run `bash e2e/build.sh`), unless MAKEROOM_E2E=0 is set explicitly.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# The harness lives in e2e/ (pytest `pythonpath = ["e2e"]`); also work when that is not configured.
_E2E_DIR = str(Path(__file__).resolve().parents[2] / "e2e")
if _E2E_DIR not in sys.path:
    sys.path.insert(0, _E2E_DIR)

from makeroom_e2e import ControlPlane, find_binaries, up  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: end-to-end test against a real control plane (e2e/build.sh)")


def _disabled() -> bool:
    return os.environ.get("MAKEROOM_E2E", "1") == "0"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """On a failure, attach the tail of each component's log to the report, and of each `makeroom run`
    the test started (their logs are kept in its tmp_path): CI shows only the report."""
    outcome = yield
    rep = outcome.get_result()  # type: ignore[attr-defined]
    args = getattr(item, "funcargs", {})
    plane = args.get("control_plane") or args.get("cp")
    if rep.failed and isinstance(plane, ControlPlane):
        for name in plane.processes:
            rep.sections.append((f"{name} log (tail)", plane.logs(name, 25)))
    tmp = args.get("tmp_path")
    if rep.failed and isinstance(tmp, Path):
        for log in sorted(tmp.rglob("makeroom*.log")):
            lines = log.read_text(errors="replace").splitlines()
            rep.sections.append((f"{log.name} (tail)", "\n".join(lines[-40:])))


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    if _disabled():
        pytest.skip("MAKEROOM_E2E=0: end-to-end tests disabled explicitly")
    bins = find_binaries()
    missing = bins.missing()
    if missing:
        pytest.fail(
            f"e2e binaries missing in {bins.directory}: {', '.join(missing)}. "
            "Run `bash e2e/build.sh` (or set MAKEROOM_E2E=0 to skip the e2e tests explicitly).",
            pytrace=False,
        )
    t = time.monotonic()
    cp = up()
    print(f"\n[e2e] control plane up in {time.monotonic() - t:.1f}s at {cp.api_url} ({cp.workdir})")
    try:
        yield cp
    finally:
        cp.down()


@pytest.fixture
def cp(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The session's control plane, cleaned of the previous test's objects, and cleaned after."""
    control_plane.check_alive()
    control_plane.reset_between_tests()
    yield control_plane
    control_plane.reset_between_tests()
