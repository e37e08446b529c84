"""What the controller writes on the objects it touches, so that a fresh controller can resume or
roll back what a dead one started. Nothing else of its progress lives anywhere. (The victim mark,
makeroom.io/victim-of, lives in the model: the simulator's ReplicaSets read it too.)"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from makeroom.controller.config import Strategy

RELOCATION = "makeroom.io/relocation"
"""On the pending pod: the relocation under way for it (a JSON Relocation)."""
CONSOLIDATION = "makeroom.io/consolidation"
"""On a node being emptied for the autoscaler to remove: the consolidation under way (JSON)."""
CONSOLIDATING_TAINT = "makeroom.io/consolidating"
"""NoSchedule taint on a node being emptied, so that the pods moved off it cannot come straight back."""
SURGE = "makeroom.io/surge"
"""On a workload that ``migrate`` scaled up: its replicas before, by how much, and for which pod."""
PRIOR_DELETION_COST = "makeroom.io/prior-deletion-cost"
"""On a victim: its pod-deletion-cost before makeroom lowered it, restored on roll-back."""
VICTIM_DELETION_COST = "-2147483647"
"""The lowest pod-deletion-cost: the ReplicaSet removes these pods first when it scales down."""

MAKEROOM_PREFIX = "makeroom.io/"


class Phase(StrEnum):
    """Where a relocation or a consolidation stands (the ``phase`` of its record)."""

    HOLDING = "holding"
    """Room kept for the pod; evict: victims leaving; migrate and consolidation: replacements coming."""
    DRAINING = "draining"
    """migrate and consolidation: replacements Ready, workloads scaled back, victims leaving."""
    EMPTY = "empty"
    """Consolidation: the node is empty; the autoscaler is to remove it."""


@dataclass(slots=True)
class Victim:
    pod: str  # key
    workload: str | None
    node: str


@dataclass(slots=True, kw_only=True)
class Moves:
    """What a relocation and a consolidation share: the pods that leave, the make-before-break surge
    of their workloads, and the phase of the whole."""

    node: str
    """Relocation: the node the pending pod goes to. Consolidation: the node being emptied."""
    started: float
    deadline: float
    victims: list[Victim]
    phase: Phase = Phase.HOLDING
    since: float = 0.0  # when the current phase began
    surge: dict[str, int] = field(default_factory=dict)  # workload -> extra replicas

    def _fields(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self._fields(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def _parse(cls, raw: dict[str, Any]) -> dict[str, Any]:
        raw["victims"] = [Victim(**v) for v in raw["victims"]]
        raw["phase"] = Phase(raw.get("phase", Phase.HOLDING))
        return raw


@dataclass(slots=True, kw_only=True)
class Relocation(Moves):
    """On the pending pod (``makeroom.io/relocation``): the room made for it on ``node``."""

    strategy: Strategy

    @classmethod
    def from_json(cls, text: str) -> Relocation | None:
        """None for a record that is not ours or is damaged: the caller rolls that pod back."""
        try:
            raw = cls._parse(json.loads(text))
            raw["strategy"] = Strategy(raw["strategy"])
            if not raw["strategy"].relocates:
                return None
            return cls(**raw)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


CONSOLIDATION_RECORD_TAG = "consolidate"
"""The ``strategy`` field that a consolidation record carries on the wire: the format of the records
before they had types of their own, kept so that the previous version reads them during an upgrade."""


@dataclass(slots=True, kw_only=True)
class Consolidation(Moves):
    """On the node being emptied (``makeroom.io/consolidation``): its pods moving to cheaper nodes."""

    def _fields(self) -> dict[str, Any]:
        return {**asdict(self), "strategy": CONSOLIDATION_RECORD_TAG}

    @classmethod
    def from_json(cls, text: str) -> Consolidation | None:
        """None for a record that is not ours or is damaged: the caller gives that node up."""
        try:
            raw = cls._parse(json.loads(text))
            if raw.pop("strategy", CONSOLIDATION_RECORD_TAG) != CONSOLIDATION_RECORD_TAG:
                return None
            return cls(**raw)
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
