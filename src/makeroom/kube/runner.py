"""``makeroom run``: the watch cache, the leader election, the controller's loop, metrics and health.

The loop reconciles every ``interval`` seconds, and at once when the cache sees a pod become
unschedulable. It acts only while this replica holds the Lease (checked again before every API write);
each time it becomes the leader it starts a fresh Controller, which reads the records in the cluster
and resumes or rolls back what the previous leader left. On SIGTERM it stops acting at once, gives the
Lease up and exits: the records in the cluster carry the state to the next leader.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping
from typing import Any

from makeroom.controller import Controller
from makeroom.controller.port import ClusterError
from makeroom.controller.reasons import UNPRICED, ObjectKind, Reason
from makeroom.controller.records import RecordKind
from makeroom.errors import InputError
from makeroom.kube.cache import Cache
from makeroom.kube.client import Api, KubeError, RateLimiter
from makeroom.kube.cluster import KubeCluster, Nomination
from makeroom.kube.dryrun import DryRunCluster
from makeroom.kube.leader import LeaderElector
from makeroom.kube.metrics import HealthServer, Metrics, MetricsAuth
from makeroom.kube.options import NominationMode, RunOptions, default_identity
from makeroom.model.state import ClusterState
from makeroom.planner import Plan
from makeroom.planner.consolidate import unpriced
from makeroom.planner.cpsat import exact_available

log = logging.getLogger("makeroom.run")

__all__ = ["ListenError", "RunOptions", "Runner", "default_identity", "plan_summary"]


class ListenError(Exception):
    """The metrics port cannot be opened: nothing has started, and the command exits 2."""


class Runner:
    def __init__(self, api: Api, opts: RunOptions, stop: threading.Event | None = None) -> None:
        self.api, self.opts = api, opts
        self.stop = stop or threading.Event()
        self.metrics = Metrics()
        self.heartbeat = self.progress = time.monotonic()
        api.on_attempt = self._progressed
        self.cache = Cache(
            api, opts.groups, autoscaler_namespace=opts.autoscaler_namespace, resync=opts.resync
        )
        self.elector: LeaderElector | None = None
        if opts.leader_elect and not opts.dry_run:
            lease_api = Api(api.transport, None, retries=0, timeout=opts.config.interval + 3.0)
            self.elector = LeaderElector(lease_api, opts.lease_namespace, opts.lease_name, opts.identity)
        self.kube = KubeCluster(
            api,
            self.cache,
            identity=opts.identity,
            records_namespace=opts.records_namespace,
            nomination=Nomination(NominationMode(opts.nomination)),
            may_act=self.may_act,
            on_action=self._on_action,
            fence=self.lease_left,
        )
        self.port: KubeCluster | DryRunCluster = DryRunCluster(self.kube) if opts.dry_run else self.kube
        self.controller: Controller | None = None
        self.last_plan: Plan | None = None
        self.health: HealthServer | None = None
        self._said_unpriced = False

    # --- gates ----------------------------------------------------------------------------------
    def may_act(self) -> bool:
        if self.stop.is_set():
            return False
        return self.elector is None or self.elector.is_leader()

    def lease_left(self) -> float:
        """Seconds this replica may still act for: the fence of each write's HTTP attempt."""
        if self.stop.is_set():
            return 0.0
        return math.inf if self.elector is None else self.elector.remaining()

    def _on_action(self, verb: str, target: str, detail: Mapping[str, Any]) -> None:
        self.metrics.actions.labels(verb=verb).inc()
        at = self.cache.unschedulable_at.pop(target, None)
        if at is not None:
            self.metrics.first_action.observe(time.monotonic() - at)
            log.info(
                "first action for an unschedulable pod",
                extra={"pod": target, "seconds": time.monotonic() - at},
            )

    def _progressed(self) -> None:
        self.progress = time.monotonic()

    def healthy(self) -> bool:
        """Stalled only when makeroom itself is stuck: no round started and no API call came back (or
        failed) for a minute. A long round that is making calls (a slow API server, a rate limit) is
        alive; restarting it would help nothing."""
        last = max(self.heartbeat, self.progress)
        return time.monotonic() - last < max(60.0, 10 * self.opts.config.interval)

    def ready(self) -> bool:
        return self.cache.synced

    # --- the loop -------------------------------------------------------------------------------
    def start(self) -> None:
        if self.opts.metrics_port is not None:
            host, port = self.opts.metrics_host, self.opts.metrics_port
            try:
                auth = None
                if self.opts.metrics_auth:  # its own small rate limit: a scraper never takes makeroom's
                    reviews = Api(self.api.transport, RateLimiter(5.0, 10), retries=0, timeout=5.0)
                    auth = MetricsAuth(reviews)
                self.health = HealthServer(port, self.metrics, self.healthy, self.ready, host, auth)
            except (OSError, OverflowError) as exc:  # in use, not ours to bind, not an address here
                raise ListenError(
                    f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}"
                ) from None
            self.health.start()
            log.info(
                "serving /healthz /readyz /metrics",
                extra={"port": self.health.port, "metrics_auth": self.opts.metrics_auth},
            )
        self.cache.start()
        if self.elector is not None:
            self.metrics.leader.set(0)
            threading.Thread(target=self.elector.run, args=(self.stop,), name="leader", daemon=True).start()

    def run(self) -> int:
        self.start()
        # OR-Tools' import (seconds under load: it brings pandas) while the cache syncs, before the
        # first round: paid in the round of the first pod that waits, it let Karpenter launch the node
        # the relocation made needless (docs/controller.md)
        exact_available()
        try:
            start = time.monotonic()
            while not self.cache.wait_synced(1.0):
                self.heartbeat = time.monotonic()
                if self.stop.is_set():
                    return 0
                if time.monotonic() - start > self.opts.sync_timeout:
                    errors = {
                        k: i.last_error for k, i in self.cache.informers.items() if not i.synced.is_set()
                    }
                    log.error("the watch cache did not sync", extra={"errors": errors})
                    return 1
            log.info("watch cache synced", extra={"objects": self.cache.memory_objects()})
            while not self.stop.is_set():
                self.heartbeat = time.monotonic()
                self.once()
                self.cache.unschedulable.wait(self.opts.config.interval)
                self.cache.unschedulable.clear()
            return 0
        finally:
            self.shutdown()

    def once(self) -> None:
        for kind, inf in self.cache.informers.items():
            self.metrics.cache_objects.labels(kind=kind).set(len(inf.store))
        if not self.may_act() and not self.opts.dry_run:
            if self.controller is not None:
                log.warning("not the leader: stopped acting")
            self.controller = None
            self.metrics.leader.set(0)
            return
        self.metrics.leader.set(1)
        if self.controller is None:
            log.info("acting", extra={"identity": self.opts.identity, "dry_run": self.opts.dry_run})
            self.controller = Controller(self.port, self.kube, self.opts.config, self.opts.scope)
        started = time.perf_counter()
        try:
            state = self.port.snapshot()
        except InputError as exc:
            log.error("the cluster cannot be planned on", extra={"problems": exc.lines()})
            return
        except Exception:  # an object no rule foresaw: this round is lost, never the controller
            log.exception("the cluster's state could not be built")
            self.metrics.errors.inc()
            return
        self.metrics.build_seconds.set(self.cache.last_build_seconds)
        self._say_if_unpriced(state)
        if not self.opts.dry_run:
            try:
                self.kube.release_orphan_reservations()
            except KubeError as exc:
                log.warning("orphan reservations not released", extra={"error": str(exc)})
        if self.opts.dry_run:
            self._report_plan(self.controller, state)
        try:
            report = self.controller.tick()
        except Exception:  # never crash the loop: the records in the cluster carry the state
            log.exception("reconciliation failed")
            self.metrics.errors.inc()
            return
        self.metrics.reconcile_seconds.observe(time.perf_counter() - started)
        self.metrics.count(report)
        try:
            after = self.port.snapshot()
        except Exception:
            log.exception("the cluster's state could not be built")
            return
        self.metrics.pending.set(sum(1 for p in after.pending() if p.unschedulable_since is not None))
        self.metrics.in_flight.set(len(self.kube.in_flight[RecordKind.RELOCATION]))
        self.metrics.consolidating.set(len(self.kube.in_flight[RecordKind.CONSOLIDATION]))
        if report.started or report.done or report.rolled_back or report.errors:
            log.info(
                "reconciled",
                extra={
                    "started": report.started,
                    "done": report.done,
                    "rolled_back": report.rolled_back,
                    "actions": report.actions,
                    "errors": report.errors,
                    "seconds": round(time.perf_counter() - started, 4),
                },
            )

    def _say_if_unpriced(self, state: ClusterState) -> None:
        """Consolidation on, and no node group priced: it never starts, and nothing else would show it.
        Said once (a warning, and an Event on makeroom's own pod when it runs in one); the gauge holds
        while it lasts."""
        blind = self.opts.config.consolidation.enabled and unpriced(state)
        self.metrics.unpriced.set(1 if blind else 0)
        if not blind or self._said_unpriced:
            return
        self._said_unpriced = True
        log.warning(UNPRICED, extra={"groups": sorted(state.groups)})
        if self.opts.pod and not self.opts.dry_run:
            try:
                self.kube.emit_event(
                    ObjectKind.POD,
                    f"{self.opts.records_namespace}/{self.opts.pod}",
                    Reason.CONSOLIDATION_UNPRICED,
                    UNPRICED,
                )
            except ClusterError as exc:
                log.warning(
                    "Event not recorded",
                    extra={"reason": Reason.CONSOLIDATION_UNPRICED.value, "error": str(exc)},
                )

    def _report_plan(self, controller: Controller, state: ClusterState) -> None:
        """Dry run: the plan the controller would carry out (its own policy), logged when it changes."""
        result = controller.preview(state)
        summary = plan_summary(result)
        if self.last_plan is None or plan_summary(self.last_plan) != summary:
            log.info("dry run: the plan makeroom would carry out", extra={"dry_run": True, "plan": summary})
        self.last_plan = result

    def shutdown(self) -> None:
        self.stop.set()
        if self.elector is not None:
            self.elector.release()
        self.cache.stop()
        if self.health is not None:
            self.health.stop()


def plan_summary(result: Plan) -> dict[str, Any]:
    return {
        "placements": [
            {"pod": p.pod.key, "node": p.node, "new_node_group": p.new_node_group, "reason": p.reason.value}
            for p in result.placements
        ],
        "moves": [
            {
                "pod": m.pod.key,
                "workload": m.workload,
                "from": m.from_node,
                "to": m.to_node,
                "to_new_group": m.to_new_node_group,
            }
            for m in result.moves
        ],
        "unplaceable": [{"pod": u.pod.key, "reason": u.reason.value} for u in result.unplaceable],
    }
