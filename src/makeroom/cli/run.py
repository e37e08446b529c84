"""``makeroom run`` (the controller in a cluster) and ``makeroom snapshot`` (the cluster's objects as a
dump that ``makeroom plan`` reads)."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
import yaml

from makeroom.cli.app import ClickError, app
from makeroom.cli.common import ExitStatus, Output, console, fail, format_or_file, guarded, usage_error, warn
from makeroom.controller import RELOCATING, ConsolidationConfig, ControllerConfig, Strategy
from makeroom.controller.config import HeadroomConfig, RoomTarget, duration_text, metadata_of
from makeroom.controller.scope import DEFAULT_SELECTOR, Scope, SelectorError, Side
from makeroom.errors import Problem
from makeroom.kube.client import ConnectOptions
from makeroom.kube.options import NominationMode, RunOptions, default_identity
from makeroom.model import limits
from makeroom.model.expander import expander
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


def need_kube_extra(command: str) -> None:
    """A cluster command without the kube extra: one line naming it, exit 2 (as ``--exact`` without
    the exact extra), before anything else is tried."""
    from makeroom.kube import extra

    missing = extra.missing()
    if missing:
        usage_error(f"{command} needs the kube extra (no module {', '.join(missing)}): {extra.INSTALL}")


def connect_or_exit(
    kubeconfig: Path | None,
    context: str | None,
    impersonate: str | None,
    qps: float | None = None,
    burst: int | None = None,
) -> Any:
    from makeroom.kube import ConnectError, ConnectOptions, connect

    try:
        api, where = connect(
            ConnectOptions(
                kubeconfig=str(kubeconfig) if kubeconfig else None,
                context=context,
                impersonate=impersonate,
                qps=CONNECT.qps if qps is None else qps,
                burst=CONNECT.burst if burst is None else burst,
            )
        )
    except ConnectError as exc:
        fail([f"makeroom: {exc}"])
    return api, where


T = TypeVar("T")
LOG_LEVELS = ("debug", "info", "warning", "error")
MAX_QPS = 10_000.0
MAX_BURST = 100_000


def _checked(option: str, rule: Callable[[Any], T], value: Any) -> T:
    """``value`` by its rule in ``makeroom.model.limits``, or exit 2 naming the option."""
    try:
        return rule(value)
    except limits.InvalidValueError as exc:
        usage_error(f"{option}: {exc}")


def seconds_flag(name: str, value: str) -> float:
    """A duration flag; its range is the knob's own (``ControllerConfig.problems``)."""
    return _checked(name, limits.duration, value)


# The flags' defaults are those of the options they set (controller/config.py, kube/options.py,
# kube/client.py): one definition of each.
DEFAULT = ControllerConfig()
RUN = RunOptions(identity="")
CONNECT = ConnectOptions()
RELOCATING_NAMES = " or ".join(sorted(RELOCATING))


def scope_from_flags(
    both: list[str], room_for: tuple[list[str], str, list[str]], move: tuple[list[str], str, list[str]]
) -> Scope:
    """The scope of the flags: ``--namespace`` adds its namespaces to both sides."""

    def side(flag: str, names: list[str], selector: str, classes: list[str]) -> Side:
        try:
            return Side.of([*both, *names], selector, classes)
        except SelectorError as exc:
            usage_error(f"--{flag}-namespace-selector: {exc}")

    return Scope(room_for=side("room-for", *room_for), move=side("move", *move))


TARGET_SYNTAX = "GROUP:COUNT:workload=NAMESPACE/NAME or GROUP:COUNT:priority-class=NAME"


def target_flag(option: str, text: str) -> RoomTarget:
    """One ``--headroom-target``: room for COUNT pods in GROUP of a workload's or a PriorityClass's
    GPU pods (docs/headroom.md; targets of given requests are the scenario's only)."""
    group, _, rest = text.partition(":")
    count, _, whom = rest.partition(":")
    kind, _, name = whom.partition("=")
    if not group or not name or kind not in ("workload", "priority-class") or not count.isdigit():
        usage_error(f"{option}: expected {TARGET_SYNTAX}, got {text!r}")
    pods = _checked(
        option, lambda v: limits.count(v, low=1, high=limits.MAX_REPLICAS, what="a count"), int(count)
    )
    if kind == "workload":
        return RoomTarget(group, pods, workload=name)
    return RoomTarget(group, pods, priority_class=name)


