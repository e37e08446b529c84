"""The harness leaves no process behind, and can start without chosen components."""

from __future__ import annotations

import os

import pytest
from makeroom_e2e import Components, ControlPlane, find_binaries, up

pytestmark = pytest.mark.e2e


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie still answers kill(0): check its state.
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def test_up_without_some_components_and_down_leaves_no_process(control_plane: ControlPlane) -> None:
    if find_binaries().missing():
        pytest.fail("e2e binaries missing: run `bash e2e/build.sh`", pytrace=False)
    cp = up(components=Components(controller_manager=False, kwok=False, autoscaler=False))
    pids = {n: p.pid for n, p in cp.processes.items()}
    try:
        assert set(pids) == {"etcd", "kube-apiserver", "kube-scheduler"}
        assert cp.core.read_namespace("default").metadata.name == "default"
        assert cp.kubeconfig.exists() and cp.api_url.startswith("https://127.0.0.1:")
    finally:
        cp.down()
    left = [n for n, pid in pids.items() if not _gone(pid)]
    assert not left, f"processes left after down(): {left}"
    assert not cp.workdir.exists(), "the temporary work directory is removed"
