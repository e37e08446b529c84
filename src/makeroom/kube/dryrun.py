"""``--dry-run``: the Cluster port with every mutating verb replaced by a log line and a record of
what it would have done. Reads go to the real cluster; nothing is written to the API server."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from makeroom.controller.port import Cluster
from makeroom.controller.reasons import ObjectKind, Reason
from makeroom.controller.records import Cooldown, Moves, RecordKind, Records, Stored
from makeroom.controller.scope import NamespaceLabels
from makeroom.model import Resources, Taint, Toleration
from makeroom.model.state import ClusterState

log = logging.getLogger("makeroom.dryrun")


@dataclass(frozen=True, slots=True)
class WouldDo:
    verb: str
    target: str
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"verb": self.verb, "object": self.target, **self.detail}


class DryRunCluster:
    """A decorator of any Cluster: the reads (``snapshot``, ``namespaces``, ``deployment_of``,
    ``records``) are the real ones, every other verb only logs."""

    def __init__(self, inner: Cluster) -> None:
        self.inner = inner
        self.would: list[WouldDo] = []

    def snapshot(self) -> ClusterState:
        return self.inner.snapshot()

    def namespaces(self) -> NamespaceLabels:
        return self.inner.namespaces()

    def deployment_of(self, pod: str) -> str | None:
        return self.inner.deployment_of(pod)

    def records(self) -> Records:
        return self.inner.records()

    def save_record(self, record: Stored) -> None:
        detail: dict[str, object] = {"phase": record.phase.value} if isinstance(record, Moves) else {}
        if isinstance(record, Cooldown):
            detail = {"until": record.until}
        self._note("record", f"{record.kind}/{record.subject}", **detail)

    def delete_record(self, kind: RecordKind, subject: str) -> None:
        self._note("forget", f"{kind}/{subject}")

    def _note(self, verb: str, target: str, **detail: Any) -> None:
        item = WouldDo(verb, target, detail)
        self.would.append(item)
        log.info(
            "dry run: would act",
            extra={"dry_run": True, "verb": verb, "object": target, "detail": detail},
        )

    def evict(self, pod: str) -> None:
        self._note("evict", pod)

    def delete_pod(self, pod: str) -> None:
        self._note("delete", pod)

    def annotate_pod(self, pod: str, changes: Mapping[str, str | None]) -> None:
        self._note("annotate", pod, changes=dict(changes))

    def may_tidy(self, namespace: str) -> bool:
        return True  # nothing is sent: every write it would make is reported

    def add_toleration(self, pod: str, toleration: Toleration) -> None:
        self._note("tolerate", pod, key=toleration.key, value=toleration.value, effect=toleration.effect)

    def taint_node(self, node: str, taint: Taint) -> None:
        self._note("taint", node, key=taint.key, value=taint.value)

    def untaint_node(self, node: str, key: str) -> None:
        self._note("untaint", node, key=key)

    def nominate(self, pod: str, node: str | None) -> None:
        self._note("nominate", pod, node=node)

    def scale(self, workload: str, replicas: int) -> None:
        self._note("scale", workload, replicas=replicas)

    def keep_buffer(self, group: str, requests: Resources, replicas: int) -> None:
        self._note("keep-buffer", group, requests=requests.human(), replicas=replicas)

    def emit_event(self, kind: ObjectKind, name: str, reason: Reason, message: str) -> None:
        self._note("event", f"{kind.value}/{name}", reason=reason.value, message=message)
