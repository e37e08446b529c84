"""The controller says, once, why it moves nothing for a pod whose constraint by zone needs a new node
of a group whose template gives no zone (issue 19): an Event NewNodeZoneUnknown on the pod, a warning,
and the pod in the round's report (makeroom_relocation_zone_unknown_pods_total)."""

from __future__ import annotations

import logging

import pytest

from makeroom.controller import Controller, ControllerConfig, Reason, Strategy
from makeroom.model import ZONE_LABEL, LabelSelector, PodSpec, Resources, TopologySpreadConstraint
from tests.builders.port import FakeCluster
from tests.builders.state import CPU_NODE, StateBuilder

SPREAD = TopologySpreadConstraint(1, ZONE_LABEL, label_selector=LabelSelector((("app", "web"),)))


def cluster() -> FakeCluster:
    """Two full CPU nodes in zones a and b, whose pods may not move for the waiting pod."""
    b = StateBuilder([StateBuilder.group("cpu", CPU_NODE, max=5)])
    for zone in ("a", "b"):
        node = b.node("cpu", labels={ZONE_LABEL: zone})
        b.fill("busy", {"cpu": "3500m"}, 1000, node, 1)
    spec = PodSpec(Resources.parse({"cpu": "1"}), 1000, topology_spread=(SPREAD,))
    web = b.pod("web", {}, 1000, spec=spec, labels={"app": "web"})
    web.unschedulable_since = 0.0
    return FakeCluster(b.state, time=10.0)


def test_the_pod_is_told_once_why_nothing_moves(caplog: pytest.LogCaptureFixture) -> None:
    port = cluster()
    controller = Controller(port, port, ControllerConfig(strategy=Strategy.EVICT))
    said: list[str] = []
    with caplog.at_level(logging.WARNING, logger="makeroom.controller"):
        for _ in range(5):
            report = controller.tick()
            said += report.zone_unknown
            assert report.started == []
            port.time += 120.0
    assert said == ["default/web-0"]
    (event,) = [e for e in port.events if e[2] is Reason.ZONE_UNKNOWN]
    assert event[1] == "default/web-0"
    assert "topology spread on topology.kubernetes.io/zone, maxSkew 1 needs a new cpu node" in event[3]
    assert "zones a, b" in event[3]
    assert [r.getMessage() for r in caplog.records].count("no relocation: a new node's zone is unknown") == 1
    assert not [c for c in port.calls if c[0] == "evict"]
