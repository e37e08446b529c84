"""The deterministic simulated cluster: scheduler, ReplicaSets, PDBs, kubelets, cluster-autoscaler."""

from makeroom.sim.results import Result
from makeroom.sim.simulation import Options, Simulation

__all__ = ["Options", "Result", "Simulation"]
