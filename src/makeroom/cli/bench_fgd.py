"""``makeroom bench fgd``: the FGD paper's steady-state protocol on openb, each policy with and without
makeroom relocating lower-priority tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from makeroom.cli.bench import JsonOpt, OutOpt, WriteOpt, bench_app, check_outputs, emit
from makeroom.cli.common import guarded, usage_error
from makeroom.cli.progress import sim_progress


def _seeds(text: str) -> list[int]:
    try:
        if "-" in text:
            low, high = (int(x) for x in text.split("-", 1))
            seeds = list(range(low, high + 1))
        else:
            seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        usage_error(f"--seeds: expected a range such as 42-51 or a list such as 42,43, got {text!r}")
    if not seeds or len(seeds) > 1000 or min(seeds) < 0:
        usage_error(f"--seeds: expected 1 to 1000 seeds of 0 or more, got {text!r}")
    return seeds


@bench_app.command("fgd")
def bench_fgd(
    source: Annotated[Path, typer.Argument(help="The openb trace's folder (alibaba-gpu-v2023/).")],
    seeds: Annotated[str, typer.Option(help="Shuffle seeds: a range 42-51 or a list 42,43.")] = "42-51",
    policies: Annotated[
        str, typer.Option(help="Comma-separated: default, best-fit, gpu-packing, fgd.")
    ] = "default,best-fit,gpu-packing,fgd",
    ratio: Annotated[
        float, typer.Option(help="Feed tasks until their GPU requests reach this x the GPUs.")
    ] = 1.3,
    gpu_nodes_only: Annotated[
        bool,
        typer.Option(
            "--gpu-nodes-only", help="Leave out the nodes without GPUs, as the paper's artifact does."
        ),
    ] = False,
    scores: Annotated[
        str,
        typer.Option(
            help="exact, or artifact: the scores as the paper's artifact computes them, integers "
            "0-100 truncated (near-equal nodes tie, the lowest index wins)."
        ),
    ] = "exact",
    node_order: Annotated[
        str,
        typer.Option(
            help="trace: ties go to the trace's first node; shuffled: to the first in an order drawn "
            "per seed, as the paper's artifact does."
        ),
    ] = "trace",
    picture: Annotated[
        Path | None, typer.Option("--picture", help="The curves: a .png picture or an .html page.")
    ] = None,
    output: OutOpt = None,
    json_out: JsonOpt = False,
    write: WriteOpt = None,
) -> None:
    """Unallocated GPUs at saturation, the share of GPU demand placed and makeroom's moves per GPU it
    let be placed, per scoring policy without and with makeroom, as means with 95% confidence
    intervals over the seeds (docs/benchmarks.md)."""
    from makeroom.bench.fgd import NODE_ORDERS, bench, load
    from makeroom.bench.fgd_score import POLICIES, SCORES

    names = [p.strip() for p in policies.split(",") if p.strip()]
    unknown = [n for n in names if n not in POLICIES]
    if unknown or not names or len(set(names)) != len(names):
        usage_error(f"--policies: expected some of {', '.join(POLICIES)}, each once, got {policies!r}")
    if scores not in SCORES:
        usage_error(f"--scores: expected one of {', '.join(SCORES)}, got {scores!r}")
    if node_order not in NODE_ORDERS:
        usage_error(f"--node-order: expected one of {', '.join(NODE_ORDERS)}, got {node_order!r}")
    if not 0 < ratio <= 10:
        usage_error(f"--ratio: expected more than 0 and at most 10, got {ratio}")
    if picture is not None and picture.suffix.lower() not in (".png", ".html"):
        usage_error(f"--picture: expected a file name ending in .png or .html, got {str(picture)!r}")
    chosen = _seeds(seeds)

    def go() -> None:
        check_outputs(output, write, picture)
        workload = load(source, gpu_nodes_only)
        with sim_progress() as bar:
            data = bench(
                workload,
                names,
                chosen,
                ratio,
                lambda label, total: bar.track(label, total, "%"),
                scores,
                node_order,
            )
        if picture is not None:
            from makeroom.report.fgd import render

            render(data, picture)
        emit(data, json_out, output, write, _table(data), None if picture is None else ("picture", picture))

    guarded(go)


def _table(data: dict[str, Any]) -> Table:
    table = Table(
        title=f"{Path(data['source']).name} · {data['nodes']} nodes, {data['gpus']} GPUs · "
        f"{data['ratio']:g}x arrived · {data.get('scores', 'exact')} scores · "
        f"ties to the {data.get('node_order', 'trace')} order · {len(data['seeds'])} seeds · "
        "means ± 95% CI",
        title_justify="left",
    )
    table.add_column("policy", no_wrap=True)
    for col in ("unallocated GPUs", "fragmented GPUs", "GPU demand placed", "moves", "moves / GPU gained"):
        table.add_column(col, justify="right")
    for name, cmp in data["policies"].items():
        for variant, label in (("without", name), ("with", f"{name} + makeroom")):
            s = cmp[variant]
            per = cmp["moves_per_gpu_gained"] if variant == "with" else None
            table.add_row(
                label,
                _ci(s["unallocated_gpus"], "{:,.1f}"),
                _ci(s["fragmented_gpus"], "{:,.1f}"),
                _ci(s["placed_demand_share"], "{:.2%}"),
                "-" if variant == "without" else _ci(s["moves"], "{:,.0f}"),
                "-" if per is None else _ci(per, "{:.2f}"),
            )
    return table


def _ci(stat: dict[str, Any], fmt: str) -> str:
    if stat["mean"] is None:
        return "-"
    return fmt.format(stat["mean"]) + ("" if stat["ci95"] is None else " ± " + fmt.format(stat["ci95"]))
