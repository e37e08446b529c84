"""What happened in a run, in words a user reads: one line per decision of makeroom, the autoscaler and
the scheduler, named as the Kubernetes Events of the real components are (makeroom's own reasons are
those of ``controller.reasons.Reason``), for the terminal, the pictures and the HTML page alike.

A run's timeline records every pod's life; a story keeps what explains the outcome: the scenario's
changes, pods that cannot be scheduled, makeroom's relocations with each move and where the moved
capacity went, the autoscaler's scale-ups (for whom), refusals (why) and scale-downs, preemptions, and
the moment the pods that waited are scheduled and Ready.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from makeroom.controller.reasons import Reason
from makeroom.report.units import count, duration, per_hour
from makeroom.sim.recorder import TimelineEvent
from makeroom.sim.results import Result


class Actor(StrEnum):
    """Who made a change: the column that says whose decision a line is."""

    SCENARIO = "scenario"  # the scenario's own events: what a user or a load change did
    MAKEROOM = "makeroom"
    AUTOSCALER = "autoscaler"  # cluster-autoscaler
    SCHEDULER = "scheduler"  # kube-scheduler
    CLUSTER = "cluster"  # the other controllers: ReplicaSets, the kubelet, the API server


class Story(StrEnum):
    """The reason names of the lines that are not makeroom's own Events: those the real components
    post (cluster-autoscaler, kube-scheduler, kubelet, the deployment controller), and a few for the
    scenario's changes."""

    DEPLOY = "Deploy"
    SCALE = "Scale"
    DELETE = "Delete"
    CORDON = "Cordon"
    UNCORDON = "Uncordon"
    FAILED_SCHEDULING = "FailedScheduling"
    SCHEDULED = "Scheduled"
    READY = "Ready"
    PREEMPTED = "Preempted"
    SURGE = "ScalingReplicaSet"
    STOPPED = "Killing"
    EVICTION_REFUSED = "EvictionBlocked"
    TRIGGERED_SCALE_UP = "TriggeredScaleUp"
    NOT_TRIGGER_SCALE_UP = "NotTriggerScaleUp"
    NODE_READY = "NodeReady"
    SCALE_DOWN = "ScaleDown"
    SCALE_DOWN_FAILED = "ScaleDownFailed"
    NODE_REMOVED = "RemovingNode"


@dataclass(frozen=True, slots=True)
class Line:
    """One line of the story. ``subjects`` are the objects it is about (pods, a workload, a node);
    consecutive lines that differ only in their subjects are told as one."""

    t: float
    actor: Actor
    reason: str
    kind: str  # "pod", "deployment", "node": the object kind as kubectl names it
    subjects: tuple[str, ...]
    text: str
    warning: bool = False

    def who(self, most: int = 3) -> str:
        names = list(self.subjects)
        head = f"{self.kind}/{names[0]}" if names else self.kind
        if len(names) <= most:
            return ", ".join([head, *names[1:most]])
        return ", ".join([head, *names[1:most]]) + f" and {len(names) - most} more"

    def sentence(self, most: int = 3) -> str:
        """``pod/a, b: text``: the object column and the message of ``kubectl get events``."""
        return f"{self.who(most)}: {self.text}" if self.subjects else self.text


SCENARIO_KINDS = {
    "deploy": Story.DEPLOY,
    "scale": Story.SCALE,
    "delete": Story.DELETE,
    "cordon": Story.CORDON,
    "uncordon": Story.UNCORDON,
}

