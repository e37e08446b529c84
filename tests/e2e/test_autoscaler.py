"""(b) the cluster-autoscaler (kwok provider) adds a node for a pending pod and never goes past max."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest
from makeroom_e2e import ControlPlane

pytestmark = pytest.mark.e2e

SCENARIO = textwrap.dedent(
    """\
    version: 1
    name: e2e-autoscaler-max
    duration: 10m
    node_groups:
      - name: grow
        capacity: {cpu: "2", memory: 4Gi, pods: 110}
        min: 1
        max: 2
        initial: 1
        price_per_hour: 0.1
        provision_time: 20s
    autoscaler: {scan_interval: 10s}
    workloads:
      - name: big
        replicas: 1
        priority: 100
        requests: {cpu: 1500m, memory: 1Gi}
        startup_time: 5s
        termination_grace: 5s
        placement: {grow: 1}
    events:
      - {at: 10s, scale: {workload: big, replicas: 3}}
    """
)


def test_autoscaler_adds_a_node_for_a_pending_pod_and_never_passes_max(
    cp: ControlPlane, tmp_path: Path
) -> None:
    f = tmp_path / "scenario.yaml"
    f.write_text(SCENARIO, encoding="utf-8")
    ls = cp.load_scenario(f, strategy="none", time_scale=0.2)
    try:
        peak = 0

        def two_nodes_and_two_running() -> bool:
            nonlocal peak
            n = cp.nodes_per_group().get("grow", 0)
            peak = max(peak, n)
            assert n <= 2, f"the autoscaler went past max: {n} nodes in group grow"
            return n == 2 and len([p for p in ls.ready_pods("big")]) == 2

        cp.wait_for(two_nodes_and_two_running, 120, "a second node in group grow with two big pods Ready")
        # The third replica stays pending; watch a few scan intervals that no third node comes.
        end = time.monotonic() + 10 * ls.real_seconds(10)
        while time.monotonic() < end:
            n = cp.nodes_per_group().get("grow", 0)
            peak = max(peak, n)
            assert n <= 2, f"the autoscaler went past max: {n} nodes"
            time.sleep(0.5)
        assert peak == 2
        assert ls.nodes_added() == {"grow": 1}
        assert len(ls.ready_pods("big")) == 2
    finally:
        ls.stop()
