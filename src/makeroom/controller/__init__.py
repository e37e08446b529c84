"""The relocation controller: one state machine, the same in the simulator and in a real cluster,
talking to the world only through the Cluster port."""

from makeroom.controller.config import STRATEGIES, ControllerConfig
from makeroom.controller.core import Controller
from makeroom.controller.port import (
    Clock,
    Cluster,
    ClusterError,
    ConflictError,
    EvictionBlockedError,
    NotFoundError,
)
from makeroom.controller.steps import TickReport

__all__ = [
    "STRATEGIES",
    "Clock",
    "Cluster",
    "ClusterError",
    "ConflictError",
    "Controller",
    "ControllerConfig",
    "EvictionBlockedError",
    "NotFoundError",
    "TickReport",
]