# The kinds of the run's timeline and the reasons they are told under (makeroom's own Events carry
# their Reason in the event itself).
REASON_OF_KIND: dict[str, str] = {
    **{k: v.value for k, v in SCENARIO_KINDS.items()},
    "pod_unschedulable": Story.FAILED_SCHEDULING,
    "preempted": Story.PREEMPTED,
    "makeroom_scale": Story.SURGE,
    "relocated": Story.STOPPED,
    "eviction_refused": Story.EVICTION_REFUSED,
    "scale_up": Story.TRIGGERED_SCALE_UP,
    "no_scale_up": Story.NOT_TRIGGER_SCALE_UP,
    "node_ready": Story.NODE_READY,
    "scale_down": Story.SCALE_DOWN,
    "evicted": Story.SCALE_DOWN,  # the autoscaler drains a node it removes through evictions
    "scale_down_failed": Story.SCALE_DOWN_FAILED,
    "node_removed": Story.NODE_REMOVED,
    "relocation_started": Reason.RELOCATING,
    "moved": Reason.MOVING,
    "relocation_evicted": Reason.EVICTED,
    "relocation_done": Reason.ROOM_MADE,
    "relocation_rolled_back": Reason.ROLLED_BACK,
    "relocation_futile": Reason.CANNOT_HELP,
    "relocation_zone_unknown": Reason.ZONE_UNKNOWN,
    "keeping_room_started": Reason.KEEPING_ROOM,
    "room_kept": Reason.ROOM_KEPT,
    "keeping_room_stopped": Reason.KEEPING_STOPPED,
}


def reason_of(event: TimelineEvent) -> str | None:
    """The Event reason an event of the timeline is told under; None for bookkeeping."""
    recorded = event.get("reason")
    if event.kind == "makeroom" and isinstance(recorded, str):
        return recorded  # consolidation's Events share one kind; their reason tells them apart
    return REASON_OF_KIND.get(event.kind)


_SECONDS = re.compile(r"\bafter (\d+(?:\.\d+)?)s\b")
_PER_HOUR = re.compile(r"(?<![$\w.])(\d+\.\d+)/h\b")


def in_units(message: str) -> str:
    """An Event's message in the report's units: ``after 92s`` as ``after 1m32s``, ``0.360/h`` as
    ``$0.36/h`` (the Event itself keeps the controller's words)."""
    message = _SECONDS.sub(lambda m: f"after {duration(float(m.group(1)))}", message)
    return _PER_HOUR.sub(lambda m: per_hour(float(m.group(1))), message)


def _short(obj: object) -> tuple[str, str]:
    """``Pod/default/text-generator-0`` as (``pod``, ``text-generator-0``)."""
    text = str(obj or "")
    kind, _, rest = text.partition("/")
    return kind.lower() or "object", rest.rsplit("/", 1)[-1]


