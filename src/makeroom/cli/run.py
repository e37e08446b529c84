"""``makeroom run`` (the controller in a cluster) and ``makeroom snapshot`` (the cluster's objects as a
dump that ``makeroom plan`` reads)."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from makeroom.cli.app import app
from makeroom.cli.common import console, fail, guarded, usage_error
from makeroom.controller import STRATEGIES, ControllerConfig
from makeroom.model import QuantityError, parse_duration
from makeroom.scenario import read_yaml
from makeroom.snapshot import GroupConfig, parse_group_config

KubeconfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster)."
    ),
]
ContextOpt = Annotated[str | None, typer.Option("--context", help="The kubeconfig context to use.")]
AsOpt = Annotated[
    str | None,
    typer.Option("--as", help="Impersonate this user (e.g. system:serviceaccount:NS:NAME) on every call."),
]


def connect_or_exit(
    kubeconfig: Path | None, context: str | None, impersonate: str | None, qps: float = 20.0, burst: int = 30
) -> Any:
    from makeroom.kube import ConnectError, ConnectOptions, connect

    try:
        api, where = connect(
            ConnectOptions(
                kubeconfig=str(kubeconfig) if kubeconfig else None,
                context=context,
                impersonate=impersonate,
                qps=qps,
                burst=burst,
            )
        )
    except ConnectError as exc:
        fail([f"makeroom: {exc}"])
    return api, where


def _seconds(name: str, value: str) -> float:
    try:
        return parse_duration(value)
    except QuantityError as exc:
        usage_error(f"{name}: {exc}")


def _groups(path: Path | None) -> GroupConfig | None:
    return parse_group_config(read_yaml(path), str(path)) if path is not None else None


@app.command("run")
def run_cmd(
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    impersonate: AsOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Log what it would do; change nothing.")] = False,
    strategy: Annotated[str, typer.Option("--strategy", help="evict or migrate.")] = "migrate",
    namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--namespace", "-n", help="Make room for, and move, only pods of these namespaces (repeat)."
        ),
    ] = None,
    interval: Annotated[str, typer.Option(help="Seconds between reconciliations.")] = "2s",
    timeout: Annotated[str, typer.Option(help="A relocation not done by then is rolled back.")] = "15m",
    cooldown: Annotated[str, typer.Option(help="A moved pod is not moved again within this time.")] = "10m",
    max_moves: Annotated[int, typer.Option("--max-moves", help="Most pods moved at once.")] = 20,
    consolidate: Annotated[
        bool,
        typer.Option(
            "--consolidate/--no-consolidate",
            help="Move replicas off costly nodes to cheaper groups when that lets the autoscaler remove "
            "the node for less than it costs (docs/controller.md).",
        ),
    ] = True,
    consolidation_min_saving: Annotated[
        float,
        typer.Option(
            "--consolidation-min-saving", min=0.0, max=1.0, help="Share of the node's price to save."
        ),
    ] = 0.2,
    consolidation_max_moves: Annotated[
        int, typer.Option("--consolidation-max-moves", min=1, help="Pods moved per --consolidation-window.")
    ] = 10,
    consolidation_window: Annotated[
        str, typer.Option("--consolidation-window", help="The window of the consolidation budget.")
    ] = "10m",
    consolidation_wait: Annotated[
        str,
        typer.Option(
            "--consolidation-wait", help="How long an emptied node may wait for the autoscaler to go."
        ),
    ] = "30m",
    groups: Annotated[
        Path | None,
        typer.Option("--groups", help="Node groups' min/max/price when the autoscaler status is absent."),
    ] = None,
    metrics_port: Annotated[
        int, typer.Option("--metrics-port", help="Port of /metrics, /healthz, /readyz (0: none).")
    ] = 8080,
    metrics_host: Annotated[
        str, typer.Option("--metrics-host", help="Address to bind the metrics port to.")
    ] = "0.0.0.0",
    leader_elect: Annotated[
        bool, typer.Option("--leader-elect/--no-leader-elect", help="Act only while holding the Lease.")
    ] = True,
    lease_namespace: Annotated[
        str, typer.Option("--lease-namespace", help="Namespace of the Lease.")
    ] = "default",
    lease_name: Annotated[str, typer.Option("--lease-name", help="Name of the Lease.")] = "makeroom",
    identity: Annotated[
        str | None, typer.Option("--identity", help="This replica's name in the Lease (default: host_pid).")
    ] = None,
    nomination: Annotated[
        str, typer.Option("--nomination", help="auto, status or taint: how room is held.")
    ] = "auto",
    autoscaler_namespace: Annotated[
        str, typer.Option("--autoscaler-namespace", help="Namespace of cluster-autoscaler-status.")
    ] = "kube-system",
    autoscaler_expander: Annotated[
        str,
        typer.Option(
            "--autoscaler-expander",
            help="The cluster-autoscaler's --expander (first of a chain). Only with priority (its "
            "priorities in the groups' order) do moved replicas wait for a new node where a group the "
            "pending pod could use might grow instead.",
        ),
    ] = "least-waste",
    qps: Annotated[float, typer.Option("--qps", help="Client rate limit: requests per second.")] = 20.0,
    burst: Annotated[int, typer.Option("--burst", help="Client rate limit: burst.")] = 30,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning.")] = "info",
) -> None:
    """Run the relocation controller against a cluster (in a pod, or from a kubeconfig)."""
    from makeroom.kube.logs import setup_json_logging
    from makeroom.kube.runner import Runner, RunOptions, default_identity

    if strategy not in STRATEGIES:
        usage_error(f"--strategy: expected one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if nomination not in ("auto", "status", "taint"):
        usage_error(f"--nomination: expected auto, status or taint, got {nomination!r}")
    config = ControllerConfig(
        strategy=strategy,
        interval=_seconds("--interval", interval),
        timeout=_seconds("--timeout", timeout),
        cooldown=_seconds("--cooldown", cooldown),
        max_moves_in_flight=max_moves,
        consolidation=consolidate,
        consolidation_min_saving=consolidation_min_saving,
        consolidation_max_moves=consolidation_max_moves,
        consolidation_window=_seconds("--consolidation-window", consolidation_window),
        consolidation_wait=_seconds("--consolidation-wait", consolidation_wait),
        autoscaler_expander=autoscaler_expander.split(",")[0].strip(),
    )
    group_config = guarded(lambda: _groups(groups))
    setup_json_logging(getattr(logging, log_level.upper(), logging.INFO))
    api, where = connect_or_exit(kubeconfig, context, impersonate, qps, burst)
    opts = RunOptions(
        config=config,
        dry_run=dry_run,
        namespaces=tuple(namespace or ()),
        groups=group_config,
        metrics_port=metrics_port or None,
        metrics_host=metrics_host,
        leader_elect=leader_elect,
        lease_namespace=lease_namespace,
        lease_name=lease_name,
        identity=identity or default_identity(),
        nomination=nomination,
        autoscaler_namespace=autoscaler_namespace,
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        logging.getLogger("makeroom.run").info("signal: stopping", extra={"signal": signum})
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    logging.getLogger("makeroom.run").info(
        "starting",
        extra={
            "cluster": where,
            "identity": opts.identity,
            "strategy": strategy,
            "dry_run": dry_run,
            "leader_elect": leader_elect,
        },
    )
    code = Runner(api, opts, stop).run()
    raise typer.Exit(code)


@app.command("snapshot")
def snapshot_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="File to write (YAML); - for stdout.")],
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    impersonate: AsOpt = None,
    autoscaler_namespace: Annotated[str, typer.Option("--autoscaler-namespace")] = "kube-system",
) -> None:
    """Write the cluster's nodes, pods, PodDisruptionBudgets and Deployments (and the autoscaler's status
    ConfigMap if present) as a List that `makeroom plan FILE` reads."""
    from makeroom.kube import KubeError
    from makeroom.kube.dump import as_list, read_objects

    api, where = connect_or_exit(kubeconfig, context, impersonate)
    try:
        objects = read_objects(api, autoscaler_namespace=autoscaler_namespace)
    except KubeError as exc:
        fail([f"makeroom: reading {where}: {exc}"])
    text = yaml.safe_dump(as_list(objects), sort_keys=False)
    if str(output) == "-":
        sys.stdout.write(text)
    else:
        output.write_text(text)
        kinds: dict[str, int] = {}
        for o in objects:
            kinds[o["kind"]] = kinds.get(o["kind"], 0) + 1
        console.print(
            f"wrote {output}: " + ", ".join(f"{n} {k}" for k, n in kinds.items()),
            markup=False,
            highlight=False,
        )


def live_state(kubeconfig: Path, context: str | None, groups: Path | None) -> tuple[Any, float, str]:
    """``makeroom plan --kubeconfig``: the live cluster's state, read once, through the same slim
    objects and conversion as the controller's cache."""
    import time

    from makeroom.kube import KubeError
    from makeroom.kube.dump import read_objects
    from makeroom.snapshot import state_from_objects

    api, where = connect_or_exit(kubeconfig, context, None)
    try:
        objects = read_objects(api, slim=True)
    except KubeError as exc:
        fail([f"makeroom: reading {where}: {exc}"])
    state = state_from_objects(objects, _groups(groups), None, source=where)
    return state, time.time(), f"{where} ({len(state.nodes)} nodes, {len(state.pods)} pods)"
