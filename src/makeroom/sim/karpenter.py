"""Karpenter (v1.14): provisioning in batches for the pods the scheduler cannot place, and
consolidation of NodePools (``sim/karpenter_disruption.py``).

Provisioning: a pod is provisionable when the scheduler marked it unschedulable, it is not bound and
has no ``nominatedNodeName`` (``IsProvisionable``: a nominated pod is "preempting" and left alone, so
makeroom's nomination keeps Karpenter from buying a node for it). Each provisionable pod, and each node
Karpenter is taking away, triggers the batcher; a batch closes when no new trigger came for
``batch_idle_duration`` or ``batch_max_duration`` after it opened, and a pod still waiting triggers again
10 s later. Then one scheduling simulation (``karpenter_solve``) places the provisionable pods and the
pods of the nodes being taken away on the existing nodes (coming-up ones included), or on new
NodeClaims of the pools in weight order within their limits; each NodeClaim is launched as the
cheapest of its instance types and is Ready after the pool's ``provision_time``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from makeroom.model import InstanceType, Pod, Resources
from makeroom.model.nodepool import NODES
from makeroom.model.provisioning import Headroom, cheapest, headroom
from makeroom.scenario.schema import KarpenterSpec
from makeroom.sim.clock import Phase
from makeroom.sim.karpenter_solve import NodeMasks, provisionable, reschedulable, solve
from makeroom.sim.world import World

REQUEUE = 10.0  # a provisionable pod triggers again this long after its last trigger
MIN_NOMINATION = 10.0  # a node that a pass placed pods on is not disrupted for max(2 x batch max, this)


@dataclass(slots=True)
class Batch:
    opened: float
    last: float
    members: set[str] = field(default_factory=set)


class Karpenter:
    """Karpenter's provisioner, and its disruption controller, in the simulated cluster."""

    def __init__(self, world: World, spec: KarpenterSpec, enabled: bool = True) -> None:
        from makeroom.sim.karpenter_disruption import DisruptionController

        self.world = world
        self.spec = spec
        self.enabled = enabled
        self.batch: Batch | None = None
        self.next_trigger: dict[str, float] = {}  # pod key -> when it triggers again
        self.deleting: set[str] = set()  # nodes Karpenter has marked for deletion
        self.nominated_until: dict[str, float] = {}
        self.last_pod_event: dict[str, float] = {}
        self.launched_at: dict[str, float] = {}  # nodes Karpenter launched, and when
        self._checking = False
        self._requeues: set[float] = set()
        self._last_no_scale_up = -1
        self.masks = NodeMasks()
        self.disruption = DisruptionController(self)

    @property
    def nomination_window(self) -> float:
        return max(2 * self.spec.batch_max_duration, MIN_NOMINATION)

    def start(self) -> None:
        if not self.enabled:
            return
        self.world.on_change.append(self._wake)
        self.world.on_pod_event.append(self._pod_event)
        self.disruption.start()

    # --- triggers and batching --------------------------------------------------------------------
    def _pod_event(self, node: str) -> None:
        self.last_pod_event[node] = self.world.now

    def _wake(self) -> None:
        """After any change, once per instant and after the scheduler's pass: trigger for the pods
        that became provisionable."""
        if not self._checking:
            self._checking = True
            self.world.loop.at(self.world.now, Phase.AUTOSCALER, self._check)

    def _check(self) -> None:
        self._checking = False
        now = self.world.now
        for pod in self.world.pending.values():
            if provisionable(pod) and now >= self.next_trigger.get(pod.key, 0.0):
                self.trigger(pod.key)
        for name in sorted(self.deleting):
            key = f"node/{name}"
            if name in self.world.state.nodes and now >= self.next_trigger.get(key, 0.0):
                self.trigger(key)
        live = {f"node/{n}" for n in self.deleting}
        for key in [k for k in self.next_trigger if k not in self.world.pending and k not in live]:
            del self.next_trigger[key]

    def trigger(self, key: str) -> None:
        """``Batcher.Trigger``: open a batch, or add to the open one (which extends its idle time);
        the pod's controller triggers again after ``REQUEUE``."""
        now = self.world.now
        self.next_trigger[key] = now + REQUEUE
        if now + REQUEUE not in self._requeues:
            self._requeues.add(now + REQUEUE)
            self.world.loop.at(now + REQUEUE, Phase.AUTOSCALER, self._requeue)
        if self.batch is None:
            self.batch = Batch(now, now, {key})
            self.world.loop.at(now + self.spec.batch_idle_duration, Phase.AUTOSCALER, self._window)
        elif key not in self.batch.members:
            self.batch.members.add(key)
            self.batch.last = now

    def _requeue(self) -> None:
        self._requeues.discard(self.world.now)
        self._check()

    def trigger_node(self, name: str) -> None:
        """A node being taken away: its pods need room elsewhere (``NodeController``)."""
        self.trigger(f"node/{name}")

    def _window(self) -> None:
        batch = self.batch
        if batch is None:
            return
        now = self.world.now
        closes = min(batch.last + self.spec.batch_idle_duration, batch.opened + self.spec.batch_max_duration)
        if now < closes:
            self.world.loop.at(closes, Phase.AUTOSCALER, self._window)
            return
        self.batch = None
        self.provision()

    # --- the provisioning pass ------------------------------------------------------------------
    def room(self, excluded: set[str]) -> dict[str, Headroom]:
        """What each pool's limits leave after its nodes (those in ``excluded`` aside, as Karpenter
        leaves out nodes marked for deletion)."""
        state = self.world.state
        out = {}
        for g in state.groups.values():
            nodes = [n for n in state.nodes_of(g.name) if n.name not in excluded]
            used = sum((n.allocatable for n in nodes), start=Resources())
            out[g.name] = headroom(g, used, len(nodes))
        return out

    def deleting_pods(self) -> list[Pod]:
        state = self.world.state
        return [
            p
            for name in sorted(self.deleting)
            for p in state.pods_on.get(name, {}).values()
            if reschedulable(p)
        ]

    def provision(self) -> None:
        world = self.world
        state = world.state
        pending = [p for p in world.pending.values() if provisionable(p)]
        pods = pending + self.deleting_pods()
        if not pods:
            return
        nodes = [n for n in state.nodes if n not in self.deleting]
        found = solve(state, pods, nodes, state.groups.values(), self.room(self.deleting), masks=self.masks)
        for node in set(found.on_node.values()):
            self.nominated_until[node] = world.now + self.nomination_window
        launched = 0
        for claim in found.claims:
            if self._exceeded(claim.group.name):
                continue
            self.launch(claim.group.name, cheapest(claim.options), claim.pods, "Provisioned", claim.zone)
            launched += 1
        stuck = [p for p in found.failed if p.node is None]
        if stuck and not launched:
            if self._last_no_scale_up != len(stuck):
                world.rec.event(world.now, "no_scale_up", pods=len(stuck))
                self._last_no_scale_up = len(stuck)
        elif launched:
            self._last_no_scale_up = -1

    def _exceeded(self, pool: str) -> bool:
        """``Create``'s check: the pool's usage (all its nodes) is already over a limit."""
        state = self.world.state
        group = state.groups[pool]
        nodes = state.nodes_of(pool)
        if len(nodes) > group.max:
            return True
        used = sum((n.allocatable for n in nodes), start=Resources())
        return any(used[name] > group.limits[name] for name in group.limits if name != NODES)

    def launch(
        self, pool: str, instance_type: InstanceType, pods: list[Pod], reason: str, zone: str | None = None
    ) -> str:
        """A NodeClaim launched as ``instance_type`` (in ``zone``, else where the cloud puts the pool's
        next node); returns its node's name."""
        world = self.world
        node = world.provision_node(pool, instance_type=instance_type, zone=zone)
        self.launched_at[node.name] = world.now
        world.rec.event(
            world.now,
            "scale_up",
            group=pool,
            nodes=1,
            pods=sorted(p.name for p in pods),
            instance_type=instance_type.name,
            reason=reason,
        )
        return node.name

    def initialized_at(self, name: str) -> float:
        """When a node became Ready (initial nodes: at the start)."""
        launched = self.launched_at.get(name)
        if launched is None:
            return 0.0
        node = self.world.state.nodes[name]
        return launched + self.world.state.groups[node.group].provision_time
