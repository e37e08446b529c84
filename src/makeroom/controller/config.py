"""The controller's knobs, with the defaults a cluster gets when it sets none."""

from __future__ import annotations

from dataclasses import dataclass

STRATEGIES = ("evict", "migrate")


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    strategy: str = "migrate"
    interval: float = 2.0
    """Seconds between two reconciliations: well inside the autoscaler's 10 s scan, so that a
    decision lands before the autoscaler acts on the pending pod."""
    timeout: float = 900.0
    """A relocation whose pod is not bound by then is rolled back and planned again."""
    cooldown: float = 600.0
    """A pod that makeroom moved (a replacement) is not moved again within this time."""
    max_moves_in_flight: int = 20
    """The most pods one round of relocations may move at once."""
    backoff: float = 2.0
    """First wait after a refused eviction or a failed call; doubles up to ``max_backoff``."""
    max_backoff: float = 30.0
    autoscaler_expander: str = "least-waste"
    """The cluster-autoscaler's ``--expander`` (its default: least-waste). With ``priority`` (groups
    in preference order) a moved replica may wait for a new node of a cheaper group even where a
    group the pending pod could use might also grow; with any other, the planner does not count on
    it (docs/controller.md, "Moved replicas and the autoscaler's expander")."""
    consolidation: bool = True
    """Move replicas off costly nodes to cheaper groups when that lets the autoscaler remove the node
    for less than it costs (cortex issue 1965). Only when no pod waits to be scheduled."""
    consolidation_min_saving: float = 0.2
    """The share of the freed node's hourly price that a consolidation must save, after the price of
    any cheaper node it adds."""
    consolidation_max_moves: int = 10
    """The budget of pods consolidation may move per ``consolidation_window``."""
    consolidation_window: float = 600.0
    consolidation_wait: float = 1800.0
    """How long an emptied node may wait for the autoscaler to remove it before makeroom lifts its
    taint and gives up."""