@dataclass
class _Teller:
    """Reads the timeline once, keeping the little state a line needs: which pods replace moved ones,
    which pods waited, the replicas makeroom surged from."""

    result: Result
    lines: list[Line] = field(default_factory=list)
    owed: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # replacements to come
    replacements: set[str] = field(default_factory=set)
    surged: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # make-before-break ones to come
    ahead: set[str] = field(default_factory=set)  # replacements made before their victim leaves (migrate)
    waited: set[str] = field(default_factory=set)  # pods the scheduler could not place at first
    followed: set[str] = field(default_factory=set)  # pods whose Scheduled line was told
    refused: set[str] = field(default_factory=set)  # pods whose eviction is refused until it passes
    replicas: dict[str, int] = field(default_factory=dict)
    shrunk_at: dict[str, float] = field(default_factory=dict)
    preemptor: dict[tuple[float, str], str] = field(default_factory=dict)

    def say(
        self,
        e: TimelineEvent,
        actor: Actor,
        reason: str,
        kind: str,
        subject: str | None,
        text: str,
        warning: bool = False,
    ) -> None:
        subjects = (subject,) if subject else ()
        self.lines.append(Line(e.t, actor, str(reason), kind, subjects, text, warning))

    def tell(self, e: TimelineEvent) -> None:
        k = e.kind
        pod = e.get("pod")
        workload = e.get("workload")
        if k in SCENARIO_KINDS:
            self._scenario(e)
        elif k == "pod_unschedulable":
            if pod not in self.waited:
                self.waited.add(pod)
                if pod in self.ahead:
                    why = "it replaces a moved pod, which stays until this one is Ready; "
                else:
                    why = "it replaces a removed pod; " if pod in self.replacements else ""
                self.say(
                    e,
                    Actor.SCHEDULER,
                    Story.FAILED_SCHEDULING,
                    "pod",
                    pod,
                    f"{why}no node has room for it now",
                )
        elif k == "pod_created":
            if isinstance(workload, str) and self.owed[workload] > 0:
                self.owed[workload] -= 1
                self.replacements.add(pod)
                if self.surged[workload] > 0:
                    self.surged[workload] -= 1
                    self.ahead.add(pod)
        elif k == "pod_scheduled":
            if pod in self.replacements or pod in self.waited:
                self.followed.add(pod)
                what = "replacement, " if pod in self.replacements else ""
                self.say(e, Actor.SCHEDULER, Story.SCHEDULED, "pod", pod, f"{what}on {e.get('node')}")
        elif k == "pod_ready":
            if pod in self.followed:
                self.say(e, Actor.CLUSTER, Story.READY, "pod", pod, f"Ready on {e.get('node')}")
        elif k == "preempted_by":
            self.preemptor[(e.t, str(pod))] = str(e.get("preemptor"))
        elif k == "preempted":
            self._removed(workload, e.t)
            by = self.preemptor.get((e.t, str(pod)))
            self.say(
                e,
                Actor.SCHEDULER,
                Story.PREEMPTED,
                "pod",
                pod,
                f"deleted from {e.get('node')}" + (f" to make room for {by}" if by else ""),
            )
        elif k == "makeroom_scale":
            self._surge(e)
        elif k == "relocated":
            if self.shrunk_at.get(str(workload)) != e.t:  # evicted: the ReplicaSet replaces it
                self._removed(workload, e.t)
            else:
                self.say(
                    e,
                    Actor.CLUSTER,
                    Story.STOPPED,
                    "pod",
                    pod,
                    f"leaves {e.get('node')}: its replacement is Ready",
                )
        elif k == "eviction_refused":
            if pod not in self.refused:
                self.refused.add(pod)
                self.say(
                    e,
                    Actor.CLUSTER,
                    Story.EVICTION_REFUSED,
                    "pod",
                    pod,
                    "eviction refused by its PodDisruptionBudget; retried with a backoff",
                )
        elif k == "evicted":
            self._removed(workload, e.t)
            self.say(
                e,
                Actor.AUTOSCALER,
                Story.SCALE_DOWN,
                "pod",
                pod,
                f"evicted to drain {e.get('node')} for removal",
            )
        else:
            self._nodes_and_makeroom(e)

    def _nodes_and_makeroom(self, e: TimelineEvent) -> None:
        k = e.kind
        if k == "scale_up":
            pods = [str(p) for p in e.get("pods") or []]
            nodes = int(e.get("nodes") or 0)
            moved = sum(1 for p in pods if p in self.replacements)
            whose = f" ({moved} of them replacing moved pods)" if moved else ""
            self.lines.append(
                Line(
                    e.t,
                    Actor.AUTOSCALER,
                    Story.TRIGGERED_SCALE_UP,
                    "pod",
                    tuple(pods),
                    f"no node has room: adds {count(nodes, str(e.get('group')) + ' node')} "
                    f"for {count(len(pods), 'pending pod')}{whose}",
                )
            )
        elif k == "no_scale_up":
            n = int(e.get("pods") or 0)
            self.say(
                e,
                Actor.AUTOSCALER,
                Story.NOT_TRIGGER_SCALE_UP,
                "",
                None,
                f"{count(n, 'pending pod')} and no node group may grow for them "
                "(each is at its max, or its nodes could not take them)",
                warning=True,
            )
        elif k == "node_ready":
            self.say(
                e,
                Actor.CLUSTER,
                Story.NODE_READY,
                "node",
                e.get("node"),
                f"new {e.get('group')} node is Ready",
            )
        elif k == "scale_down":
            why = "empty" if e.get("empty") else "underused, its pods fit on other nodes"
            self.say(e, Actor.AUTOSCALER, Story.SCALE_DOWN, "node", e.get("node"), f"{why}: removing it")
        elif k == "scale_down_failed":
            self.say(
                e,
                Actor.AUTOSCALER,
                Story.SCALE_DOWN_FAILED,
                "node",
                e.get("node"),
                "could not be drained: kept",
                warning=True,
            )
        elif k == "node_removed":
            self.say(e, Actor.CLUSTER, Story.NODE_REMOVED, "node", e.get("node"), "removed: no longer billed")
        elif (reason := reason_of(e)) is not None and e.get("message") is not None:
            kind, name = _short(e.get("object"))
            text = in_units(str(e.get("message")))
            if reason == Reason.ROOM_MADE:
                text = text.replace("bound to", "scheduled on", 1)
            warning = reason in (Reason.ROLLED_BACK, Reason.CONSOLIDATION_STOPPED)
            self.say(e, Actor.MAKEROOM, reason, kind, name, text, warning)

    def _scenario(self, e: TimelineEvent) -> None:
        k = e.kind
        reason = SCENARIO_KINDS[k]
        if k in {"cordon", "uncordon"}:
            self.say(e, Actor.SCENARIO, reason, "node", e.get("node"), f"{k}ed")
            return
        workload = str(e.get("workload"))
        n = int(e.get("replicas") or 0)
        self.replicas[workload] = n
        text = {
            "deploy": f"deployed with {count(n, 'replica')}",
            "scale": f"scaled to {count(n, 'replica')}",
            "delete": "deleted",
        }[k]
        self.say(e, Actor.SCENARIO, reason, "deployment", workload, text)

    def _surge(self, e: TimelineEvent) -> None:
        workload = str(e.get("workload"))
        n = int(e.get("replicas") or 0)
        before = self.replicas.get(
            workload, self.result.workloads[workload].desired if workload in self.result.workloads else n
        )
        self.replicas[workload] = n
        if n > before:
            self.owed[workload] += n - before
            self.surged[workload] += n - before
            extra = n - before
            text = f"surge to {count(n, 'replica')}: {extra} replacement(s) start before the moved pods leave"
        else:
            self.shrunk_at[workload] = e.t
            text = f"back to {count(n, 'replica')}: the moved pods leave"
        self.say(e, Actor.MAKEROOM, Story.SURGE, "deployment", workload, text)

    def _removed(self, workload: object, t: float) -> None:
        if isinstance(workload, str):
            self.owed[workload] += 1