def headroom_of_flags(
    where: str, targets: list[str], max_price: float, cooldown: str, moves: int, cpu_buffer: int
) -> HeadroomConfig:
    return HeadroomConfig(
        targets=tuple(target_flag(f"{where}--headroom-target", t) for t in targets),
        max_price_per_hour=max_price,
        cooldown=seconds_flag(f"{where}--headroom-cooldown", cooldown),
        max_moves_per_hour=moves,
        cpu_buffer=cpu_buffer,
    )


def _groups(path: Path | None) -> GroupConfig | None:
    return parse_group_config(read_yaml(path), str(path)) if path is not None else None


def config_of_flags(
    strategy: str,
    interval: str,
    timeout: str,
    cooldown: str,
    max_moves: int,
    consolidation: tuple[bool, float, int],
    consolidation_times: tuple[str, str],
    autoscaler_expander: str,
    where: str = "",
    move_jobs_in: tuple[str, ...] = (),
    headroom: tuple[list[str], float, str, int, int] = ([], 0.0, "30m", 10, 0),
) -> ControllerConfig:
    """The controller's config from ``makeroom run``'s flags; a value out of range ends the command
    with the flag's name (status 2), after ``where`` the flags came from (a Deployment's)."""
    at = f"{where}: " if where else ""
    if strategy not in RELOCATING:
        usage_error(f"{at}--strategy: expected {RELOCATING_NAMES}, got {strategy!r}")
    enabled, min_saving, most = consolidation
    window, wait = consolidation_times
    config = ControllerConfig(
        strategy=Strategy(strategy),
        interval=seconds_flag(at + "--interval", interval),
        timeout=seconds_flag(at + "--timeout", timeout),
        cooldown=seconds_flag(at + "--cooldown", cooldown),
        max_moves_in_flight=max_moves,
        move_jobs_in=move_jobs_in,
        consolidation=ConsolidationConfig(
            enabled=enabled,
            min_saving=min_saving,
            max_moves=most,
            window=seconds_flag(at + "--consolidation-window", window),
            wait=seconds_flag(at + "--consolidation-wait", wait),
        ),
        autoscaler_expander=_checked(at + "--autoscaler-expander", expander, autoscaler_expander),
        headroom=headroom_of_flags(at, *headroom),
    )
    for problem in config.problems():
        usage_error(f"{at}{metadata_of(problem.path)['flag']}: {problem.message}")
    return config


def controller_of_args(args: list[str], where: str) -> tuple[ControllerConfig, Scope]:
    """The config and scope of a ``makeroom run`` started with these arguments (a Deployment's), parsed
    by ``run``'s own flags, defaults and checks."""
    import typer.main

    group = typer.main.get_command(app)
    command = group.commands["run"]  # type: ignore[attr-defined]
    try:
        params = command.make_context("run", list(args)).params
    except ClickError as exc:
        usage_error(f"{where}: {exc.format_message()}")
    p = params
    config = config_of_flags(
        p["strategy"],
        p["interval"],
        p["timeout"],
        p["cooldown"],
        p["max_moves"],
        (p["consolidate"], p["consolidation_min_saving"], p["consolidation_max_moves"]),
        (p["consolidation_window"], p["consolidation_wait"]),
        p["autoscaler_expander"],
        where,
        tuple(p["move_jobs_in"] or ()),
        (
            list(p["headroom_target"] or []),
            p["headroom_max_price"],
            p["headroom_cooldown"],
            p["headroom_max_moves_per_hour"],
            p["headroom_cpu_buffer"],
        ),
    )
    scope = scope_from_flags(
        p["namespace"] or [],
        (p["room_for_namespace"] or [], p["room_for_namespace_selector"], p["room_for_priority_class"] or []),
        (p["move_namespace"] or [], p["move_namespace_selector"], p["move_priority_class"] or []),
    )
    return config, scope


