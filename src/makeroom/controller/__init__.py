"""The relocation controller: one state machine, the same in the simulator and in a real cluster,
talking to the world only through the Cluster port."""

from makeroom.controller.config import RELOCATING, ConsolidationConfig, ControllerConfig, Strategy
from makeroom.controller.core import Controller
from makeroom.controller.port import (
    Clock,
    Cluster,
    ClusterError,
    ConflictError,
    EvictionBlockedError,
    NotFoundError,
)
from makeroom.controller.reasons import ObjectKind, Reason
from makeroom.controller.steps import TickReport

__all__ = [
    "RELOCATING",
    "Clock",
    "Cluster",
    "ClusterError",
    "ConflictError",
    "ConsolidationConfig",
    "Controller",
    "ControllerConfig",
    "EvictionBlockedError",
    "NotFoundError",
    "ObjectKind",
    "Reason",
    "Strategy",
    "TickReport",
]
