"""makeroom trace gpu: rows generated here in the shape of alibaba-gpu-v2023/ (synthetic values, the
real headers), and a real window of the trace when the data directory is present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from makeroom.scenario import load_scenario
from tests.conftest import cli
from tests.trace.test_dlrm import data_dir

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
    "scheduled_time"
)
NODES = [
    "openb-node-0000,32000,262144,0,",
    "openb-node-0001,32000,262144,0,",
    "openb-node-0002,96000,393216,8,G2",
    "openb-node-0003,96000,393216,8,G2",
    "openb-node-0004,104000,524288,2,T4",
    "openb-node-0005,96000,393216,4,T4",
]
# A one-hour window from 1000 s: pod 0 lives before and after it, pod 1 ends inside it, pod 2 starts and
# ends inside it (a shared GPU: 460 thousandths), pod 3 ends before the window, pod 4 starts after it.
PODS = [
    "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,90000,0",
    "openb-pod-0001,4000,8192,0,0,,BE,Running,500,1600,500",
    "openb-pod-0002,6000,12288,1,460,,Burstable,Running,2000,3000,2000",
    "openb-pod-0003,1000,1024,0,0,,BE,Succeeded,0,900,0",
    "openb-pod-0004,1000,1024,2,1000,,Guaranteed,Pending,5000,9000,",
]


def write_dir(tmp_path: Path, nodes: list[str], pods: list[str]) -> Path:
    directory = tmp_path / "alibaba-gpu-v2023"
    directory.mkdir()
    (directory / "openb_node_list_all_node.csv").write_text("\n".join([NODE_HEADER, *nodes]) + "\n")
    (directory / "openb_pod_list_default.csv").write_text("\n".join([POD_HEADER, *pods]) + "\n")
    return directory


def convert(tmp_path: Path, directory: Path, *options: str, name: str = "out.yaml") -> Path:
    out = tmp_path / name
    result = cli("trace", "gpu", directory, "--write", out, "--start", "1000", "--hours", "1", *options)
    assert result.exit_code == 0, result.output
    return out


def test_nodes_become_fixed_groups_and_pods_workloads_with_events(tmp_path: Path) -> None:
    out = convert(tmp_path, write_dir(tmp_path, NODES, PODS))
    spec = load_scenario(out).spec
    groups = {g.name: g for g in spec.node_groups}
    assert list(groups) == ["g2", "t4-4g-96c", "t4-2g-104c", "cpu"]  # by nodes, then GPUs
    assert (groups["g2"].min, groups["g2"].max, groups["g2"].initial) == (2, 2, 2)
    assert groups["g2"].labels == {"alibaba.com/gpu-model": "G2"}
    assert groups["g2"].capacity["nvidia.com/gpu"] == 8000
    assert groups["cpu"].capacity == {"cpu": 32000, "memory": 256 * 2**30 * 1000}
    assert not spec.autoscaler.enabled
    assert [(w.name, w.priority) for w in spec.workloads] == [("openb-pod-0000", 1000), ("openb-pod-0001", 0)]
    events = [
        (e.at, e.kind, e.deploy.name if e.deploy else e.delete.workload if e.delete else "")
        for e in spec.events
    ]
    assert events == [
        (600, "delete", "openb-pod-0001"),
        (1000, "deploy", "openb-pod-0002"),
        (2000, "delete", "openb-pod-0002"),
    ]
    shared = next(e.deploy for e in spec.events if e.deploy)
    assert shared.requests["nvidia.com/gpu"] == 460 and shared.priority == 100
    run = cli("simulate", out, "--strategy", "migrate", "--json")
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout)["pending_at_end"] == []


def test_same_input_same_bytes(tmp_path: Path) -> None:
    directory = write_dir(tmp_path, NODES, PODS)
    assert (
        convert(tmp_path, directory, name="a.yaml").read_bytes()
        == convert(tmp_path, directory, name="b.yaml").read_bytes()
    )


def test_bad_rows_name_the_file_row_and_column(tmp_path: Path) -> None:
    nodes = [*NODES[:2], "openb-node-0002,96000,lots,8,G2"]
    pods = [*PODS[:1], "openb-pod-0001,4000,8192,0,0,,VIP,Running,500,1600,500"]
    directory = write_dir(tmp_path, nodes, pods)
    result = cli("trace", "gpu", directory, "--write", tmp_path / "out.yaml")
    assert result.exit_code == 2
    node_file, pod_file = directory / "openb_node_list_all_node.csv", directory / "openb_pod_list_default.csv"
    assert result.stderr.strip().splitlines() == [
        f"makeroom: {node_file}: rows[2].memory_mib: expected a number of zero or more, got 'lots'"
    ]
    node_file.write_text("\n".join([NODE_HEADER, *NODES]) + "\n")
    result = cli("trace", "gpu", directory, "--write", tmp_path / "out.yaml")
    assert result.exit_code == 2
    expected = f"makeroom: {pod_file}: rows[1].qos: expected one of LS, Guaranteed, Burstable, BE, got 'VIP'"
    assert result.stderr.strip() == expected
    result = cli("trace", "gpu", tmp_path / "nowhere", "--write", tmp_path / "out.yaml")
    assert result.exit_code == 2
    assert "expected a directory holding openb_node_list_all_node.csv" in result.stderr


@pytest.mark.skipif(data_dir() is None, reason="no alibaba-gpu-v2023/ in ../shared/data or $MAKEROOM_DATA")
def test_a_real_window_simulates(tmp_path: Path) -> None:
    data = data_dir()
    assert data is not None
    out = tmp_path / "real.yaml"
    args = ("--start", "3400h", "--hours", "2", "--node-scale", "0.02")
    result = cli("trace", "gpu", data / "alibaba-gpu-v2023", "--write", out, *args)
    assert result.exit_code == 0, result.output
    spec = load_scenario(out).spec
    assert spec.workloads and spec.events
    for strategy in ("none", "migrate"):
        run = cli("simulate", out, "--strategy", strategy, "--json")
        # A real window may end with pods still waiting; the exit status says so (docs/cli.md).
        assert run.exit_code == (3 if json.loads(run.stdout)["pending_at_end"] else 0), run.output
