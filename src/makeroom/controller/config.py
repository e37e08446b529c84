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
