"""makeroom's own records: what a relocation or a consolidation under way has decided and done, so that
a fresh controller resumes or rolls back what a dead one started.

They live in a store that only makeroom writes (the port's ``records``/``save_record``/
``delete_record``: custom resources in makeroom's own namespace on a real cluster, the simulated API
server's store in the simulator), never on objects a tenant may write. What makeroom still puts on
pods (the victim mark, the deletion cost, the scale-up delay) and nodes (its taints) only acts on the
cluster; it is never read back as a plan. (The victim mark, makeroom.io/victim-of, lives in the model:
the simulator's ReplicaSets read it too.)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from makeroom.controller.config import Strategy

CONSOLIDATING_TAINT = "makeroom.io/consolidating"
"""NoSchedule taint on a node being emptied, so that the pods moved off it cannot come straight back."""
HEADROOM_TAINT = "makeroom.io/headroom"
"""PreferNoSchedule taint on a GPU node where makeroom keeps room for GPU pods: kube-scheduler's
TaintToleration score sends CPU pods elsewhere when they can go elsewhere; a GPU pod still lands."""
PRIOR_DELETION_COST = "makeroom.io/prior-deletion-cost"
"""On a victim: its pod-deletion-cost before makeroom lowered it, restored on roll-back."""
VICTIM_DELETION_COST = "-2147483647"
"""The lowest pod-deletion-cost: the ReplicaSet removes these pods first when it scales down."""

MAKEROOM_PREFIX = "makeroom.io/"


class RecordKind(StrEnum):
    """The two kinds of record: what each is about (its subject) differs."""

    RELOCATION = "relocation"
    """Room made for one pending pod; its subject is the pod's key (``namespace/name``)."""
    CONSOLIDATION = "consolidation"
    """A costly node being emptied; its subject is the node's name."""
    COOLDOWN = "cooldown"
    """A workload whose pods makeroom moved; its subject is the workload's key. The pods its moves
    brought up are not moved again before the cooldown ends, whichever replica leads by then."""
    KEEPING = "keeping"
    """CPU-only pods moving off GPU nodes to keep headroom; its subject is the target's name."""
    HEADROOM = "kept-room"
    """What room a headroom target holds and for whom; its subject is the target's name."""


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


@dataclass(slots=True)
class Surge:
    """The make-before-break surge of one workload, decided when the record is written."""

    by: int  # replicas added: the workload's victims
    base: int  # replicas before the surge, restored when it ends
    need_ready: int  # Ready pods other than the victims before the workload may shrink back


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
    surge: dict[str, Surge] = field(default_factory=dict)  # workload -> its surge
    why: str = ""  # one line for people: what makeroom does and why (the Event it started with)

    kind: ClassVar[RecordKind]

    @property
    def subject(self) -> str:
        raise NotImplementedError

    @property
    def surging(self) -> frozenset[str]:
        """The workloads scaled up now: the surge holds until the phase leaves ``holding``."""
        return frozenset(self.surge) if self.phase is Phase.HOLDING else frozenset()

    def to_fields(self) -> dict[str, Any]:
        """Plain values (the store's format): JSON for the simulator, a custom resource's spec and
        status on a real cluster."""
        return {
            "node": self.node,
            "started": self.started,
            "deadline": self.deadline,
            "victims": [{"pod": v.pod, "workload": v.workload, "node": v.node} for v in self.victims],
            "phase": self.phase.value,
            "since": self.since,
            "surge": {
                w: {"by": s.by, "base": s.base, "need_ready": s.need_ready} for w, s in self.surge.items()
            },
            "why": self.why,
        }

    @staticmethod
    def _parse(raw: Mapping[str, Any]) -> dict[str, Any]:
        """The shared fields, checked: a damaged record raises (ValueError, TypeError, KeyError)."""
        victims = [_victim(v) for v in raw["victims"]]
        surge = {str(w): _surge(s) for w, s in (raw.get("surge") or {}).items()}
        return {
            "node": _text(raw["node"]),
            "started": _number(raw["started"]),
            "deadline": _number(raw["deadline"]),
            "victims": victims,
            "phase": Phase(raw.get("phase", Phase.HOLDING)),
            "since": _number(raw.get("since", 0.0)),
            "surge": surge,
            "why": str(raw.get("why") or ""),
        }


