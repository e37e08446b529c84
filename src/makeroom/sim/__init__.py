"""The deterministic simulated cluster: scheduler, ReplicaSets, PDBs, kubelets, cluster-autoscaler."""

from makeroom.sim.results import Result
from makeroom.sim.simulation import BUILTIN_STRATEGIES, Options, Simulation

__all__ = ["BUILTIN_STRATEGIES", "Options", "Result", "Simulation"]
