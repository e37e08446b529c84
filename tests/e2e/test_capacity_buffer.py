"""makeroom's kube adapter keeps a CapacityBuffer for the CPU group on the real API server (as the chart's
ServiceAccount, with ``capacityBuffers.enabled``), and the real cluster-autoscaler, run with its
CapacityBuffer controller (and, in a second case, real Karpenter with its CapacityBuffer gate), adds a
CPU node for it (never past the group's max, never a node of the other group, where the buffer's pods
would have fitted), keeps it while the buffer stands, and scales it down once makeroom removes the
buffer; the cleanup's listing works with the chart's permissions."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from makeroom_e2e import ControlPlane
from makeroom_e2e import karpenter as kp
from makeroom_e2e.makeroom_run import installed_chart
from makeroom_e2e.scenario import LoadedScenario

from makeroom.controller.port import BuffersUnavailableError
from makeroom.kube import buffers
from makeroom.kube.cache import Cache
from makeroom.kube.client import ConnectOptions, connect
from makeroom.kube.cluster import KubeCluster
from makeroom.model import Resources

pytestmark = pytest.mark.e2e


def filler(group: str, cpu: str) -> str:
    """A pod of ``cpu`` pinned to ``group``'s first node, as a scenario's workload entry."""
    return f"""\
  - name: {group}-filler
    replicas: 1
    priority: 100
    requests: {{cpu: "{cpu}", memory: 1Gi}}
    node_selector: {{makeroom.io/group: {group}}}
    startup_time: 5s
    termination_grace: 5s
    placement: {{{group}: 1}}
"""


SCENARIO = textwrap.dedent(
    """\
        version: 1
        name: e2e-capacity-buffer
        duration: 10m
        node_groups:
          - name: cpu
            capacity: {cpu: "4", memory: 16Gi, pods: 110}
            min: 1
            max: 2
            initial: 1
            price_per_hour: 0.2
            provision_time: 20s
          - name: gpu
            capacity: {cpu: "8", memory: 32Gi, pods: 110, nvidia.com/gpu: 1}
            min: 1
            max: 2
            initial: 1
            price_per_hour: 1.0
            provision_time: 20s
        autoscaler:
          scan_interval: 10s
          scale_down_unneeded_time: 60s
          scale_down_delay_after_add: 60s
        workloads:
        """
) + filler("cpu", "3")
# gpu-0 carries a pod: Karpenter consolidates an empty node at once.
KARPENTER = (
    textwrap.dedent(
        """\
        version: 1
        name: e2e-capacity-buffer-karpenter
        duration: 10m
        autoscaler:
          kind: karpenter
        node_groups:
          - name: cpu
            instance_types:
              - {name: cpu-4x, capacity: {cpu: "4", memory: 16Gi, pods: 110}, price_per_hour: 0.2}
            min: 1
            max: 2
            initial: 1
            provision_time: 20s
            disruption: {consolidation_policy: WhenEmpty}
          - name: gpu
            instance_types:
              - name: gpu-8x
                capacity: {cpu: "8", memory: 32Gi, pods: 110, nvidia.com/gpu: 1}
                price_per_hour: 1.0
            min: 1
            max: 2
            initial: 1
            provision_time: 20s
            disruption: {consolidation_policy: WhenEmpty}
        workloads:
        """
    )
    + filler("cpu", "3")
    + filler("gpu", "1")
)
ROOM = Resources.parse({"cpu": "2", "memory": "1Gi"})


def buffer_object(cp: ControlPlane, namespace: str) -> dict[str, Any] | None:
    from kubernetes import client  # type: ignore[import-untyped,unused-ignore]

    try:
        found: Any = client.CustomObjectsApi(cp.api).get_namespaced_custom_object(
            buffers.GROUP, buffers.VERSION, namespace, buffers.PLURAL, buffers.object_name("cpu")
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return cast(dict[str, Any], found)


def conditions(buffer: dict[str, Any] | None) -> dict[str, str]:
    status = (buffer or {}).get("status") or {}
    return {c["type"]: c["status"] for c in status.get("conditions") or []}


def keeps_a_node_and_lets_it_go(
    cp: ControlPlane,
    ls: LoadedScenario,
    pods: int,
    kept_s: float,
    after_removal: Callable[[], None] = lambda: None,
) -> None:
    """A buffer of ``pods`` pods of 2 CPUs through makeroom's adapter, as the chart's ServiceAccount:
    none fits in cpu-0's last CPU, all would on gpu-0, which the template's affinity rules out; one new
    CPU node holds two, a third would pass the group's max. The node is kept for ``kept_s`` seconds
    while the buffer stands, and goes once makeroom removes the buffer."""
    with installed_chart(cp, {"capacityBuffers": {"enabled": True}}) as inst:
        api, _ = connect(ConnectOptions(kubeconfig=str(cp.kubeconfig), impersonate=inst.user))
        cache = Cache(api)
        cache.informers["Node"].relist()
        kc = KubeCluster(api, cache, records_namespace=inst.namespace)
        # Outside its own namespace the chart grants nothing: the keeper hears "unavailable".
        with pytest.raises(BuffersUnavailableError):
            KubeCluster(api, cache, records_namespace="default").keep_buffer("cpu", ROOM, 1)

        assert cp.nodes_per_group() == {"cpu": 1, "gpu": 1}
        kc.keep_buffer("cpu", ROOM, pods)
        kc.keep_buffer("cpu", ROOM, pods)  # the keeper asks every round: no change

        peak: dict[str, int] = {}

        def watch() -> dict[str, int]:
            now = cp.nodes_per_group()
            for g, n in now.items():
                peak[g] = max(peak.get(g, 0), n)
            assert now.get("cpu", 0) <= 2, f"the autoscaler went past the CPU group's max: {now}"
            assert now.get("gpu", 0) == 1, f"a GPU node for CPU room: {now}"
            return now

        cp.wait_for(lambda: watch().get("cpu") == 2, 90, "a second CPU node for the buffer")
        provisioning = conditions(buffer_object(cp, inst.namespace))
        assert provisioning.get("ReadyForProvisioning") == "True", provisioning
        end = time.monotonic() + kept_s
        while time.monotonic() < end:
            assert watch().get("cpu") == 2, "the buffer's node was scaled down while the buffer stood"
            time.sleep(0.5)

        kc.keep_buffer("cpu", ROOM, 0)
        assert buffer_object(cp, inst.namespace) is None
        mine = cp.core.list_namespaced_pod_template(
            inst.namespace, label_selector="app.kubernetes.io/managed-by=makeroom"
        ).items
        assert mine == []
        after_removal()
        cp.wait_for(lambda: watch().get("cpu") == 1, 120, "the buffer's node scaled down")
        assert peak == {"cpu": 2, "gpu": 1}
        assert len(ls.ready_pods("cpu-filler")) == 1
        # The cleanup hook's way, with the chart's permissions: found by its labels, deleted.
        kc.keep_buffer("cpu", Resources.parse({"cpu": "500m"}), 1)  # fits on cpu-0: no node
        assert kc.release_buffers() == [buffers.object_name("cpu")]
        assert buffer_object(cp, inst.namespace) is None


def unplaceable(ls: LoadedScenario) -> None:
    """A pod for a node group nobody has: pending for good, it triggers Karpenter's provisioning."""
    pod = {
        "metadata": {"name": "nowhere", "labels": {"app": "nowhere"}},
        "spec": {
            "nodeSelector": {"makeroom.io/group": "none"},
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}],
        },
    }
    ls.cp.core.create_namespaced_pod(ls.namespace, pod)


