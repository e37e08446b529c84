"""Trace CSVs and the converters' options through the shared rules: a UTF-8 BOM is read, a cut last row
is refused (not counted as live forever), a fractional GPU or a value no scenario can hold is refused
with its row and column, an infinite option is refused by name; what a converter writes always loads.
Exit 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from makeroom.cli.trace import _checked
from makeroom.errors import InputError
from makeroom.scenario import load_scenario
from makeroom.trace.common import Conversion
from tests.conftest import cli
from tests.test_fuzz_input import no_hang
from tests.trace.test_dlrm import HEADER, ROWS, row
from tests.trace.test_gpu import NODE_HEADER, NODES, POD_HEADER, PODS, write_dir


def dlrm(tmp_path: Path, text: str, *options: str) -> tuple[int, str, Path]:
    csv = tmp_path / "trace.csv"
    csv.write_bytes(text.encode("utf-8"))
    out = tmp_path / "out.yaml"
    result = cli("trace", "dlrm", csv, "--write", out, "--hours", "1", *options)
    assert "Traceback" not in result.output
    return result.exit_code, result.stderr, csv


def test_a_bom_is_no_part_of_the_header(tmp_path: Path) -> None:
    code, err, _ = dlrm(tmp_path, "\ufeff" + "\n".join([HEADER, *ROWS]) + "\n")
    assert code == 0, err
    assert load_scenario(tmp_path / "out.yaml").spec.workloads


def test_a_cut_last_row_is_refused(tmp_path: Path) -> None:
    cut = row(9, "CN", "app_2", created="100", deleted="3000")
    cut = cut[: cut.rindex(",", 0, cut.rindex(","))]  # the row ends before its last two cells
    code, err, csv = dlrm(tmp_path, "\n".join([HEADER, *ROWS, cut]) + "\n")
    assert code == 2
    assert err.strip() == f"makeroom: {csv}: rows[9]: expected 17 cells as in the header, got 15"
    code, err, csv = dlrm(tmp_path, "\n".join([HEADER, *ROWS, row(9, "CN", "app_2") + ",x"]) + "\n")
    assert code == 2 and "rows[9]: expected 17 cells as in the header, got 18" in err


@pytest.mark.parametrize(
    ("cells", "column", "message"),
    [
        ({"gpu": "0.5"}, "gpu_request", "expected a whole number, got '0.5'"),
        ({"cpu": "1e30"}, "cpu_request", "expected a number of at most"),
        ({"mem": "1e14"}, "memory_request", "expected a request of at most 1Pi"),
        ({"cpu": "inf"}, "cpu_request", "expected a number of zero or more, got 'inf'"),
        ({"cpu": "NaN"}, "cpu_request", "expected a number of zero or more, got 'NaN'"),
        ({"deleted": "1e300"}, "deletion_time", "expected a number of at most 31622400"),
    ],
)
def test_a_cell_no_scenario_can_hold_is_refused(
    tmp_path: Path, cells: dict[str, str], column: str, message: str
) -> None:
    bad = row(
        3, "HN", "app_0", cpu=cells.get("cpu", ""), mem=cells.get("mem", ""), deleted=cells.get("deleted", "")
    )
    if "gpu" in cells:
        parts = bad.split(",")
        parts[5] = cells["gpu"]
        bad = ",".join(parts)
    rows = [*ROWS]
    rows[3] = bad
    code, err, csv = dlrm(tmp_path, "\n".join([HEADER, *rows]) + "\n")
    assert code == 2, err
    where = f"makeroom: {csv}: rows[3].{column}: {message}"
    assert [line for line in err.splitlines() if line.startswith(where)], err


@pytest.mark.parametrize(
    ("option", "value", "line"),
    [
        ("--hours", "inf", "options: --hours: expected a finite number, got inf"),
        ("--hours", "nan", "options: --hours: expected a finite number, got nan"),
        ("--hours", "100000", "options: --hours: expected a number of hours more than 0 and at most 8784"),
        ("--scale", "inf", "options: --scale: expected a finite number, got inf"),
        ("--headroom", "inf", "options: --headroom: expected a finite number, got inf"),
        ("--headroom", "nan", "options: --headroom: expected a finite number, got nan"),
        ("--step", "1ms", "options: --step: expected a number 1 or more"),
        ("--start", "1e999999999", "--start: expected a finite duration"),
        (
            "--gpu-node",
            "cpu=96,memory=1024Gi,gpu=0.5",
            "--gpu-node: gpu: expected a whole number of nvidia.com/gpu",
        ),
        ("--cpu-node", "cpu=1e30,memory=1Gi", "--cpu-node: cpu: expected a quantity of at most 1Pi"),
    ],
)
def test_an_option_out_of_range_is_refused_by_name(
    tmp_path: Path, option: str, value: str, line: str
) -> None:
    code, err, _ = dlrm(tmp_path, "\n".join([HEADER, *ROWS]) + "\n", option, value)
    assert code == 2, err
    assert err.strip().startswith(f"makeroom: {line}"), err
    assert not (tmp_path / "out.yaml").exists()


def test_too_many_samples_are_refused(tmp_path: Path) -> None:
    code, err, _ = dlrm(tmp_path, "\n".join([HEADER, *ROWS]) + "\n", "--hours", "8000", "--step", "1s")
    assert code == 2 and "--step: expected at most 100000 samples" in err


def test_gpu_trace_options_and_cells(tmp_path: Path) -> None:
    directory = write_dir(tmp_path, NODES, PODS)
    out = tmp_path / "out.yaml"
    for option, value, line in (
        ("--hours", "inf", "options: --hours: expected a finite number, got inf"),
        ("--node-scale", "inf", "options: --node-scale: expected a finite number, got inf"),
        ("--node-scale", "1e9", "options: --node-scale: expected a number more than 0 and at most 1000"),
    ):
        result = cli("trace", "gpu", directory, "--write", out, option, value)
        assert result.exit_code == 2 and result.stderr.strip().startswith(f"makeroom: {line}"), result.output
    (directory / "openb_pod_list_default.csv").write_text(
        "\ufeff"
        + "\n".join([POD_HEADER, *PODS[:2], "openb-pod-0002,6000,12288,0.5,460,,Burstable,Running"])
        + "\n"
    )
    result = cli("trace", "gpu", directory, "--write", out, "--start", "1000", "--hours", "1")
    assert result.exit_code == 2
    assert "rows[2]: expected 11 cells as in the header, got 8" in result.stderr
    (directory / "openb_node_list_all_node.csv").write_text(
        "\n".join([NODE_HEADER, *NODES[:5], "openb-node-0005,96000,393216,0.5,T4"]) + "\n"
    )
    result = cli("trace", "gpu", directory, "--write", out)
    assert result.exit_code == 2
    assert "rows[5].gpu: expected a whole number, got '0.5'" in result.stderr


def test_what_the_gpu_trace_writes_counts_shared_gpus_in_whole_units(tmp_path: Path) -> None:
    out = tmp_path / "out.yaml"
    result = cli(
        "trace", "gpu", write_dir(tmp_path, NODES, PODS), "--write", out, "--start", "1000", "--hours", "1"
    )
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "nvidia.com/gpu" not in text  # a fraction of it is what Kubernetes refuses
    assert "alibaba.com/gpu-milli: '460'" in text
    run = cli("simulate", out, "--json")
    assert run.exit_code == 0, run.output


def test_a_window_scaled_beyond_what_a_scenario_holds_is_refused_before_packing(tmp_path: Path) -> None:
    rows = [row(n, "CN", "app_0") for n in range(200)]  # x 1000: 200,000 replicas on 67,000 nodes
    with no_hang(60):  # packing them pod by pod took hours
        code, err, _ = dlrm(tmp_path, "\n".join([HEADER, *rows]) + "\n", "--scale", "1000")
    assert code == 2
    assert err.strip() == (
        "makeroom: --scale: the window x --scale 1000 needs 200000 replicas of one workload "
        "(at most 150000) and 80001 cpu nodes at the peak x --headroom (at most 5000)"
    )
    assert not (tmp_path / "out.yaml").exists()


def test_a_converted_scenario_is_read_back_before_it_is_written() -> None:
    broken = Conversion({"version": 1, "name": "x", "duration": "1h", "node_groups": [], "workloads": []})
    with pytest.raises(InputError) as exc:
        _checked(broken, "trace.csv")
    assert exc.value.lines() == [
        "trace.csv: the converted scenario breaks a rule: node_groups: expected at least one entry"
    ]
