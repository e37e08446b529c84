"""``makeroom bench plan``: the planner at Kubernetes' limits, against per-node preemption."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from makeroom.cli.bench import JsonOpt, OutOpt, WriteOpt, bench_app, emit
from makeroom.cli.common import console, guarded


@bench_app.command("plan")
def bench_plan(
    quick: Annotated[
        bool, typer.Option(help="One small cluster (100 nodes, 3,000 pods, 20 pending).")
    ] = False,
    output: OutOpt = None,
    json_out: JsonOpt = False,
    write: WriteOpt = None,
) -> None:
    """Build time, plan time per pending pod (p50, p99) and peak memory on generated clusters of 500,
    1,000 and 5,000 nodes, with per-node preemption on the same states as the baseline (goals at
    5,000 nodes and 150,000 pods: p50 <= 30 ms, p99 <= 200 ms, build <= 3 s, peak <= 1.5 GiB)."""
    from makeroom.bench.plan import run_plan_bench

    def progress(label: str) -> None:
        if not json_out and output in (None, "", "table"):
            console.print(f"measuring {label} ...", markup=False, highlight=False)

    def go() -> None:
        data = run_plan_bench(progress, quick=quick)
        table = Table(title="makeroom bench plan")
        for col in (
            "cluster",
            "build s",
            "plan p50 ms",
            "plan p99 ms",
            "100 at once ms/pod",
            "preemption p50 ms",
            "peak MiB",
        ):
            table.add_column(col, justify="left" if col == "cluster" else "right")
        for row in data["sizes"]:
            if "error" in row:
                table.add_row(row["size"]["name"], "error: " + " ".join(row["error"]), "", "", "", "", "")
                continue
            batch = {b["pending"]: b for b in row["plan_batches"]}
            last = batch[max(batch)] if batch else {"per_pod_ms": 0.0}
            table.add_row(
                row["size"]["name"],
                f"{row['build_s']:.2f}",
                f"{row['plan_single_ms']['p50']:.1f}",
                f"{row['plan_single_ms']['p99']:.1f}",
                f"{last['per_pod_ms']:.1f}",
                f"{row['baseline_find_preemption_ms']['p50']:.1f}",
                f"{row['peak_mib']:.0f}",
            )
        emit(data, json_out, output, write, table)

    guarded(go)
