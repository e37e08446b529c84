"""(a) kube-scheduler preemption on KWOK nodes: a high-priority pod preempts a low-priority one."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from makeroom_e2e import ControlPlane
from makeroom_e2e.cluster import E2E_LABEL

pytestmark = pytest.mark.e2e


def _pod(name: str, priority_class: str, cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": {"pod-ready.stage.kwok.x-k8s.io/delay": "200ms"}},
        "spec": {
            "priorityClassName": priority_class,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "main", "image": "registry.invalid/fake:1", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


def test_high_priority_pod_preempts_low_priority_pod_and_binds(cp: ControlPlane) -> None:
    cp.configure_scheduler(preemption=True)
    ns = f"e2e-preempt-{uuid.uuid4().hex[:6]}"
    cp.core.create_namespace({"metadata": {"name": ns, "labels": {E2E_LABEL: "true"}}})
    for name, value in (("e2e-low", 10), ("e2e-high", 1000)):
        cp.scheduling.create_priority_class(
            {
                "metadata": {"name": name, "labels": {E2E_LABEL: "true"}},
                "value": value,
                "preemptionPolicy": "PreemptLowerPriority",
            }
        )
    cp.create_node("solo-0", group="solo", capacity={"cpu": "2", "memory": "4Gi", "pods": "10"})
    cp.wait_nodes_ready(["solo-0"])

    cp.core.create_namespaced_pod(ns, _pod("low", "e2e-low", "1500m"))

    def running(name: str) -> bool:
        p = cp.core.read_namespaced_pod(name, ns)
        return bool(p.spec.node_name == "solo-0" and p.status.phase == "Running")

    cp.wait_for(lambda: running("low"), 60, "low-priority pod running on solo-0")

    cp.core.create_namespaced_pod(ns, _pod("high", "e2e-high", "1500m"))
    cp.wait_for(lambda: running("high"), 60, "high-priority pod bound and running on solo-0")

    names = {p.metadata.name for p in cp.list_pods(ns)}
    assert "low" not in names, "the low-priority victim is gone"
    preempted = [e for e in cp.events(ns, reason="Preempted") if e.involved_object.name == "low"]
    assert preempted, "the scheduler recorded a Preempted event on the victim"
    assert cp.core.read_namespaced_pod("high", ns).spec.node_name == "solo-0"