@dataclass(slots=True, kw_only=True)
class Relocation(Moves):
    """Room made for the pending pod ``pod`` on ``node``."""

    pod: str  # key
    strategy: Strategy

    kind: ClassVar[RecordKind] = RecordKind.RELOCATION

    @property
    def subject(self) -> str:
        return self.pod

    def to_fields(self) -> dict[str, Any]:
        return {**Moves.to_fields(self), "pod": self.pod, "strategy": self.strategy.value}

    @classmethod
    def from_fields(cls, raw: Mapping[str, Any]) -> Relocation | None:
        """None for a record that is damaged or not a relocation: the caller rolls that pod back."""
        try:
            strategy = Strategy(raw["strategy"])
            if not strategy.relocates:
                return None
            return cls(pod=_text(raw["pod"]), strategy=strategy, **Moves._parse(raw))
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


@dataclass(slots=True, kw_only=True)
class Consolidation(Moves):
    """The node ``node`` being emptied: its pods move to cheaper nodes."""

    kind: ClassVar[RecordKind] = RecordKind.CONSOLIDATION

    @property
    def subject(self) -> str:
        return self.node

    @classmethod
    def from_fields(cls, raw: Mapping[str, Any]) -> Consolidation | None:
        """None for a record that is damaged: the caller gives that node up."""
        try:
            return cls(**Moves._parse(raw))
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


@dataclass(slots=True, kw_only=True)
class Keeping(Moves):
    """CPU-only pods moving off GPU nodes (each victim's ``node``; ``node``: the first of them),
    make-before-break, to keep the room of the headroom target ``target``."""

    target: str

    kind: ClassVar[RecordKind] = RecordKind.KEEPING

    @property
    def subject(self) -> str:
        return self.target

    def to_fields(self) -> dict[str, Any]:
        return {**Moves.to_fields(self), "target": self.target}

    @classmethod
    def from_fields(cls, raw: Mapping[str, Any]) -> Keeping | None:
        """None for a record that is damaged: the caller rolls its moves back."""
        try:
            return cls(target=_text(raw["target"]), **Moves._parse(raw))
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


Record = Relocation | Consolidation | Keeping
"""A record of moves under way: what the validator checks and the controller carries on."""