@app.command("run")
def run_cmd(
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    impersonate: AsOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Log what it would do; change nothing.")] = False,
    strategy: Annotated[
        str, typer.Option("--strategy", help=f"{RELOCATING_NAMES}.")
    ] = DEFAULT.strategy.value,
    namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--namespace",
            "-n",
            metavar="NS",
            help="Both sides of the scope: as --room-for-namespace NS --move-namespace NS (repeat).",
        ),
    ] = None,
    room_for_namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--room-for-namespace", metavar="NS", help="Make room only for pending pods of these namespaces."
        ),
    ] = None,
    room_for_namespace_selector: Annotated[
        str,
        typer.Option(
            "--room-for-namespace-selector",
            help="Make room only for pending pods whose namespace's labels match (kubectl syntax; '' "
            "for all).",
        ),
    ] = DEFAULT_SELECTOR,
    room_for_priority_class: Annotated[
        list[str] | None,
        typer.Option(
            "--room-for-priority-class",
            metavar="CLASS",
            help="Make room only for pending pods of these PriorityClasses.",
        ),
    ] = None,
    move_namespace: Annotated[
        list[str] | None,
        typer.Option("--move-namespace", metavar="NS", help="Move only pods of these namespaces (repeat)."),
    ] = None,
    move_namespace_selector: Annotated[
        str,
        typer.Option(
            "--move-namespace-selector",
            help="Move only pods whose namespace's labels match (kubectl syntax; '' for all).",
        ),
    ] = DEFAULT_SELECTOR,
    move_priority_class: Annotated[
        list[str] | None,
        typer.Option(
            "--move-priority-class", metavar="CLASS", help="Move only pods of these PriorityClasses (repeat)."
        ),
    ] = None,
    move_jobs_in: Annotated[
        list[str] | None,
        typer.Option(
            "--move-jobs-in",
            help="Namespaces whose Job pods and bare pods may be moved (repeat; none by default: their "
            "work would be lost).",
        ),
    ] = None,
    records_namespace: Annotated[
        str,
        typer.Option(
            "--records-namespace",
            help="Where makeroom keeps its Relocation, Consolidation and Cooldown records.",
        ),
    ] = RUN.records_namespace,
    interval: Annotated[str, typer.Option(help="Seconds between reconciliations.")] = duration_text(
        DEFAULT.interval
    ),
    timeout: Annotated[
        str, typer.Option(help="A relocation not done by then is rolled back.")
    ] = duration_text(DEFAULT.timeout),
    cooldown: Annotated[
        str, typer.Option(help="A moved pod is not moved again within this time.")
    ] = duration_text(DEFAULT.cooldown),
    max_moves: Annotated[
        int, typer.Option("--max-moves", help="Most pods moved at once.")
    ] = DEFAULT.max_moves_in_flight,
    consolidate: Annotated[
        bool,
        typer.Option(
            "--consolidate/--no-consolidate",
            help="Move replicas off costly nodes to cheaper groups when that lets the autoscaler remove "
            "the node for less than it costs (docs/controller.md).",
        ),
    ] = DEFAULT.consolidation.enabled,
    consolidation_min_saving: Annotated[
        float, typer.Option("--consolidation-min-saving", help="Share of the node's price to save.")
    ] = DEFAULT.consolidation.min_saving,
    consolidation_max_moves: Annotated[
        int, typer.Option("--consolidation-max-moves", help="Pods moved per --consolidation-window.")
    ] = DEFAULT.consolidation.max_moves,
    consolidation_window: Annotated[
        str, typer.Option("--consolidation-window", help="The window of the consolidation budget.")
    ] = duration_text(DEFAULT.consolidation.window),
    consolidation_wait: Annotated[
        str,
        typer.Option(
            "--consolidation-wait", help="How long an emptied node may wait for the autoscaler to go."
        ),
    ] = duration_text(DEFAULT.consolidation.wait),
    headroom_target: Annotated[
        list[str] | None,
        typer.Option(
            "--headroom-target",
            metavar="TARGET",
            help=f"With --strategy headroom: room to keep, {TARGET_SYNTAX} (repeat; none: one pod of the "
            "highest-priority GPU workload per GPU group).",
        ),
    ] = None,
    headroom_max_price: Annotated[
        float,
        typer.Option("--headroom-max-price", help="Most a new CPU node for moved pods may cost per hour."),
    ] = DEFAULT.headroom.max_price_per_hour,
    headroom_cooldown: Annotated[
        str,
        typer.Option("--headroom-cooldown", help="A workload moved to keep room is not moved for it sooner."),
    ] = duration_text(DEFAULT.headroom.cooldown),
    headroom_max_moves_per_hour: Annotated[
        int, typer.Option("--headroom-max-moves-per-hour", help="Pods moved to keep room per hour.")
    ] = DEFAULT.headroom.max_moves_per_hour,
    headroom_cpu_buffer: Annotated[
        int,
        typer.Option(
            "--headroom-cpu-buffer", help="Pods' worth of CPU room asked of the autoscaler (0: none)."
        ),
    ] = DEFAULT.headroom.cpu_buffer,
    groups: Annotated[
        Path | None,
        typer.Option("--groups", help="Node groups' min/max/price when the autoscaler status is absent."),
    ] = None,
    metrics_port: Annotated[
        int, typer.Option("--metrics-port", help="Port of /metrics, /healthz, /readyz (0: none).")
    ] = RUN.metrics_port or 0,
    metrics_host: Annotated[
        str, typer.Option("--metrics-host", help="Address to bind the metrics port to.")
    ] = RUN.metrics_host,
    metrics_auth: Annotated[
        bool,
        typer.Option(
            "--metrics-auth/--no-metrics-auth",
            help="Serve /metrics only to a bearer token the API server authenticates and lets get "
            "/metrics (TokenReview, SubjectAccessReview).",
        ),
    ] = RUN.metrics_auth,
    leader_elect: Annotated[
        bool, typer.Option("--leader-elect/--no-leader-elect", help="Act only while holding the Lease.")
    ] = RUN.leader_elect,
    lease_namespace: Annotated[
        str, typer.Option("--lease-namespace", help="Namespace of the Lease.")
    ] = RUN.lease_namespace,
    lease_name: Annotated[str, typer.Option("--lease-name", help="Name of the Lease.")] = RUN.lease_name,
    identity: Annotated[
        str | None, typer.Option("--identity", help="This replica's name in the Lease (default: host_pid).")
    ] = None,
    nomination: Annotated[
        str, typer.Option("--nomination", help=f"{', '.join(NominationMode)}: how room is held.")
    ] = RUN.nomination.value,
    autoscaler_namespace: Annotated[
        str, typer.Option("--autoscaler-namespace", help="Namespace of cluster-autoscaler-status.")
    ] = RUN.autoscaler_namespace,
    autoscaler_expander: Annotated[
        str,
        typer.Option(
            "--autoscaler-expander",
            metavar="EXPANDER",
            help="The cluster-autoscaler's --expander (first of a chain). Only with priority (its "
            "priorities in the groups' order) do moved replicas wait for a new node where a group the "
            "pending pod could use might grow instead.",
        ),
    ] = DEFAULT.autoscaler_expander,
    qps: Annotated[
        float, typer.Option("--qps", help="Client rate limit: requests per second.")
    ] = CONNECT.qps,
    burst: Annotated[int, typer.Option("--burst", help="Client rate limit: burst.")] = CONNECT.burst,
    log_level: Annotated[str, typer.Option("--log-level", help=f"{', '.join(LOG_LEVELS)}.")] = "info",
) -> None:
    """Run the relocation controller against a cluster (in a pod, or from a kubeconfig)."""
    need_kube_extra("makeroom run")
    from makeroom.kube.logs import setup_json_logging
    from makeroom.kube.runner import ListenError, Runner

    if nomination not in set(NominationMode):
        usage_error(f"--nomination: expected {', '.join(NominationMode)}, got {nomination!r}")
    if log_level.lower() not in LOG_LEVELS:
        usage_error(f"--log-level: expected one of {', '.join(LOG_LEVELS)}, got {log_level!r}")
    config = config_of_flags(
        strategy,
        interval,
        timeout,
        cooldown,
        max_moves,
        (consolidate, consolidation_min_saving, consolidation_max_moves),
        (consolidation_window, consolidation_wait),
        autoscaler_expander,
        move_jobs_in=tuple(move_jobs_in or ()),
        headroom=(
            headroom_target or [],
            headroom_max_price,
            headroom_cooldown,
            headroom_max_moves_per_hour,
            headroom_cpu_buffer,
        ),
    )
    scope = scope_from_flags(
        namespace or [],
        (room_for_namespace or [], room_for_namespace_selector, room_for_priority_class or []),
        (move_namespace or [], move_namespace_selector, move_priority_class or []),
    )
    port = _checked("--metrics-port", limits.port, metrics_port)
    host = _checked("--metrics-host", limits.ip_address, metrics_host)
    _checked("--qps", lambda v: limits.number(v, low=0, high=MAX_QPS, low_open=True), qps)
    _checked("--burst", lambda v: limits.count(v, low=1, high=MAX_BURST), burst)
    group_config = guarded(lambda: _groups(groups))
    setup_json_logging(getattr(logging, log_level.upper(), logging.INFO))
    api, where = connect_or_exit(kubeconfig, context, impersonate, qps, burst)
    opts = RunOptions(
        config=config,
        dry_run=dry_run,
        scope=scope,
        records_namespace=records_namespace,
        groups=group_config,
        metrics_port=port or None,
        metrics_host=host,
        metrics_auth=metrics_auth,
        leader_elect=leader_elect,
        lease_namespace=lease_namespace,
        lease_name=lease_name,
        identity=identity or default_identity(),
        pod=os.environ.get("POD_NAME"),
        nomination=NominationMode(nomination),
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
    try:
        code = Runner(api, opts, stop).run()
    except ListenError as exc:
        usage_error(f"--metrics-port: {exc}")
    raise typer.Exit(code)


@app.command("snapshot")
def snapshot_cmd(
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FORMAT",
            help="yaml or json. (A file name here is deprecated: use --write.)",
            show_default=False,
        ),
    ] = None,
    write: Annotated[Path | None, typer.Option("--write", help="File to write; default: stdout.")] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    impersonate: AsOpt = None,
    autoscaler_namespace: Annotated[str, typer.Option("--autoscaler-namespace")] = RUN.autoscaler_namespace,
) -> None:
    """Write the cluster's nodes, pods, PodDisruptionBudgets and Deployments (and the autoscaler's status
    ConfigMap, or Karpenter's NodePools and NodeClaims, if present) as a List that `makeroom plan FILE`
    reads."""
    need_kube_extra("makeroom snapshot")
    from makeroom.kube import KubeError
    from makeroom.kube.dump import as_list, read_objects

    fmt, old_file = format_or_file(output, (Output.YAML, Output.JSON), "--write")
    target = write or old_file or Path("-")
    api, where = connect_or_exit(kubeconfig, context, impersonate)
    try:
        objects = read_objects(api, autoscaler_namespace=autoscaler_namespace)
    except KubeError as exc:
        fail([f"makeroom: reading {where}: {exc}"], ExitStatus.FAILED)
    dump = as_list(objects)
    text = json.dumps(dump, indent=2) + "\n" if fmt is Output.JSON else yaml.safe_dump(dump, sort_keys=False)
    if str(target) == "-":
        sys.stdout.write(text)
    else:
        target.write_text(text)
        kinds: dict[str, int] = {}
        for o in objects:
            kinds[o["kind"]] = kinds.get(o["kind"], 0) + 1
        console.print(
            f"wrote {target}: " + ", ".join(f"{n} {k}" for k, n in kinds.items()),
            markup=False,
            highlight=False,
        )


