"""``makeroom cleanup``: undo everything makeroom has under way and remove every mark it left, before
an uninstall (the Helm chart runs it as a pre-delete hook). Idempotent."""

from __future__ import annotations

from typing import Annotated

import typer

from makeroom.cli.app import app
from makeroom.cli.common import err_console, say
from makeroom.cli.run import (
    RUN,
    AsOpt,
    ContextOpt,
    KubeconfigOpt,
    connect_or_exit,
    need_kube_extra,
    seconds_flag,
)


@app.command("cleanup")
def cleanup_cmd(
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    impersonate: AsOpt = None,
    records_namespace: Annotated[
        str,
        typer.Option(
            "--records-namespace",
            help="Where makeroom keeps its Relocation, Consolidation and Cooldown records (its namespace).",
        ),
    ] = RUN.records_namespace,
    lease_namespace: Annotated[
        str, typer.Option("--lease-namespace", help="Namespace of makeroom's Lease.")
    ] = RUN.lease_namespace,
    lease_name: Annotated[
        str, typer.Option("--lease-name", help="Name of makeroom's Lease.")
    ] = RUN.lease_name,
    leader_elect: Annotated[
        bool,
        typer.Option(
            "--leader-elect/--no-leader-elect",
            help="Hold makeroom's Lease while cleaning, so that no replica acts meanwhile (and delete it).",
        ),
    ] = RUN.leader_elect,
    controller_deployment: Annotated[
        str | None,
        typer.Option(
            "--controller-deployment",
            help="makeroom's own Deployment (in --records-namespace): scaled to 0 first, its pods "
            "waited for.",
        ),
    ] = None,
    autoscaler_namespace: Annotated[
        str, typer.Option("--autoscaler-namespace", help="Namespace of cluster-autoscaler-status.")
    ] = RUN.autoscaler_namespace,
    timeout: Annotated[
        str, typer.Option("--timeout", help="Give up after this long (30s, 2m; a plain number is seconds).")
    ] = "2m",
) -> None:
    """Roll back every relocation, give up every consolidation and remove every mark makeroom left
    (annotations, taints, surges, records): what an uninstall needs first. Safe to run again."""
    need_kube_extra("makeroom cleanup")
    from makeroom.kube.cleanup import CleanupError, CleanupOptions, clean_up
    from makeroom.kube.client import KubeError

    give_up = seconds_flag("--timeout", timeout)
    api, where = connect_or_exit(kubeconfig, context, impersonate)
    opts = CleanupOptions(
        records_namespace=records_namespace,
        lease_namespace=lease_namespace if leader_elect else None,
        lease_name=lease_name,
        controller_deployment=controller_deployment,
        autoscaler_namespace=autoscaler_namespace,
        timeout=give_up,
    )
    say(f"cleaning up makeroom on {where}")
    try:
        result = clean_up(api, opts, say)
    except (CleanupError, KubeError) as exc:  # the cluster's failure, not the input's: exit status 1
        err_console.print(
            f"makeroom: cleanup: {exc} (nothing is lost: run it again)", markup=False, highlight=False
        )
        raise typer.Exit(1) from None
    if result.actions:
        say(
            f"done: {len(result.relocations)} relocation(s) rolled back, "
            f"{len(result.consolidations)} consolidation(s) given up, {result.actions} change(s), "
            f"{result.passes} pass(es)"
        )
    else:
        say("nothing of makeroom was left")
