"""Headroom on a live cluster, against the in-memory API server: a GPU workload scaled to zero has no
pods, and its Deployment's template is all that says what room to keep. Before the burst (the point
of headroom), the keeper must see that shape and start its move, as it does in the simulator."""

from __future__ import annotations

import copy
from typing import Any

from makeroom.controller import Controller, ControllerConfig, Strategy
from makeroom.controller.config import HeadroomConfig, RoomTarget
from makeroom.kube.slim import SLIMMERS, Interner
from makeroom.planner.keep_room import KeepPolicy, Wanted, keep_room
from makeroom.snapshot import state_from_objects
from tests.builders.kube import NS, namespace, node, pod, pod_path
from tests.kube.test_store import DEPLOYMENT, MINE, RS, cluster_objects, kube

MODEL = f"{NS}/text-model"


def _model(replicas: int = 0) -> dict[str, Any]:
    """A GPU Deployment as the API server returns it: its pods' shape only in the template."""
    container = {
        "name": "m",
        "image": "x",
        "resources": {"requests": {"cpu": "6", "memory": "4Gi", "nvidia.com/gpu": "1"}},
    }
    return {
        "kind": "Deployment",
        "metadata": {"name": "text-model", "namespace": NS, "uid": "m-uid", "managedFields": [{}]},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "text-model"}},
            "template": {
                "metadata": {"labels": {"app": "text-model"}},
                "spec": {
                    "containers": [container],
                    "priorityClassName": "api-critical",
                    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                },
            },
        },
    }


def _gpu_node() -> dict[str, Any]:
    g = node("g1", "gpu", cpu="8")
    g["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    return g


def _burst_ahead() -> Any:
    """A CPU node with room for one more replica of web; web's three replicas on the GPU node leave
    5 of its 8 CPUs, one short of a text-model pod (6)."""
    server = cluster_objects()
    del server.objects[pod_path("p")]  # nothing waits: the keeper's turn
    server.put("/api/v1/nodes/g1", _gpu_node())
    for name in ("a", "b", "c"):
        server.put(pod_path(name), pod(name, "g1"))
    server.put(pod_path("d"), pod("d", "n1", cpu="3"))
    web = copy.deepcopy(server.objects[DEPLOYMENT])
    web["spec"]["replicas"] = 4
    server.put(DEPLOYMENT, web)
    server.put(f"/apis/apps/v1/namespaces/{NS}/deployments/text-model", _model())
    assert RS in server.objects
    return server


def test_a_deployment_scaled_to_zero_is_a_workload_of_its_template_s_shape() -> None:
    full = [_gpu_node(), _model()]
    interner = Interner()
    slim = [SLIMMERS[o["kind"]](o, interner) for o in full]
    for objects in (full, slim):  # a snapshot's files, and the watch cache's slim objects
        state = state_from_objects([o for o in objects if o is not None], unknown_groups=[])
        w = state.workloads[MODEL]
        assert w.replicas == 0 and w.namespace == NS
        assert w.spec.requests.requests_gpu() and w.spec.requests["cpu"] == 6000
        assert w.spec.priority_class == "api-critical" and w.spec.tolerations
        assert not state.pods
    # A template's priority is not the class's (admission resolves that for pods): a tenant's number
    # here is ignored, so it cannot steer headroom's default target.
    lying = _model()
    lying["spec"]["template"]["spec"]["priority"] = 2_000_000_000
    assert state_from_objects([_gpu_node(), lying], unknown_groups=[]).workloads[MODEL].spec.priority == 0


def test_a_bad_template_leaves_the_workload_out_not_the_snapshot() -> None:
    bad = _model()
    bad["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    skipped: list[Any] = []
    state = state_from_objects([_gpu_node(), bad], unknown_groups=[], skipped=skipped)
    assert MODEL not in state.workloads
    assert any("spec.template" in p.path for p in skipped), skipped


def test_the_live_keeper_counts_a_workload_without_pods_and_moves_ahead_of_its_burst() -> None:
    server = _burst_ahead()
    server.put(*namespace())
    kc = kube(server)
    state = kc.snapshot()
    short = keep_room(state, Wanted("gpu.text-model", "gpu", 1, workload=MODEL), KeepPolicy())
    assert (short.count.wanted, short.count.free, short.count.possible) == (1, 0, 1), short
    assert short.move is not None and len(short.move.shifts) == 1

    target = RoomTarget("gpu", 1, workload=MODEL)
    config = ControllerConfig(strategy=Strategy.HEADROOM, headroom=HeadroomConfig(targets=(target,)))
    controller = Controller(kc, _Clock(1_767_226_000.0), config)
    report = controller.tick()
    assert report.errors == 0, report
    records = kc.records()
    assert set(records.keepings) == {target.name}, records
    keeping = records.keepings[target.name]
    assert keeping is not None and {v.node for v in keeping.victims} == {"g1"}
    kept = records.headroom[target.name]
    assert kept is not None and kept.state == "moving" and kept.whom == MODEL
    assert f"/apis/makeroom.io/v1alpha1/namespaces/{MINE}/keepings/{target.name}" in server.objects


class _Clock:
    def __init__(self, now: float) -> None:
        self.t = now

    def now(self) -> float:
        return self.t
