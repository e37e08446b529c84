"""Kubernetes objects to ClusterState, and `makeroom plan` on a dump."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from makeroom.errors import InputError
from makeroom.model import OwnerKind, Resources
from makeroom.planner import NotMovable, Policy, not_movable, plan
from makeroom.scenario import load_scenario
from makeroom.sim import Options, Simulation
from makeroom.snapshot import (
    GroupConfig,
    is_kube_dump,
    parse_autoscaler_status,
    parse_group_config,
    state_from_objects,
)
from makeroom.snapshot.export import autoscaler_status_object, objects_of_state
from makeroom.snapshot.groups import bounds_for
from tests.builders.scenario import example
from tests.conftest import cli as run
from tests.conftest import cli_json as run_json

DATA = Path(__file__).parent / "data"
DUMP = DATA / "small-dump.yaml"
CPU_NODE = "ip-10-0-1-10.ec2.internal"
GPU_NODE = "ip-10-0-2-20.ec2.internal"


def _dump() -> dict[str, Any]:
    data = yaml.safe_load(DUMP.read_text())
    assert isinstance(data, dict)
    return data


def _ready_dump() -> dict[str, Any]:
    """The dump with both iris replicas Ready, so that iris' budget allows one disruption."""
    data = _dump()
    for item in data["items"]:
        if item["metadata"]["name"] == "iris-classifier-7d9f8b6c5-fghij":
            item["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return data


def test_a_dump_is_told_from_a_scenario() -> None:
    assert is_kube_dump(_dump())
    assert not is_kube_dump(yaml.safe_load(example("seed-1").read_text()))


def test_small_dump_reads_groups_pods_requests_and_budgets() -> None:
    state = state_from_objects(_dump()["items"], source="dump.yaml")
    assert list(state.groups) == ["cpu", "gpu"]
    assert (state.groups["gpu"].min, state.groups["gpu"].max) == (1, 1)
    assert state.nodes[GPU_NODE].group == "gpu"
    assert state.groups["gpu"].taints == state.nodes[GPU_NODE].taints
    assert state.groups["gpu"].labels["node.kubernetes.io/instance-type"] == "g4dn.xlarge"
    pods = {p.name: p for p in state.pods.values()}
    assert "done-job-xyz" not in pods  # finished pods hold no room
    iris = pods["iris-classifier-7d9f8b6c5-abcde"]
    assert iris.workload == "iris-classifier"
    assert iris.owner_kind == OwnerKind.REPLICA_SET
    # containers 500m + 100m (limits stand in for missing requests), at least the 1-cpu init container
    assert iris.spec.requests == Resources.parse({"cpu": "1", "memory": "1152Mi"})
    assert pods["iris-classifier-7d9f8b6c5-fghij"].spec.requests["cpu"] == 600
    assert state.workloads["iris-classifier"].pdb is not None
    assert state.workloads["iris-classifier"].replicas == 2
    policy = Policy()
    assert not_movable(pods["node-exporter-x1"], policy) == NotMovable.DAEMON_SET
    assert not_movable(pods["kube-proxy-ip-10-0-1-10"], policy) == NotMovable.MIRROR
    assert not_movable(pods["scratchy-0"], policy) == NotMovable.LOCAL_STORAGE
    assert pods["scratchy-0"].workload == "batch/scratchy"
    assert not_movable(iris, policy) is None
    pending = pods["text-generator-5c7d-qwert"]
    assert pending.node is None and pending.spec.required_affinity


def test_plan_on_the_small_dump_keeps_to_the_budget() -> None:
    # iris-classifier-...-fghij is Running but not Ready: with maxUnavailable 1 of 2 replicas, the
    # budget allows no disruption now, and an eviction of the other replica would be refused
    out = run_json("plan", DUMP, "--strategy", "evict")
    assert out["moves"] == []
    assert [(u["pod"], u["reason"]) for u in out["unplaceable"]] == [
        ("text-generator-5c7d-qwert", "no-room-to-make")
    ]
    # under migrate (makeroom run's default, so plan's), its replacement is Ready before it goes:
    # the budget does not hold it
    out = run_json("plan", DUMP)
    assert [m["pod"] for m in out["moves"]] == ["iris-classifier-7d9f8b6c5-abcde"]
    assert not out["unplaceable"]


def test_plan_on_the_small_dump_moves_the_one_pod_that_frees_enough(tmp_path: Path) -> None:
    ready = tmp_path / "ready.yaml"
    ready.write_text(yaml.safe_dump(_ready_dump()))
    out = run_json("plan", ready)
    assert [(p["pod"], p["node"]) for p in out["placements"]] == [("text-generator-5c7d-qwert", GPU_NODE)]
    assert [(m["pod"], m["from_node"], m["to_node"]) for m in out["moves"]] == [
        ("iris-classifier-7d9f8b6c5-abcde", GPU_NODE, CPU_NODE)
    ]
    assert out["scale_ups"] == {}


def _seed_state(stem: str, at: float = 70.0) -> Any:
    sim = Simulation(load_scenario(example(stem)), Options(keep_events=False, keep_samples=False))
    sim.run(until=at)
    return sim.world.state


@pytest.mark.parametrize("stem", ["seed-1", "seed-2", "seed-3"])
def test_a_seed_as_objects_plans_as_the_seed_does(stem: str) -> None:
    state = _seed_state(stem)
    direct = plan(state, Policy(now=70))
    rebuilt = state_from_objects(objects_of_state(state), None, autoscaler_status_object(state))
    again = plan(rebuilt, Policy(now=70))
    assert [(m.pod.name, m.from_node, m.to_node, m.to_new_node_group) for m in again.moves] == [
        (m.pod.name, m.from_node, m.to_node, m.to_new_node_group) for m in direct.moves
    ]
    assert dict(again.scale_ups) == dict(direct.scale_ups)


def test_plan_cli_on_a_seed_dump_with_a_groups_file(tmp_path: Path) -> None:
    state = _seed_state("seed-2")
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects_of_state(state)}))
    no_groups = run("plan", dump)
    assert no_groups.exit_code == 2
    assert "node group 'cpu'" in no_groups.stderr and "--groups" in no_groups.stderr
    groups = tmp_path / "groups.yaml"
    groups.write_text(
        "groups:\n"
        "  - {name: cpu, min: 1, max: 2, price_per_hour: 0.17}\n"
        "  - {name: gpu, min: 1, max: 1, price_per_hour: 0.53}\n"
    )
    out = run_json("plan", dump, "--groups", groups)
    assert out["scale_ups"] == {"cpu": 1}
    assert len(out["moves"]) == 3


