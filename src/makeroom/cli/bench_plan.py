"""``makeroom bench plan``: the planner at Kubernetes' limits, against per-node preemption."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from makeroom.cli.bench import JsonOpt, OutOpt, WriteOpt, bench_app, check_outputs, emit
from makeroom.cli.common import console, guarded


@bench_app.command("plan")
def bench_plan(
    quick: Annotated[
        bool, typer.Option(help="One small cluster (100 nodes, 3,000 pods, 20 pending), 5 mid-size ones.")
    ] = False,
    size: Annotated[
        str | None,
        typer.Option(
            metavar="TEXT",
            help="Only the cluster sizes whose name holds TEXT (e.g. 'constrained', '5,000 nodes'), "
            "without the mid-size plans.",
        ),
    ] = None,
    output: OutOpt = None,
    json_out: JsonOpt = False,
    write: WriteOpt = None,
) -> None:
    """Build time, plan time per pending pod (alone, and with 10 waiting at once), 100 waiting at once
    and peak memory on generated clusters of 500, 1,000 and 5,000 nodes, with per-node preemption and
    the per-pod planner of before issue 13 on the same states as baselines; and the joint plans of 60
    mid-size clusters against their exact optimum (goals at 5,000 nodes and 150,000 pods: p50 <= 30 ms
    and p99 <= 200 ms per waiting pod, 100 waiting within 3 s, build <= 3 s, peak <= 1.5 GiB; a
    mid-size joint plan within 1 s)."""
    from makeroom.bench.plan import run_plan_bench

    def progress(label: str) -> None:
        if not json_out and output in (None, "", "table"):
            console.print(f"measuring {label} ...", markup=False, highlight=False)

    def go() -> None:
        check_outputs(output, write)
        data = run_plan_bench(progress, quick=quick, only=size)
        if not data["sizes"]:
            raise typer.BadParameter(f"no cluster size's name holds {size!r}", param_hint="--size")
        emit(data, json_out, output, write, plan_table(data))

    guarded(go)


def plan_table(data: dict[str, Any]) -> Table:
    """The result of ``bench plan`` for a person: one row per cluster size, the mid-size joint plans
    in the caption."""
    table = Table(title="makeroom bench plan")
    columns = (
        "cluster",
        "build s",
        "alone p50/p99 ms",
        "10 waiting ms/pod p50/p99",
        "10 waiting, per-pod planner",
        "10 waiting, controller's round",
        "100 waiting s",
        "100 waiting, per-pod planner",
        "preemption p50 ms",
        "peak MiB",
    )
    for col in columns:
        table.add_column(col, justify="left" if col == "cluster" else "right")
    for row in data["sizes"]:
        if "error" in row:
            table.add_row(row["size"]["name"], "error: " + " ".join(row["error"]), *[""] * 8)
            continue
        joint, alone = row["waiting"]["default"], row["waiting"]["per_pod"]
        table.add_row(
            row["size"]["name"],
            f"{row['build_s']:.2f}",
            f"{row['plan_single_ms']['p50']:.1f}/{row['plan_single_ms']['p99']:.1f}",
            _pair(joint["ms_per_pod_with_10"]),
            _pair(alone["ms_per_pod_with_10"]),
            _pair(row["waiting"]["round"]["ms_per_pod_with_10"]),
            f"{joint['all_at_once']['total_s']:.2f}",
            f"{alone['all_at_once']['total_s']:.2f}",
            f"{row['baseline_find_preemption_ms']['p50']:.1f}",
            f"{row['peak_mib']:.0f}",
        )
    mid = data["midsize"]
    if mid is None:
        table.caption = "mid-size joint plans: not run (--size)"
    elif "error" in mid:
        table.caption = "mid-size: " + " ".join(mid["error"])
    else:
        table.caption = f"mid-size joint plans ({mid['clusters']} clusters): " + "; ".join(
            f"{name} p50 {mid[name]['p50_s'] * 1000:.0f} ms, max {mid[name]['max_s'] * 1000:.0f} ms"
            + (f", optimal {mid[name]['equals_optimum']}" if "equals_optimum" in mid[name] else "")
            for name in ("default", "exact", "per_pod", "round")
        )
    return table


def _pair(stats: dict[str, float]) -> str:
    return f"{stats['p50']:.1f}/{stats['p99']:.1f}"