def _merge(lines: Iterable[Line]) -> list[Line]:
    """Consecutive lines that differ only in their subjects, as one line naming them all."""
    out: list[Line] = []
    for line in lines:
        last = out[-1] if out else None
        if (
            last is not None
            and (last.t, last.actor, last.reason, last.kind, last.text, last.warning)
            == (line.t, line.actor, line.reason, line.kind, line.text, line.warning)
            and last.subjects
        ):
            out[-1] = replace(last, subjects=last.subjects + line.subjects)
        else:
            out.append(line)
    return out


def story(result: Result) -> list[Line]:
    """The run told in order, lines about several objects of the same moment merged."""
    teller = _Teller(result)
    for event in result.events:
        teller.tell(event)
    return _merge(teller.lines)


def stamp(t: float) -> str:
    """The time column: ``1m02s`` from the start of the run."""
    return duration(t)


def as_text(lines: Sequence[Line], limit: int | None = 40) -> list[str]:
    """Terminal lines: time, actor, reason, then the object and what happened."""
    width = max((len(line.reason) for line in lines), default=0)
    out = [
        f"{stamp(line.t):>7}  {line.actor.value:<10}  {line.reason:<{width}}  {line.sentence()}"
        for line in lines
    ]
    if limit is not None and len(out) > limit:
        out = [*out[: limit - 1], f"... and {len(out) - limit + 1} more lines (all of them: -o json)"]
    return out