@dataclass(slots=True, kw_only=True)
class KeptRoom:
    """A headroom target as makeroom last saw it (``kubectl get headroom``): room for ``free`` of
    ``wanted`` pods of ``whom`` in ``group``; ``state`` is kept, moving or short, ``why`` says why
    short. Status only: nothing is resumed from it."""

    target: str
    group: str
    whom: str
    wanted: int
    free: int
    state: str
    why: str = ""
    moved: list[tuple[float, str]] = field(default_factory=list)
    """(when, workload) of each pod moved to keep room in the last hour or cooldown: the hourly limit
    and the per-workload cooldown, kept in the store so that a new leader honours them."""

    kind: ClassVar[RecordKind] = RecordKind.HEADROOM

    @property
    def subject(self) -> str:
        return self.target

    def to_fields(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "group": self.group,
            "whom": self.whom,
            "wanted": self.wanted,
            "free": self.free,
            "state": self.state,
            "why": self.why,
            "moved": [{"at": at, "workload": w} for at, w in self.moved],
        }

    @classmethod
    def from_fields(cls, raw: Mapping[str, Any]) -> KeptRoom | None:
        try:
            return cls(
                target=_text(raw["target"]),
                group=_text(raw["group"]),
                whom=_text(raw["whom"]),
                wanted=_count(raw["wanted"]),
                free=_count(raw["free"]),
                state=_text(raw["state"]),
                why=str(raw.get("why") or ""),
                moved=[(_number(m["at"]), _text(m["workload"])) for m in raw.get("moved") or []],
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


@dataclass(slots=True, kw_only=True)
class Cooldown:
    """The pods (keys) that makeroom's moves brought up for ``workload`` (the replacements): none of
    them is moved again before ``until``. Written when a move ends (done, rolled back or given up),
    before its record is removed, and removed once past: so the cooldown survives a failover, and
    nothing a tenant writes lengthens or ends it."""

    workload: str
    pods: list[str]
    until: float

    kind: ClassVar[RecordKind] = RecordKind.COOLDOWN

    @property
    def subject(self) -> str:
        return self.workload

    def to_fields(self) -> dict[str, Any]:
        return {"workload": self.workload, "pods": list(self.pods), "until": self.until}

    @classmethod
    def from_fields(cls, raw: Mapping[str, Any]) -> Cooldown | None:
        """None for a record that is damaged: the controller removes it."""
        try:
            pods = raw["pods"]
            if not isinstance(pods, list):
                raise TypeError("pods")
            return cls(
                workload=_text(raw["workload"]), pods=[_text(p) for p in pods], until=_number(raw["until"])
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


Stored = Relocation | Consolidation | Cooldown | Keeping | KeptRoom
"""Anything makeroom keeps in its own store."""


@dataclass(slots=True)
class Records:
    """Every record in the store, by subject. None marks a record that cannot be read (damaged): the
    controller rolls back what it can and removes it."""

    relocations: dict[str, Relocation | None] = field(default_factory=dict)  # pod key -> record
    consolidations: dict[str, Consolidation | None] = field(default_factory=dict)  # node -> record
    cooldowns: dict[str, Cooldown | None] = field(default_factory=dict)  # workload -> its cooldown
    keepings: dict[str, Keeping | None] = field(default_factory=dict)  # target -> moves keeping room
    headroom: dict[str, KeptRoom | None] = field(default_factory=dict)  # target -> what it holds

    def of(self, kind: RecordKind) -> dict[str, Any]:
        """The records of one kind, by subject."""
        if kind is RecordKind.RELOCATION:
            return self.relocations
        if kind is RecordKind.CONSOLIDATION:
            return self.consolidations
        if kind is RecordKind.KEEPING:
            return self.keepings
        if kind is RecordKind.HEADROOM:
            return self.headroom
        return self.cooldowns

    def read(self, kind: RecordKind, subject: str, fields: Mapping[str, Any]) -> None:
        """A record as the store keeps it (plain fields), parsed into its kind (None: damaged)."""
        parse = {
            RecordKind.RELOCATION: Relocation.from_fields,
            RecordKind.CONSOLIDATION: Consolidation.from_fields,
            RecordKind.COOLDOWN: Cooldown.from_fields,
            RecordKind.KEEPING: Keeping.from_fields,
            RecordKind.HEADROOM: KeptRoom.from_fields,
        }[kind]
        self.of(kind)[subject] = parse(fields)

    def under_way(self) -> list[Moves]:
        """Every readable record of moves under way."""
        return [
            r
            for r in (*self.relocations.values(), *self.consolidations.values(), *self.keepings.values())
            if r is not None
        ]

    def surge_owners_but(self, record: Moves | None) -> dict[str, str]:
        """``surge_owners`` of every record but ``record`` (the same kind and subject)."""
        out: dict[str, str] = {}
        for other in self.under_way():
            if other.phase is Phase.EMPTY:
                continue  # an emptied node's consolidation shrank its surges back long ago
            if record is not None and other.kind is record.kind and other.subject == record.subject:
                continue
            for workload in other.surge:
                out.setdefault(workload, other.subject)
        return out

    def surge_owners(self) -> dict[str, str]:
        """Each workload a record under way surges (or surged and may not have finished shrinking
        back: any phase but an emptied node's), with that record's subject. One record owns a
        workload's surge at a time: a second relocation that needs it waits until the first is over,
        so two surges never fight."""
        return self.surge_owners_but(None)

    def surging(self) -> frozenset[str]:
        """Workloads scaled up by a record under way: their new pods wait for room by design."""
        out: set[str] = set()
        for record in self.under_way():
            out |= record.surging
        return frozenset(out)

    def moving(self) -> frozenset[str]:
        """Pods that a record under way moves: no other plan may count on them."""
        return frozenset(v.pod for record in self.under_way() for v in record.victims)

    def moves_in_flight(self) -> int:
        """Moves that relocations under way hold (the bound ``max_moves_in_flight`` counts them)."""
        return sum(len(r.victims) for r in self.relocations.values() if r is not None)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"expected a name, got {value!r}")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TypeError(f"expected a finite number, got {value!r}")
    return float(value)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError(f"expected a count, got {value!r}")
    return value


def _victim(raw: Any) -> Victim:
    workload = raw.get("workload")
    return Victim(_text(raw["pod"]), None if workload is None else _text(workload), _text(raw["node"]))


def _surge(raw: Any) -> Surge:
    return Surge(by=_count(raw["by"]), base=_count(raw["base"]), need_ready=_count(raw["need_ready"]))
