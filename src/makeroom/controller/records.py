"""What the controller writes on the objects it touches, so that a fresh controller can resume or
roll back what a dead one started. Nothing else of its progress lives anywhere. (The victim mark,
makeroom.io/victim-of, lives in the model: the simulator's ReplicaSets read it too.)"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

RELOCATION = "makeroom.io/relocation"
"""On the pending pod: the relocation under way for it (a JSON Relocation)."""
CONSOLIDATION = "makeroom.io/consolidation"
"""On a node being emptied for the autoscaler to remove: the consolidation under way (a JSON Relocation)."""
CONSOLIDATING_TAINT = "makeroom.io/consolidating"
"""NoSchedule taint on a node being emptied, so that the pods moved off it cannot come straight back."""
SURGE = "makeroom.io/surge"
"""On a workload that ``migrate`` scaled up: its replicas before, by how much, and for which pod."""
PRIOR_DELETION_COST = "makeroom.io/prior-deletion-cost"
"""On a victim: its pod-deletion-cost before makeroom lowered it, restored on roll-back."""
VICTIM_DELETION_COST = "-2147483647"
"""The lowest pod-deletion-cost: the ReplicaSet removes these pods first when it scales down."""

MAKEROOM_PREFIX = "makeroom.io/"


class Phase:
    HOLDING = "holding"  # room kept for the pod; evict: victims leaving; migrate: replacements coming
    DRAINING = "draining"  # migrate: replacements Ready, workloads scaled back, victims leaving
    EMPTY = "empty"  # consolidation: the node is empty; the autoscaler is to remove it


@dataclass(slots=True)
class Victim:
    pod: str  # key
    workload: str | None
    node: str


@dataclass(slots=True)
class Relocation:
    strategy: str
    node: str
    started: float
    deadline: float
    victims: list[Victim]
    phase: str = Phase.HOLDING
    since: float = 0.0  # when the current phase began
    surge: dict[str, int] = field(default_factory=dict)  # workload -> extra replicas (migrate)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Relocation | None:
        """None for a record that is not ours or is damaged: the caller rolls that pod back."""
        try:
            raw = json.loads(text)
            victims = [Victim(**v) for v in raw.pop("victims")]
            return cls(victims=victims, **raw)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


@dataclass(slots=True)
class Surge:
    base: int  # replicas before the surge
    by: int
    for_pod: str
    need_ready: int  # Ready pods other than the victims before the workload may shrink back

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Surge | None:
        try:
            return cls(**json.loads(text))
        except (ValueError, TypeError):
            return None
