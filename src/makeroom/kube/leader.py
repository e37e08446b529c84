"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

A candidate takes the Lease when it does not exist, when its holder is empty, or when the record has
not changed for ``lease_duration`` seconds of this candidate's own clock (it never compares its clock
with the holder's timestamps). The leader renews every ``retry_period``; it counts as leader only while
its last successful renewal is less than ``renew_deadline`` old (10 s < 15 s: it stops acting before
anyone else may start). Writes carry the resourceVersion read, so two candidates never both win.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from makeroom.controller.port import ConflictError, NotFoundError
from makeroom.kube.client import Api, KubeError

log = logging.getLogger("makeroom.leader")


def micro_time(at: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if at is None else at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        api: Api,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.api = api
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self.collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = (
            lease_duration,
            renew_deadline,
            retry_period,
        )
        self.clock = clock
        self.on_change = on_change
        self._renewed: float | None = None  # clock time of our last successful acquire/renew
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._was_leader = False
        self.transitions = 0

    def is_leader(self) -> bool:
        return self.remaining() > 0

    def remaining(self) -> float:
        """Seconds this replica may still act for: until its last renewal is ``renew_deadline`` old
        (0 when it does not hold the lease). The fence of every write's HTTP attempt."""
        if self._renewed is None:
            return 0.0
        return max(0.0, self.renew_deadline - (self.clock() - self._renewed))

    def _spec(self, acquire_time: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": acquire_time,
            "renewTime": micro_time(),
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the lease afterwards."""
        now = self.clock()
        try:
            lease = self.api.get(self.path)
        except NotFoundError:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(micro_time(), 0),
            }
            try:
                self.api.request("POST", self.collection, body=body)
            except KubeError as exc:
                log.info("lease not created", extra={"lease": self.name, "error": str(exc)})
                return False
            self._renewed = now
            return True
        except KubeError as exc:
            log.warning("lease not read", extra={"lease": self.name, "error": str(exc)})
            return False
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, spec.get("renewTime"), spec.get("leaseDurationSeconds"), spec.get("acquireTime"))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and now - self._observed_at < duration:
            return False
        mine = holder == self.identity
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
        acquire = str(spec["acquireTime"]) if mine and spec.get("acquireTime") else micro_time()
        metadata = {k: v for k, v in lease["metadata"].items() if k != "managedFields"}
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": self._spec(acquire, transitions),
        }
        try:
            self.api.request("PUT", self.path, body=body)
        except ConflictError:
            return False
        except KubeError as exc:
            log.warning("lease not renewed", extra={"lease": self.name, "error": str(exc)})
            return False
        self._renewed = now
        return True

    def step(self) -> bool:
        held = self.try_acquire_or_renew()
        leader = self.is_leader()
        if leader != self._was_leader:
            self._was_leader = leader
            if leader:
                self.transitions += 1
                log.info("became the leader", extra={"lease": self.name, "identity": self.identity})
            else:
                log.warning(
                    "lost the lease; stopped acting", extra={"lease": self.name, "identity": self.identity}
                )
            if self.on_change is not None:
                self.on_change(leader)
        return held

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.step()
            stop.wait(self.retry_period)

    def release(self) -> None:
        """Give the lease up (on SIGTERM) so that the next candidate need not wait for it to expire.
        Also when this replica's renew deadline has passed (a call that hung past it on the way out):
        the Lease is released only if it still names this replica, and the write carries its
        resourceVersion, so a lease another replica holds is never touched."""
        if self._renewed is None:
            return
        self._renewed = None
        try:
            lease = self.api.get(self.path)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"] = {
                **lease["spec"],
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": micro_time(),
            }
            lease["metadata"].pop("managedFields", None)
            self.api.request("PUT", self.path, body=lease)
            log.info("released the lease", extra={"lease": self.name, "identity": self.identity})
        except KubeError as exc:
            log.warning("lease not released", extra={"lease": self.name, "error": str(exc)})
