"""Unit tests of the e2e harness's pure parts (no binaries needed, not marked e2e)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml
from makeroom_e2e.binaries import CAPACITY_BUFFER_CRD, Binaries
from makeroom_e2e.cluster import (
    AutoscalerSettings,
    ControlPlane,
    SchedulerSettings,
    autoscaler_args,
    autoscaler_env,
    node_manifest,
    priority_expander_configmap,
    scheduler_config,
)
from makeroom_e2e.image import UNUSED_IMAGE_S, forget_unused_images
from makeroom_e2e.scenario import (
    autoscaler_settings,
    deployment_manifest,
    first_fit,
    kwok_provider_configmaps,
    parse_duration,
    parse_quantity,
    priority_class_manifest,
    read_scenario,
    scenario_from_data,
)

import makeroom.examples

SEEDS = Path(makeroom.examples.__file__).parent  # the seed scenarios, as shared/scenarios has them


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("5m", 300), ("1h30m", 5400), (12, 12), ("1.5", 1.5)]
)
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("text", "value"), [("400m", 0.4), ("16Gi", 16 * 2**30), ("2", 2), ("1k", 1000)])
def test_parse_quantity(text: str, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


def test_minimal_reader_agrees_with_the_product_reader() -> None:
    path = SEEDS / "seed-1-relocate.yaml"
    mine = scenario_from_data(yaml.safe_load(path.read_text(encoding="utf-8")), path)
    theirs = read_scenario(path)
    assert [g.name for g in mine.node_groups] == [g.name for g in theirs.node_groups]
    for a, b in zip(mine.node_groups, theirs.node_groups, strict=True):
        assert {k: parse_quantity(v) for k, v in a.capacity.items()} == {
            k: parse_quantity(v) for k, v in b.capacity.items()
        }
        assert (a.min, a.max, a.initial, a.provision_time_s) == (b.min, b.max, b.initial, b.provision_time_s)
    assert [(e.at_s, e.kind, e.body) for e in mine.events] == [
        (e.at_s, e.kind, e.body) for e in theirs.events
    ]
    initial = {g.name: [f"{g.name}-{i}" for i in range(g.initial)] for g in mine.node_groups}
    assert first_fit(mine, initial) == {"iris-classifier": {"cpu-0": 5, "gpu-0": 5}, "text-generator": {}}
    if theirs.placement_by_node is not None:
        assert theirs.placement_by_node == {"iris-classifier": {"cpu-0": 5, "gpu-0": 5}}


def _seed_like() -> dict[str, object]:
    return {
        "version": 1,
        "name": "t",
        "duration": "10m",
        "node_groups": [
            {
                "name": "gpu",
                "capacity": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": 1},
                "max": 2,
                "initial": 1,
                "price_per_hour": 0.53,
                "provision_time": "4m",
            },
        ],
        "workloads": [
            {
                "name": "tg",
                "replicas": 1,
                "priority": 1000,
                "requests": {"cpu": "3", "nvidia.com/gpu": 1},
                "startup_time": "60s",
                "termination_grace": "30s",
            },
        ],
    }


def test_deployment_has_no_pin_and_scaled_delays() -> None:
    sc = scenario_from_data(_seed_like())
    d = deployment_manifest("ns", sc.workloads[0], 1, 0.1)
    spec = d["spec"]["template"]["spec"]
    assert "nodeName" not in spec and "affinity" not in spec and "nodeSelector" not in spec
    assert spec["terminationGracePeriodSeconds"] == 3
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert d["spec"]["template"]["metadata"]["annotations"]["pod-ready.stage.kwok.x-k8s.io/delay"] == "6000ms"


def test_strategy_none_means_no_preemption() -> None:
    sc = scenario_from_data(_seed_like())
    assert priority_class_manifest("ns", sc.workloads[0], "none")["preemptionPolicy"] == "Never"
    assert (
        priority_class_manifest("ns", sc.workloads[0], "preemption")["preemptionPolicy"]
        == "PreemptLowerPriority"
    )
    cfg = scheduler_config(Path("/k"), SchedulerSettings(preemption=False))
    assert cfg["profiles"][0]["plugins"]["postFilter"]["disabled"] == [{"name": "DefaultPreemption"}]
    assert "plugins" not in scheduler_config(Path("/k"), SchedulerSettings())["profiles"][0]


def test_kwok_provider_templates_carry_group_bounds_and_provision_delay() -> None:
    sc = scenario_from_data(_seed_like())
    cms = kwok_provider_configmaps(sc, 0.1)
    templates = yaml.safe_load(cms[1]["data"]["templates"])["items"]
    ann = templates[0]["metadata"]["annotations"]
    assert ann["cluster-autoscaler.kwok.nodegroup/max-count"] == "2"
    assert ann["cluster-autoscaler.kwok.nodegroup/min-count"] == "0"
    assert ann["cluster-autoscaler.kwok.nodegroup/desired-count"] == "1", "within [min, max], else refused"
    assert ann["e2e.makeroom.io/provision-delay"] == "24000ms"
    labels = templates[0]["metadata"]["labels"]
    assert labels["makeroom.io/group"] == "gpu" and labels["makeroom.io/gpu"] == "nvidia.com-gpu"
    assert "kubernetes.io/hostname" not in labels, "every node made from it would share the hostname"
    # Nothing may be bound to a new node before its provision delay is over.
    assert {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"} in templates[0]["spec"]["taints"]
    assert templates[0]["status"]["conditions"][0] == {
        "type": "Ready",
        "status": "False",
        "reason": "KubeletNotReady",
        "message": "provisioning",
    }
    config = yaml.safe_load(cms[0]["data"]["config"])
    assert config["nodes"]["skipTaint"] is True, "scenario pods do not tolerate kwok-provider:NoSchedule"
    assert config["nodegroups"] == {"fromNodeLabelKey": "makeroom.io/group"}
    assert config["nodes"]["gpuConfig"] == {
        "gpuLabelKey": "makeroom.io/gpu",
        "availableGPUTypes": {"nvidia.com-gpu": {}},
    }


def test_initial_nodes_carry_the_kwok_providers_markers() -> None:
    """Without them the provider ignores a node ("not managed by kwok") and its group turns unhealthy."""
    n = node_manifest("cpu-0", group="cpu", capacity={"cpu": "4"}, labels={}, taints=[], annotations={})
    assert n["spec"]["providerID"] == "kwok:cpu-0"
    assert n["metadata"]["annotations"]["cluster-autoscaler.kwok.nodegroup/name"] == "cpu"
    assert n["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert "makeroom.io/gpu" not in n["metadata"]["labels"]


def test_autoscaler_flags_are_the_scenarios_scaled() -> None:
    data = _seed_like()
    data["autoscaler"] = {"scan_interval": "20s", "expander": "priority", "scale_down_unneeded_time": "5m"}
    s = autoscaler_settings(scenario_from_data(data), 0.1)
    assert s.scan_interval_s == pytest.approx(2.0)
    assert s.scale_down_unneeded_time_s == pytest.approx(30.0)
    assert s.scale_down_delay_after_add_s == pytest.approx(60.0)
    assert s.max_node_provision_time_s == pytest.approx(90.0)
    assert s.node_delete_delay_after_taint_s == pytest.approx(0.5)
    # Bounds on retries of a fixed 10 s period are not scaled: the same number of attempts.
    assert s.max_pod_eviction_time_s == AutoscalerSettings().max_pod_eviction_time_s
    assert s.priorities == ("gpu",)
    cp = ControlPlane.__new__(ControlPlane)
    cp.kubeconfig = Path("/k/kubeconfig")
    args = autoscaler_args(cp, s, 1234)
    assert "--scan-interval=2.000s" in args and "--expander=priority" in args
    assert "--scale-down-unneeded-time=30.000s" in args and "--max-graceful-termination-sec=60" in args
    assert "--scale-down-gpu-utilization-threshold=0.5" in args and "--cloud-provider=kwok" in args
    env = autoscaler_env(cp)
    assert env["KWOK_PROVIDER_MODE"] == "local" and env["KUBECONFIG"] == "/k/kubeconfig"
    assert env["POD_NAMESPACE"] == "kube-system"


def test_capacity_buffers_are_two_flags_and_a_crd_the_cache_holds(tmp_path: Path) -> None:
    cp = ControlPlane.__new__(ControlPlane)
    cp.kubeconfig = Path("/k/kubeconfig")
    flags = {"--capacity-buffer-controller-enabled=true", "--capacity-buffer-pod-injection-enabled=true"}
    assert not flags & set(autoscaler_args(cp, AutoscalerSettings(), 1))
    assert flags <= set(autoscaler_args(cp, AutoscalerSettings(capacity_buffers=True), 1))
    bins = Binaries(tmp_path / "bin")
    assert bins.capacity_buffer_crd() is None
    karpenter = tmp_path / "bin" / "karpenter-crds" / CAPACITY_BUFFER_CRD
    karpenter.parent.mkdir(parents=True)
    karpenter.write_text("karpenter's copy")
    assert bins.capacity_buffer_crd() == karpenter
    own = tmp_path / "src/ca-53bddbcc0c57/autoscaler-1.36.1/cluster-autoscaler/apis/config/crd"
    own.mkdir(parents=True)
    (own / CAPACITY_BUFFER_CRD).write_text("the autoscaler's own")
    assert bins.capacity_buffer_crd() == own / CAPACITY_BUFFER_CRD


def test_priority_expander_prefers_the_first_group() -> None:
    cm = priority_expander_configmap(["cpu", "gpu"])
    assert cm["metadata"]["name"] == "cluster-autoscaler-priority-expander"
    assert yaml.safe_load(cm["data"]["priorities"]) == {20: ["^cpu$"], 10: ["^gpu$"]}


def test_parity_reads_the_simulator_of_a_seed_that_ends_with_a_pod_waiting() -> None:
    """seed-1 under none ends with text-generator pending: `simulate` says so with exit status 3,
    which is a result for the parity table, not a failure of the simulator."""
    from makeroom_e2e.parity import simulate

    d = simulate(SEEDS / "seed-1-relocate.yaml", "none")
    assert d["workloads"]["text-generator"]["ready_at_end"] == 0


CONSTRAINED = ["constrained-seed-1-relocate.yaml", "constrained-seed-2-wait-for-cpu-node.yaml"]


@pytest.mark.parametrize("name", CONSTRAINED)
def test_deployment_carries_the_constraints_the_simulator_models(name: str) -> None:
    """The pod template, read back as makeroom reads a cluster's pods, has the spread, anti-affinity
    and labels the simulator gives the scenario's workload."""
    from makeroom.scenario import load_scenario
    from makeroom.snapshot.objects import pod_from_object

    path = SEEDS / name
    product = {w.name: w for w in load_scenario(path).workloads}
    for w in read_scenario(path).workloads:
        template = deployment_manifest("ns", w, 1, 0.1)["spec"]["template"]
        obj = {
            "apiVersion": "v1",
            "metadata": {**template["metadata"], "name": "p", "namespace": "ns", "uid": "u"},
            "spec": template["spec"],
            "status": {"phase": "Pending"},
        }
        pod = pod_from_object(obj)
        assert pod is not None
        want = product[w.name].spec
        assert pod.spec.topology_spread == want.topology_spread
        assert pod.spec.pod_anti_affinity == want.pod_anti_affinity
        assert pod.spec.pod_affinity == want.pod_affinity
        assert pod.spec.host_ports == want.host_ports
        assert product[w.name].labels.items() <= dict(pod.labels).items()
    assert product["iris-classifier"].spec.topology_spread  # the case is not vacuous


