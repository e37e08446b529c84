"""makeroom trace dlrm: rows generated here in the shape of alibaba-dlrm-v2025.csv (synthetic values,
the real header), and a real window of the trace when the data directory is present."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from makeroom.scenario import load_scenario
from tests.conftest import cli

HEADER = (
    "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,rdma_limit,"
    "memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,creation_time,"
    "scheduled_time,deletion_time"
)
GPU = "nvidia.com/gpu"
HEADER_USED = (
    "instance_sn, role, app_name, cpu_request, memory_request, gpu_request, creation_time, deletion_time"
)


def row(
    n: int, role: str, app: str, created: str = "", deleted: str = "", cpu: str = "", mem: str = ""
) -> str:
    """One synthetic instance; CN rows ask 64 cores and 320 GiB, HN rows 8 cores, 40 GiB and a GPU."""
    cpu = cpu or ("64" if role == "CN" else "8")
    mem = mem or ("320.0" if role == "CN" else "40.0")
    gpu = "0" if role == "CN" else "1"
    return (
        f"instance_{n},{role},{app},{cpu},{cpu},{gpu},{gpu},1,1,{mem},{mem},100.0,100.0,-1,"
        f"{created},{created},{deleted}"
    )


# A one-hour window: app_0 has 2 HN instances from before the start and a third created at 10m; 3 CN
# instances, one deleted at 20m. app_1 has one CN instance that ends before the window and one that
# starts after it (so app_1 is not in the scenario). app_2 lives all along, with one HN instance.
ROWS = [
    row(0, "HN", "app_0"),
    row(1, "HN", "app_0", deleted="7200"),
    row(2, "HN", "app_0", created="600", deleted="4000"),
    row(3, "CN", "app_0"),
    row(4, "CN", "app_0", created="10"),
    row(5, "CN", "app_0", deleted="1200"),
    row(6, "CN", "app_1", deleted="0"),
    row(7, "CN", "app_1", created="3600"),
    row(8, "HN", "app_2"),
]


def write_csv(tmp_path: Path, rows: list[str], name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def convert(tmp_path: Path, csv: Path, *options: str, name: str = "out.yaml") -> Path:
    out = tmp_path / name
    result = cli("trace", "dlrm", csv, "--write", out, "--hours", "1", *options)
    assert result.exit_code == 0, result.output
    return out


def test_rows_become_workloads_scale_events_and_sized_node_groups(tmp_path: Path) -> None:
    out = convert(tmp_path, write_csv(tmp_path, ROWS))
    scenario = load_scenario(out)
    spec = scenario.spec
    assert spec.duration == 3600
    by_name = {w.name: w for w in spec.workloads}
    assert list(by_name) == ["app-0-hn", "app-0-cn", "app-2-hn"]
    hn, cn = by_name["app-0-hn"], by_name["app-0-cn"]
    assert (hn.replicas, cn.replicas) == (2, 2)  # app_0 CN instance 4 is created at 10 s, after t=0
    assert hn.priority == 1000 and hn.preemption_policy == "Never"
    assert cn.priority == 100
    assert hn.requests == {"cpu": 8000, "memory": 40 * 2**30 * 1000, GPU: 1000}
    assert cn.requests == {"cpu": 64000, "memory": 320 * 2**30 * 1000}
    assert [(t.key, t.operator, t.effect) for t in cn.tolerations] == [(GPU, "Exists", "NoSchedule")]
    assert hn.placement == {"gpu": 2} and cn.placement == {"cpu": 2}
    events = [(e.at, e.scale.workload, e.scale.replicas) for e in spec.events if e.scale]
    assert events == [(300, "app-0-cn", 3), (600, "app-0-hn", 3), (1200, "app-0-cn", 2)]
    cpu, gpu = spec.node_groups
    assert (cpu.name, gpu.name) == ("cpu", "gpu")
    assert [(t.key, t.value, t.effect) for t in gpu.taints] == [(GPU, "present", "NoSchedule")]
    assert gpu.labels == {"nvidia.com/gpu.present": "true"}
    assert cpu.taints == []
    # 2 CN replicas of 64 cores fill one 192-core node at the start; 3 at the peak, x1.2 -> max 2
    assert (cpu.initial, cpu.max) == (1, 2)
    # 3 HN replicas at the start (2 of app_0, 1 of app_2), 4 at the peak: one 8-GPU node, max 2
    assert (gpu.initial, gpu.max) == (1, 2)
    assert cpu.price_per_hour < gpu.price_per_hour


def test_the_scenario_runs_in_the_simulator(tmp_path: Path) -> None:
    out = convert(tmp_path, write_csv(tmp_path, ROWS))
    for strategy in ("none", "migrate"):
        result = cli("simulate", out, "--strategy", strategy, "--json")
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert data["workloads"]["app-0-hn"]["desired"] == 3
        assert data["pending_at_end"] == []


def test_scale_rounds_and_keeps_one_replica_where_any(tmp_path: Path) -> None:
    rows = [row(i, "CN", "app_0") for i in range(10)] + [row(10, "HN", "app_1")]
    rows += [row(11 + i, "CN", "app_0", created="900") for i in range(5)]
    spec = load_scenario(convert(tmp_path, write_csv(tmp_path, rows), "--scale", "0.1")).spec
    assert {w.name: w.replicas for w in spec.workloads} == {"app-0-cn": 1, "app-1-hn": 1}
    assert [(e.at, e.scale.replicas) for e in spec.events if e.scale] == [(900, 2)]  # 15 x 0.1 = 1.5 -> 2


def test_services_keeps_the_largest(tmp_path: Path) -> None:
    rows = [row(i, "CN", "app_0") for i in range(3)] + [row(3, "HN", "app_1"), row(4, "HN", "app_2")]
    rows += [row(5, "CN", "app_2")]
    spec = load_scenario(convert(tmp_path, write_csv(tmp_path, rows), "--services", "2")).spec
    assert [w.name for w in spec.workloads] == ["app-0-cn", "app-2-hn", "app-2-cn"]


def test_same_input_same_bytes(tmp_path: Path) -> None:
    csv = write_csv(tmp_path, ROWS)
    first = convert(tmp_path, csv, "--step", "1m", name="a.yaml").read_bytes()
    second = convert(tmp_path, csv, "--step", "1m", name="b.yaml").read_bytes()
    assert first == second
    assert b"cite Yang et al." in first


def refused(*args: str | Path) -> list[str]:
    result = cli("trace", "dlrm", *args)
    assert result.exit_code == 2, result.output
    return [line.removeprefix("makeroom: ") for line in result.stderr.strip().splitlines()]


def test_bad_cells_name_the_row_and_column(tmp_path: Path) -> None:
    rows = [*ROWS]
    rows[1] = row(1, "HN", "app_0", cpu="eight")
    rows[3] = row(3, "XN", "app_0", created="soon")
    rows[5] = row(5, "CN", "app_0", created="500", deleted="100")
    csv = write_csv(tmp_path, rows)
    lines = refused(csv, "--write", tmp_path / "out.yaml")
    assert lines == [
        f"{csv}: rows[1].cpu_request: expected a number of zero or more, got 'eight'",
        f"{csv}: rows[3].role: expected CN or HN, got 'XN'",
        f"{csv}: rows[3].creation_time: expected a number of zero or more, got 'soon'",
        f"{csv}: rows[5].deletion_time: expected a time after creation_time 500",
    ]
    assert not (tmp_path / "out.yaml").exists()


def test_missing_column_missing_file_and_empty_window(tmp_path: Path) -> None:
    out = tmp_path / "out.yaml"
    no_memory = tmp_path / "cut.csv"
    no_memory.write_text(HEADER.replace("memory_request,", "") + "\n")
    assert refused(no_memory, "--write", out) == [f"{no_memory}: header: missing column memory_request"]
    assert refused(tmp_path / "nope.csv", "--write", out) == [f"{tmp_path / 'nope.csv'}: no such file"]
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    expected = f"{empty}: empty file: expected a CSV header with {HEADER_USED}"
    assert refused(empty, "--write", out) == [expected]
    gone = write_csv(tmp_path, [row(0, "CN", "app_0", deleted="3000")], name="gone.csv")
    (line,) = refused(gone, "--write", out, "--start", "1h")
    assert line == f"{gone}: no instance is live between trace seconds 3600 and 25200: an empty window"
    csv = write_csv(tmp_path, ROWS)
    (line,) = refused(csv, "--write", out, "--gpu-node", "cpu=4,memory=16Gi,gpu=1")
    assert line.startswith("--gpu-node: a node of cpu=4,memory=16Gi,gpu=1 cannot hold one app_0 HN instance")
    assert refused(csv, "--write", out, "--scale", "0") == ["options: --scale: expected more than 0, got 0"]
    assert not out.exists()


def data_dir() -> Path | None:
    env = os.environ.get("MAKEROOM_DATA")
    root = Path(__file__).resolve().parents[2]
    path = Path(env) if env else root.parent / "shared" / "data"
    return path if (path / "alibaba-dlrm-v2025.csv").is_file() else None


@pytest.mark.skipif(
    data_dir() is None, reason="no alibaba-dlrm-v2025.csv in ../shared/data or $MAKEROOM_DATA"
)
def test_a_real_two_hour_window_simulates_under_none_and_migrate(tmp_path: Path) -> None:
    data = data_dir()
    assert data is not None
    out = tmp_path / "real.yaml"
    args = ("--start", "726h", "--hours", "2", "--scale", "0.05", "--services", "40")
    result = cli("trace", "dlrm", data / "alibaba-dlrm-v2025.csv", "--write", out, *args)
    assert result.exit_code == 0, result.output
    spec = load_scenario(out).spec
    assert len(spec.workloads) >= 40
    assert {g.name for g in spec.node_groups} == {"cpu", "gpu"}
    for strategy in ("none", "migrate"):
        run = cli("simulate", out, "--strategy", strategy, "--json")
        result_data = json.loads(run.stdout)
        # A real window may end with pods still waiting; the exit status says so (docs/cli.md).
        assert run.exit_code == (3 if result_data["pending_at_end"] else 0), run.output
        assert result_data["strategy"] == strategy
        assert set(result_data["workloads"]) == {w.name for w in spec.workloads}
