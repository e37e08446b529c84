"""makeroom's end-to-end harness: a real Kubernetes control plane on loopback (test infrastructure,
not part of the product). See e2e/README.md."""

from .binaries import Binaries, MissingBinariesError, find_binaries
from .cluster import AutoscalerSettings, Components, ControlPlane, SchedulerSettings, up
from .scenario import LoadedScenario, Scenario, load_into, read_scenario

__all__ = [
    "AutoscalerSettings",
    "Binaries",
    "Components",
    "ControlPlane",
    "LoadedScenario",
    "MissingBinariesError",
    "Scenario",
    "SchedulerSettings",
    "find_binaries",
    "load_into",
    "read_scenario",
    "up",
]