def test_the_cluster_autoscaler_keeps_a_node_for_makeroom_s_buffer_and_lets_it_go(
    cp: ControlPlane, tmp_path: Path
) -> None:
    f = tmp_path / "scenario.yaml"
    f.write_text(SCENARIO, encoding="utf-8")
    ls = cp.load_scenario(f, strategy="none", time_scale=0.2, capacity_buffers=True)
    try:
        # Kept past three times the scaled scale-down delays (12 s each).
        keeps_a_node_and_lets_it_go(cp, ls, 3, 3 * ls.real_seconds(60))
    finally:
        ls.stop()


def test_karpenter_keeps_a_node_for_makeroom_s_buffer_and_lets_it_go(
    cp: ControlPlane, tmp_path: Path
) -> None:
    if not kp.available(cp):
        pytest.fail(f"Karpenter missing in {cp.binaries.directory}: run `bash e2e/build-karpenter.sh`")
    f = tmp_path / "karpenter.yaml"
    f.write_text(KARPENTER, encoding="utf-8")
    loaded = kp.load(cp, f, strategy="none", time_scale=0.2, capacity_buffers=True)
    try:
        # Two pods, one node: Karpenter v1.14.1 does not count the pool's existing nodes against
        # limits.nodes within one batch, and launched two NodeClaims for three pods (past max, with
        # real pods as with a buffer's). Its empty-node consolidation (consolidateAfter 0s) runs on
        # its own, unscaled timers. It forgets a deleted buffer's pods on a node only at its next
        # provisioning run (the deletion triggers none): until then the node "has buffer pods" and is
        # kept. A pod no node fits starts one (one kube-scheduler binds at once starts none).
        keeps_a_node_and_lets_it_go(cp, loaded.ls, 2, 45.0, after_removal=lambda: unplaceable(loaded.ls))
    finally:
        loaded.stop()
        kp.reset(cp)