def test_bad_quantity_in_a_dump_names_the_file_and_key_path(tmp_path: Path) -> None:
    data = _dump()
    data["items"][3]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "half"
    data["items"][1]["status"]["allocatable"]["memory"] = "-1Gi"
    bad = tmp_path / "bad-dump.yaml"
    bad.write_text(yaml.safe_dump(data))
    result = run("plan", bad)
    assert result.exit_code == 2
    assert f"{bad}: items[3].spec.containers[0].resources.requests.cpu:" in result.stderr
    assert f"{bad}: items[1].status.allocatable.memory:" in result.stderr
    assert "Traceback" not in result.output


def test_other_refused_dumps() -> None:
    items = _dump()["items"]
    with pytest.raises(InputError) as exc:
        state_from_objects([*items, {"kind": "Pod", "metadata": {}}], source="x")
    assert any(p.path == f"items[{len(items)}].metadata.name" for p in exc.value.problems)
    stray = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"nodeName": "gone", "containers": []}}
    with pytest.raises(InputError) as exc:
        state_from_objects([*items, stray], source="x")
    assert "expected a node of the dump" in str(exc.value)
    with pytest.raises(InputError) as exc:
        state_from_objects([i for i in items if i["kind"] != "ConfigMap"], source="x")
    assert "no min and max" in str(exc.value)


def test_groups_file_is_checked_with_key_paths() -> None:
    with pytest.raises(InputError) as exc:
        parse_group_config(
            {"groups": [{"name": "cpu", "min": 3, "max": 1, "capacity": {"cpu": "x"}, "colour": 1}]}, "g.yaml"
        )
    paths = {p.path for p in exc.value.problems}
    assert {"groups[0].min", "groups[0].capacity.cpu", "groups[0].colour"} <= paths
    config = parse_group_config({"groups": [{"name": "gpu", "min": 0, "max": 3}]}, "g.yaml")
    assert isinstance(config, GroupConfig) and config.get("gpu") is not None


def test_autoscaler_status_text_and_yaml() -> None:
    text = parse_autoscaler_status(_dump()["items"][-1])
    assert text == {
        "eks-cpu-2ac4d1c2-1111-2222-3333-444455556666": (1, 1),
        "eks-gpu-9bc4d1c2-1111-2222-3333-444455556666": (1, 1),
    }
    status = {"data": {"status": "nodeGroups:\n- name: pool-a\n  health: {minSize: 0, maxSize: 5}\n"}}
    assert parse_autoscaler_status(status) == {"pool-a": (0, 5)}
    zones = {"gke-c-default-pool-aaa-grp": (0, 3), "gke-c-default-pool-bbb-grp": (1, 3)}
    bounds = bounds_for("default-pool", zones)
    assert bounds is not None and (bounds.min, bounds.max) == (1, 6)
    assert bounds_for("gpu", zones) is None


def test_plan_reads_a_json_dump(tmp_path: Path) -> None:
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps(_ready_dump()))
    out = run_json("plan", dump)
    assert [m["pod"] for m in out["moves"]] == ["iris-classifier-7d9f8b6c5-abcde"]


def test_an_hpa_or_the_annotation_owns_a_workloads_replicas() -> None:
    items = _dump()["items"]
    assert state_from_objects(items).workloads["iris-classifier"].replicas_owner is None
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "iris-hpa", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "iris-classifier"}
        },
    }
    state = state_from_objects([*items, hpa])
    assert state.workloads["iris-classifier"].replicas_owner == "HorizontalPodAutoscaler/iris-hpa"
    keda = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "iris-classifier",
            "namespace": "default",
            "annotations": {"makeroom.io/replicas-owner": "ScaledObject/iris"},
        },
        "spec": {"replicas": 2},
    }
    state = state_from_objects([*items, keda])
    assert state.workloads["iris-classifier"].replicas_owner == "ScaledObject/iris"
