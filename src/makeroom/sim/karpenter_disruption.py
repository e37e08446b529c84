"""Karpenter's disruption controller (v1.14, ``pkg/controllers/disruption``): consolidation.

Every 10 s (at once after a command started) the methods are tried in Karpenter's order, and the first
that finds a command runs it: emptiness, then multi-node, then single-node consolidation (drift is
not modelled). A candidate is a Ready node of a pool, not being taken away, not nominated by a recent
provisioning pass, with no ``karpenter.sh/do-not-disrupt`` pod or annotation and no pod whose budget
allows no disruption now; it is consolidatable once ``consolidateAfter`` has passed since its last pod
event (a pod bound to it or leaving it) or since it became Ready. Candidates are taken by savings
(price over disruption cost); each pool's budgets cap how many of its nodes are disrupted at once.

- Emptiness: nodes without reschedulable pods are deleted (either policy).
- Consolidation (``WhenEmptyOrUnderutilized`` only): Karpenter's scheduling simulation of the
  candidates' pods (with the pending ones) without the candidates: if every pod lands on the other
  nodes, the candidates are deleted; if exactly one new NodeClaim is needed and some of its types is
  cheaper than the candidates together, they are replaced by the cheapest such type. Multi-node
  consolidation searches the largest prefix of the candidates (two or more) that can go; a replacement
  of a type one of them already has must be cheaper than it. Single-node takes candidates one by one,
  pools in turn.

A command is validated 15 s later (the candidates must still be candidates within budgets, and a
consolidation must simulate to the same decision), then: the candidates are tainted
``karpenter.sh/disrupted:NoSchedule``, the replacement is launched and awaited until Ready, and each
candidate is drained through evictions that respect budgets (a refused eviction is retried with
backoff, 0.1 s doubling to 10 s) and removed once its pods are gone.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from makeroom.model import DELETION_COST, InstanceType, Node, NodeGroup, OwnerKind, Pod, Taint, TaintEffect
from makeroom.model.nodepool import (
    DISRUPTED_TAINT,
    DO_NOT_DISRUPT,
    REASON_EMPTY,
    REASON_UNDERUTILIZED,
    ConsolidationPolicy,
)
from makeroom.model.provisioning import cheapest
from makeroom.sim.clock import Phase
from makeroom.sim.karpenter_solve import Solution, provisionable, reschedulable, solve
from makeroom.sim.world import EvictionRefusedError

if TYPE_CHECKING:
    from makeroom.sim.karpenter import Karpenter

POLLING_PERIOD = 10.0
VALIDATION_DELAY = 15.0  # commandValidationDelay
BASE_COST = 1.0  # PerNodeBaseDisruptionCost
EVICTION_BASE_DELAY = 0.1
EVICTION_MAX_DELAY = 10.0
REPLACEMENT_POLL = 1.0
RECONSIDER = 300.0  # a method that found nothing looks again after this long even if nothing changed
DRAIN_POLL = 1.0  # the termination controller requeues a draining node every second


def eviction_cost(pod: Pod) -> float:
    """``EvictionCost``: 1, plus the pod-deletion-cost over 2^27, plus the priority over 2^25,
    clamped to [-10, 10]."""
    cost = 1.0
    raw = pod.annotations.get(DELETION_COST)
    if raw is not None:
        with contextlib.suppress(ValueError):
            cost += float(raw) / 2**27
    cost += pod.priority / 2**25
    return min(10.0, max(-10.0, cost))


@dataclass(slots=True)
class Candidate:
    node: Node
    group: NodeGroup
    instance_type: InstanceType
    pods: list[Pod]  # the reschedulable ones
    order: int  # creation order, for stable ties
    cost: float = 0.0  # RescheduleDisruptionCost

    def __post_init__(self) -> None:
        self.cost = BASE_COST + sum(max(0.0, eviction_cost(p)) for p in self.pods)

    @property
    def price(self) -> float:
        return self.instance_type.price_per_hour

    @property
    def empty(self) -> bool:
        return self.cost <= BASE_COST

    @property
    def savings(self) -> float:
        return self.price / self.cost


@dataclass(slots=True)
class Command:
    method: str  # empty | multi | single
    reason: str  # Empty | Underutilized
    candidates: list[Candidate]
    replacement: tuple[NodeGroup, tuple[InstanceType, ...], list[Pod], str | None] | None = None
    done: set[str] = field(default_factory=set)


class DisruptionController:
    def __init__(self, karpenter: Karpenter) -> None:
        self.k = karpenter
        self.world = karpenter.world
        self.methods: list[tuple[str, Callable[[], Command | None]]] = [
            ("empty", self.emptiness),
            ("multi", self.multi_node),
            ("single", self.single_node),
        ]
        self._evict_delay: dict[str, float] = {}
        self._quiet: dict[str, tuple[tuple[int, frozenset[str], frozenset[str]], float]] = {}
        self._budget_bound = False  # a method passed over candidates for their pool's budget
        self._candidates: tuple[tuple[float, int, frozenset[str]], list[Candidate]] | None = None
        self._next_eviction: dict[str, float] = {}

    def start(self) -> None:
        self.world.loop.at(0.0, Phase.AUTOSCALER, self.poll)

    # --- the loop ---------------------------------------------------------------------------------
    def poll(self) -> None:
        self._methods_from(0)

    def _methods_from(self, first: int) -> None:
        for i in range(first, len(self.methods)):
            name, method = self.methods[i]
            key = self._cluster_key()
            quiet = self._quiet.get(name)
            if quiet is not None and quiet[0] == key and self.world.now - quiet[1] < RECONSIDER:
                continue  # nothing changed since this method found nothing (IsConsolidated)
            self._budget_bound = False
            command = method()
            if command is not None:
                self._quiet.pop(name, None)
                self._validate_later(i, command)
                return
            if not self._budget_bound:
                self._quiet[name] = (key, self.world.now)
        self.world.loop.after(POLLING_PERIOD, Phase.AUTOSCALER, self.poll)

    def _cluster_key(self) -> tuple[int, frozenset[str], frozenset[str]]:
        """What the methods' answers depend on: placements and nodes, the nodes being taken away, and
        which nodes are consolidatable now (Karpenter's consolidation state changes with each)."""
        state = self.world.state
        ripe = frozenset(
            name
            for name, node in state.nodes.items()
            if node.group in state.groups and self._ripe(name, state.groups[node.group])
        )
        return (state.generation, frozenset(self.k.deleting), ripe)

    def _ripe(self, name: str, group: NodeGroup) -> bool:
        after = group.disruption.consolidate_after
        if after is None:
            return False
        since = max(self.k.last_pod_event.get(name, -1.0), self.k.initialized_at(name))
        return self.world.now - since >= after

    def _validate_later(self, index: int, command: Command) -> None:
        self.world.loop.after(VALIDATION_DELAY, Phase.AUTOSCALER, lambda: self._validated(index, command))

    def _validated(self, index: int, command: Command) -> None:
        checked = self.validate(command)
        if checked is None:
            self._methods_from(index + 1)
            return
        self.execute(checked)
        self.world.loop.at(self.world.now, Phase.AUTOSCALER, self.poll)

    # --- candidates -------------------------------------------------------------------------------
    def candidates(self) -> list[Candidate]:
        """Every candidate now (the same for each method at one instant, while nothing changes)."""
        key = (self.world.now, self.world.state.generation, frozenset(self.k.deleting))
        if self._candidates is not None and self._candidates[0] == key:
            return list(self._candidates[1])
        found = self._find_candidates()
        self._candidates = (key, found)
        return list(found)

    def _find_candidates(self) -> list[Candidate]:
        world, k = self.world, self.k
        state = world.state
        now = world.now
        out = []
        allowed: dict[str | None, int | None] = {}  # per workload, as its budget stands now
        for name, node in state.nodes.items():
            group = state.groups.get(node.group)
            if group is None or not node.ready or name in k.deleting:
                continue
            if k.nominated_until.get(name, -1.0) > now or node.annotations.get(DO_NOT_DISRUPT) == "true":
                continue
            pods = list(state.pods_on[name].values())
            if any(self._blocks(p, allowed) for p in pods):
                continue
            kind = world.instance_type.get(name) or group.types()[0]
            out.append(
                Candidate(node, group, kind, [p for p in pods if reschedulable(p)], world.node_order[name])
            )
        return out

    def _blocks(self, pod: Pod, allowed: dict[str | None, int | None]) -> bool:
        """A pod that keeps its node from being disrupted: do-not-disrupt, or a budget at zero."""
        if pod.terminating or pod.owner_kind == OwnerKind.NODE:
            return False
        if pod.annotations.get(DO_NOT_DISRUPT) == "true":
            return True
        if pod.workload not in allowed:
            allowed[pod.workload] = self.world.disruptions_allowed(pod.workload)
        left = allowed[pod.workload]
        return left is not None and left == 0

    def consolidatable(self, c: Candidate) -> bool:
        return self._ripe(c.node.name, c.group)

    def budgets(self, reason: str) -> dict[str, int]:
        """How many more nodes of each pool may be disrupted for ``reason`` now."""
        state = self.world.state
        total: Counter[str] = Counter()
        busy: Counter[str] = Counter()
        for name, node in state.nodes.items():
            if not node.ready:
                continue
            total[node.group] += 1
            if name in self.k.deleting:
                busy[node.group] += 1
        return {
            g.name: max(0, g.disruption.allowed(total[g.name], reason) - busy[g.name])
            for g in state.groups.values()
        }

    @staticmethod
    def _by_savings(cands: list[Candidate]) -> list[Candidate]:
        return sorted(cands, key=lambda c: (-c.savings, c.order))

    def _empty_ones(self) -> list[Candidate]:
        return [c for c in self.candidates() if c.empty and self.consolidatable(c)]

    def _underutilized(self) -> list[Candidate]:
        return [
            c
            for c in self.candidates()
            if not c.empty
            and c.group.disruption.policy == ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED
            and self.consolidatable(c)
        ]

    # --- emptiness --------------------------------------------------------------------------------
    def emptiness(self) -> Command | None:
        budget = self.budgets(REASON_EMPTY)
        chosen = []
        for c in self._by_savings(self._empty_ones()):
            if budget[c.group.name] > 0:
                budget[c.group.name] -= 1
                chosen.append(c)
            else:
                self._budget_bound = True
        return Command("empty", REASON_EMPTY, chosen) if chosen else None

    # --- consolidation ----------------------------------------------------------------------------
    def simulate(self, cands: list[Candidate]) -> Solution:
        """Karpenter's scheduling simulation with the candidates gone."""
        k, state = self.k, self.world.state
        gone = {c.node.name for c in cands} | k.deleting
        moving = [p for c in cands for p in c.pods] + k.deleting_pods()
        pending = [p for p in self.world.pending.values() if provisionable(p)]
        nodes = [n for n in state.nodes if n not in gone]
        deleting_pods = {p.key for p in k.deleting_pods()}

        def may_use(pod: Pod, node: str) -> bool:
            # consolidateAfter: nodes that just had pod events take no moved pods (pending ones and
            # those of nodes being taken away excepted)
            if pod.node is None or pod.key in deleting_pods:
                return True
            target = state.nodes[node]
            group = state.groups.get(target.group)
            after = group.disruption.consolidate_after if group is not None else None
            if not after or not target.ready:
                return True
            since = max(k.last_pod_event.get(node, -1.0), k.initialized_at(node))
            return self.world.now - since >= after

        return solve(state, pending + moving, nodes, state.groups.values(), k.room(gone), may_use, k.masks)

    def consolidation(self, cands: list[Candidate]) -> Command | None:
        """``computeConsolidation``: delete, replace by one cheaper node, or nothing."""
        found = self.simulate(cands)
        state = self.world.state
        if any(p.node is not None for p in found.failed):
            return None
        for key, node in found.on_node.items():
            pod = state.pods.get(key)
            if pod is not None and pod.node is not None and not state.nodes[node].ready:
                return None  # would schedule against an uninitialized node
        if not found.claims:
            return Command("", REASON_UNDERUTILIZED, cands)
        if len(found.claims) > 1:
            return None
        claim = found.claims[0]
        price = sum(c.price for c in cands)
        options = tuple(sorted((it for it in claim.options if it.price_per_hour < price), key=_price))
        if not options:
            return None
        return Command("", REASON_UNDERUTILIZED, cands, (claim.group, options, claim.pods, claim.zone))

    def multi_node(self) -> Command | None:
        budget = self.budgets(REASON_UNDERUTILIZED)
        cands = []
        for c in self._by_savings(self._underutilized()):
            if budget[c.group.name] > 0:
                budget[c.group.name] -= 1
                cands.append(c)
            else:
                self._budget_bound = True
        if len(cands) < 2:
            return None
        low, high = 1, min(len(cands) - 1, 100)
        best: Command | None = None
        while low <= high:
            mid = (low + high) // 2
            command = self.consolidation(cands[: mid + 1])
            if command is not None and command.replacement is not None:
                command = _without_same_type(command)
            if command is not None:
                best = command
                low = mid + 1
            else:
                high = mid - 1
        if best is not None:
            best.method = "multi"
        return best

    def single_node(self) -> Command | None:
        budget = self.budgets(REASON_UNDERUTILIZED)
        by_pool: dict[str, list[Candidate]] = {}
        for c in self._by_savings(self._underutilized()):
            by_pool.setdefault(c.group.name, []).append(c)
        # Pools in turn (Karpenter takes them in map order; here by name, to be reproducible)
        pools = sorted(by_pool)
        turns = max((len(v) for v in by_pool.values()), default=0)
        for i in range(turns):
            for pool in pools:
                if i >= len(by_pool[pool]):
                    continue
                if budget[pool] == 0:
                    self._budget_bound = True
                    continue
                command = self.consolidation([by_pool[pool][i]])
                if command is not None:
                    command.method = "single"
                    return command
        return None

    # --- validation and execution -----------------------------------------------------------------
    def validate(self, command: Command) -> Command | None:
        """The command 15 s later: candidates still candidates within budgets; a consolidation still
        simulates to the same decision."""
        names = [c.node.name for c in command.candidates]
        fresh = self._empty_ones() if command.method == "empty" else self._underutilized()
        now_valid = {c.node.name: c for c in fresh}
        budget = self.budgets(command.reason)
        kept = []
        for name in names:
            c = now_valid.get(name)
            if c is None or budget[c.group.name] == 0:
                if command.method == "empty":
                    continue
                return None
            budget[c.group.name] -= 1
            kept.append(c)
        if not kept:
            return None
        if command.method == "empty":
            return Command("empty", REASON_EMPTY, kept)
        again = self.consolidation(kept)
        if again is None or (again.replacement is None) != (command.replacement is None):
            return None
        if command.replacement is not None and again.replacement is not None:
            wanted = {it.name for it in command.replacement[1]}
            if not wanted <= {it.name for it in again.replacement[1]}:
                return None
        command.candidates = kept
        return command

    def execute(self, command: Command) -> None:
        world, k = self.world, self.k
        for c in command.candidates:
            name = c.node.name
            k.deleting.add(name)
            node = world.state.nodes[name]
            world.set_taints(name, (*node.taints, Taint(DISRUPTED_TAINT, "", TaintEffect.NO_SCHEDULE)))
            world.rec.event(
                world.now,
                "scale_down",
                node=name,
                group=node.group,
                empty=command.method == "empty",
                reason=command.reason,
            )
            k.trigger_node(name)
        if command.replacement is None:
            for c in command.candidates:
                self._drain(c.node.name)
            return
        group, options, pods, zone = command.replacement
        replacement = k.launch(group.name, cheapest(options), pods, command.reason, zone)
        self.world.loop.after(
            group.provision_time, Phase.AUTOSCALER, lambda: self._await(command, replacement)
        )

    def _await_later(self, delay: float, command: Command, replacement: str) -> None:
        self.world.loop.after(delay, Phase.AUTOSCALER, lambda: self._await(command, replacement))

    def _await(self, command: Command, replacement: str) -> None:
        """Candidates go once their replacement is Ready (``waitOrTerminate``)."""
        node = self.world.state.nodes.get(replacement)
        if node is None:  # the replacement was lost: give the candidates back
            for c in command.candidates:
                self._release(c.node.name)
            return
        if not node.ready:
            self.world.loop.after(
                REPLACEMENT_POLL, Phase.AUTOSCALER, lambda: self._await(command, replacement)
            )
            return
        for c in command.candidates:
            self._drain(c.node.name)

    def _release(self, name: str) -> None:
        self.k.deleting.discard(name)
        node = self.world.state.nodes.get(name)
        if node is not None:
            self.world.set_taints(name, tuple(t for t in node.taints if t.key != DISRUPTED_TAINT))

    def _drain(self, name: str) -> None:
        """The termination controller: evict every reschedulable pod, a refused one again after a
        backoff; the node goes once no pod is left on it (checked every second)."""
        world = self.world
        state = world.state
        if name not in state.nodes:
            self.k.deleting.discard(name)
            return
        left = [p for p in state.pods_on[name].values() if p.owner_kind != OwnerKind.DAEMON_SET]
        if not left:
            self.k.deleting.discard(name)
            world.remove_node(name, "consolidation")
            return
        now = world.now
        for pod in left:
            if pod.terminating or now < self._next_eviction.get(pod.key, 0.0):
                continue
            try:
                world.evict(pod, "evicted")
                self._evict_delay.pop(pod.key, None)
                self._next_eviction.pop(pod.key, None)
            except EvictionRefusedError:
                delay = min(self._evict_delay.get(pod.key, EVICTION_BASE_DELAY / 2) * 2, EVICTION_MAX_DELAY)
                self._evict_delay[pod.key] = delay
                self._next_eviction[pod.key] = now + delay
        world.loop.after(DRAIN_POLL, Phase.AUTOSCALER, lambda: self._drain(name))


def _price(it: InstanceType) -> float:
    return it.price_per_hour


def _without_same_type(command: Command) -> Command | None:
    """``filterOutSameInstanceType``: a replacement of a type the candidates have must be cheaper
    than that type."""
    assert command.replacement is not None
    group, options, pods, zone = command.replacement
    names = {c.instance_type.name: c.price for c in command.candidates}
    same = [names[it.name] for it in options if it.name in names]
    if same:
        ceiling = min(same)
        options = tuple(it for it in options if it.price_per_hour < ceiling)
    if not options:
        return None
    command.replacement = (group, options, pods, zone)
    return command
