"""The options of ``makeroom run`` besides the controller's own: one definition of each default, which
the command's flags read (this module imports nothing heavy, so the CLI may load it at once)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from enum import StrEnum

from makeroom.controller import ControllerConfig
from makeroom.controller.scope import Scope
from makeroom.snapshot import GroupConfig


class NominationMode(StrEnum):
    """How the room for a pod is held on its node (``--nomination``; docs/kube.md)."""

    AUTO = "auto"
    """``status``, switching a pod to ``taint`` once the cluster cleared its nomination."""
    STATUS = "status"
    """status.nominatedNodeName through the pod's status subresource."""
    TAINT = "taint"
    """A reservation taint on the node that only the pod tolerates."""


def default_identity() -> str:
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{os.getpid()}"


@dataclass
class RunOptions:
    config: ControllerConfig = field(default_factory=ControllerConfig)
    dry_run: bool = False
    scope: Scope = field(default_factory=Scope)
    groups: GroupConfig | None = None
    metrics_port: int | None = 8080
    metrics_host: str = "0.0.0.0"
    metrics_auth: bool = True  # /metrics only for a token the API server lets get /metrics
    leader_elect: bool = True
    lease_namespace: str = "default"
    lease_name: str = "makeroom"
    records_namespace: str = "default"  # where makeroom keeps its Relocation and Consolidation records
    identity: str = field(default_factory=default_identity)
    pod: str | None = None  # makeroom's own pod (its POD_NAME, in records_namespace), when it runs in one
    nomination: NominationMode = NominationMode.AUTO
    autoscaler_namespace: str = "kube-system"
    resync: float = 600.0
    sync_timeout: float = 300.0