@pytest.mark.parametrize("name", CONSTRAINED)
def test_nodes_are_in_the_zones_the_simulator_gives_them(name: str) -> None:
    from makeroom.model import ZONE_LABEL
    from makeroom.scenario import load_scenario

    path = SEEDS / name
    sc = read_scenario(path)
    zones = {n.name: n.labels.get(ZONE_LABEL) for n in load_scenario(path).initial_nodes}
    assert zones == {
        f"{g.name}-{i}": g.zone_labels(i)[ZONE_LABEL] for g in sc.node_groups for i in range(g.initial)
    }
    # The provider's template: the zone of the group's next node, the one the simulator adds first.
    (templates,) = [
        yaml.safe_load(cm["data"]["templates"])
        for cm in kwok_provider_configmaps(sc, 0.1)
        if "templates" in cm["data"]
    ]
    for node in templates["items"]:
        g = sc.group(node["metadata"]["name"].removesuffix("-template"))
        assert node["metadata"]["labels"][ZONE_LABEL] == g.zones[g.initial % len(g.zones)]


def test_makeroom_groups_file_gives_a_multi_zone_group_the_zone_of_its_next_node(tmp_path: Path) -> None:
    from makeroom_e2e.makeroom_run import prepared_seed

    from makeroom.model import ZONE_LABEL

    _, groups = prepared_seed("constrained-seed-2", tmp_path)
    entries = {g["name"]: g for g in yaml.safe_load(groups.read_text())["groups"]}
    # cpu-0 b, cpu-1 a: the node the autoscaler adds is the group's third, in zone b in both worlds.
    assert entries["cpu"]["labels"][ZONE_LABEL] == "b"
    assert entries["cpu"]["labels"]["makeroom.io/group"] == "cpu"
    assert "kubernetes.io/hostname" not in entries["cpu"]["labels"]
    _, plain = prepared_seed(1, tmp_path)
    assert all("labels" not in g for g in yaml.safe_load(plain.read_text())["groups"])


def test_an_image_another_tree_used_lately_is_kept_and_a_stale_one_is_forgotten(tmp_path: Path) -> None:
    """Two worktrees test their own images at once: building one must not delete the other's from under
    its running tests, but leftovers of trees nobody ran for hours go."""
    mine, busy, stale, broken = (tmp_path / n for n in ("mine", "busy", "stale", "broken"))
    for d in (mine, busy, stale, broken):
        d.mkdir()
    for d in (busy, stale):
        (d / "ok").write_text("sha256:x")
    old = time.time() - UNUSED_IMAGE_S - 60
    os.utime(stale / "ok", (old, old))

    forget_unused_images(tmp_path, keep=mine)

    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy", "mine"]