CONTROLLER_SELECTOR = "app.kubernetes.io/name=makeroom"
"""The chart's label on makeroom's Deployment: where ``plan --kubeconfig`` reads the controller's flags."""


@dataclass(frozen=True, slots=True)
class LiveController:
    """The configuration of the controller running in a cluster, from its Deployment's arguments."""

    config: ControllerConfig
    scope: Scope
    source: str  # which Deployment


def live_state(
    kubeconfig: Path, context: str | None, groups: Path | None
) -> tuple[Any, float, str, LiveController | None]:
    """``makeroom plan --kubeconfig``: the live cluster's state, read once, through the same slim
    objects and conversion as the controller's cache, and the configuration of the makeroom
    controller that runs there (None when none does)."""
    import time

    need_kube_extra("makeroom plan --kubeconfig")
    from makeroom.kube import KubeError
    from makeroom.kube.dump import read_objects
    from makeroom.snapshot import state_from_objects

    api, where = connect_or_exit(kubeconfig, context, None)
    try:
        objects = read_objects(api, slim=True)
        deployments = api.list_all("/apis/apps/v1/deployments", {"labelSelector": CONTROLLER_SELECTOR})
    except KubeError as exc:
        fail([f"makeroom: reading {where}: {exc}"], ExitStatus.FAILED)
    # As the controller's cache: one broken object of the cluster (a pod on a node that is gone, a
    # request the API server took but no node could hold) is left out and said, not the whole plan.
    skipped: list[Problem] = []
    state = state_from_objects(objects, _groups(groups), None, source=where, skipped=skipped)
    for line in sorted({p.render(where) for p in skipped}):
        warn(f"left out of the plan: {line}")
    origin = f"{where} ({len(state.nodes)} nodes, {len(state.pods)} pods)"
    return state, time.time(), origin, controller_of_deployments(deployments["items"])


def controller_of_deployments(items: list[Any]) -> LiveController | None:
    """The first (by namespace and name) Deployment whose container runs ``makeroom run``."""
    found = []
    for d in items:
        meta = d.get("metadata") or {}
        pod = ((d.get("spec") or {}).get("template") or {}).get("spec") or {}
        for c in pod.get("containers") or []:
            args = [str(a) for a in c.get("args") or []]
            if args[:1] == ["run"]:
                found.append((str(meta.get("namespace")), str(meta.get("name")), args[1:]))
    if not found:
        return None
    namespace, name, args = min(found)
    source = f"the Deployment {namespace}/{name}"
    config, scope = controller_of_args(args, source)
    return LiveController(config, scope, source)
