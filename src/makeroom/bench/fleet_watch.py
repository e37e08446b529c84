"""What ``makeroom bench fleet`` measures in one run, from the recorder's events as they happen (the
timeline itself is not kept: at a whole trace's length it would not fit in memory).

- GPU-pod waits: from a pod's creation to its binding, as the traces' ``scheduled_time -
  creation_time`` (the startup after binding is the same under every strategy).
- Never placed: pods removed before they were bound (a scale-down takes pending pods first) and pods
  still pending at the end.
- Needless nodes: nodes a scale-up added that were removed without ever running a pod of the
  workloads whose pods they were bought for.
- GPU utilisation: GPUs asked by bound pods over the GPUs of every billed node, sampled every 5 minutes.
- The demand as applied (every scale, deploy and delete, in order): a fingerprint that must be the
  same for every strategy, since a strategy may move pods but never change what is wanted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from makeroom.sim.clock import Phase
from makeroom.sim.simulation import Simulation

UTIL_EVERY = 300.0
DEMAND_KINDS = ("scale", "deploy", "delete")


@dataclass(slots=True)
class NodeStory:
    wanted: frozenset[str]  # the workloads whose pods the scale-up was for
    served: bool = False


@dataclass
class Watch:
    """Attach to a simulation before it runs; read after."""

    sim: Simulation
    ignore: frozenset[str] = frozenset()  # workloads that are part of a strategy, not of the demand
    created: dict[str, float] = field(default_factory=dict)  # pending pod -> creation time
    workload_of: dict[str, str] = field(default_factory=dict)
    gpu_pod: dict[str, bool] = field(default_factory=dict)
    gpu_waits: list[float] = field(default_factory=list)
    pods_created: int = 0
    gpu_pods_created: int = 0
    bound: int = 0
    removed_unbound: int = 0
    gpu_removed_unbound: int = 0
    scale_ups: int = 0
    nodes: dict[str, NodeStory] = field(default_factory=dict)
    needless: int = 0
    _last_scale_up: frozenset[str] = frozenset()
    _util: list[tuple[float, float]] = field(default_factory=list)  # (gpus asked, gpus billed)
    _demand: Any = field(default_factory=hashlib.sha256)

    def __post_init__(self) -> None:
        self.sim.recorder.listeners.append(self.on_event)
        self.sim.loop.at(0.0, Phase.AUTOSCALER, self._sample)

    def on_event(self, t: float, kind: str, fields: Mapping[str, Any]) -> None:
        if kind == "pod_created":
            self._created(t, fields["pod"], fields["workload"])
        elif kind == "pod_scheduled":
            self._scheduled(t, fields["pod"], fields["node"])
        elif kind in DEMAND_KINDS and fields.get("workload") not in self.ignore:
            self._demand.update(
                f"{t:.3f} {kind} {fields.get('workload')} {fields.get('replicas')}\n".encode()
            )
        elif kind == "scale_up":
            self.scale_ups += 1
            self._last_scale_up = frozenset(self.workload_of.get(p, "") for p in fields["pods"])
        elif kind == "node_provisioning":
            self.nodes[fields["node"]] = NodeStory(self._last_scale_up)
        elif kind == "node_removed":
            story = self.nodes.pop(fields["node"], None)
            if story is not None and not story.served:
                self.needless += 1
        elif "node" in fields and fields["node"] is None and fields.get("pod") in self.created:
            self._removed_unbound(fields["pod"])

    def _created(self, t: float, pod: str, workload: str) -> None:
        self.workload_of[pod] = workload
        if workload in self.ignore:
            return
        self.created[pod] = t
        spec = self.sim.world.workloads[workload].spec
        gpu = spec.requests.requests_gpu()
        self.gpu_pod[pod] = gpu
        self.pods_created += 1
        self.gpu_pods_created += gpu

    def _scheduled(self, t: float, pod: str, node: str) -> None:
        story = self.nodes.get(node)
        workload = self.workload_of.get(pod)
        if story is not None and workload in story.wanted:
            story.served = True
        since = self.created.pop(pod, None)
        if since is None:
            return
        self.bound += 1
        if self.gpu_pod.pop(pod):
            self.gpu_waits.append(t - since)

    def _removed_unbound(self, pod: str) -> None:
        self.created.pop(pod)
        self.removed_unbound += 1
        self.gpu_removed_unbound += self.gpu_pod.pop(pod)

    def _sample(self) -> None:
        state = self.sim.world.state
        cols = state.index.gpu_positions()
        if cols:
            asked = float(state.used[:, cols].sum())
            for w in self.ignore:
                for pod in self.sim.world.pods_of.get(w, {}).values():
                    if pod.node is not None:
                        asked -= float(state.requests_of(pod.spec)[cols].sum())
            billed = float(state.alloc[state.alive][:, cols].sum())
            self._util.append((asked, billed))
        self.sim.loop.after(UTIL_EVERY, Phase.AUTOSCALER, self._sample)

    # --- read after the run ------------------------------------------------------------------------
    @property
    def pending_at_end(self) -> int:
        return len(self.created)

    @property
    def gpu_pending_at_end(self) -> int:
        return sum(self.gpu_pod.get(p, False) for p in self.created)

    @property
    def gpu_utilisation(self) -> float | None:
        billed = sum(b for _, b in self._util)
        return None if billed == 0 else sum(a for a, _ in self._util) / billed

    @property
    def demand_fingerprint(self) -> str:
        return str(self._demand.hexdigest())

    def wait_quantiles(self) -> dict[str, float | None]:
        if not self.gpu_waits:
            return {"p50": None, "p90": None, "p99": None}
        waits = np.asarray(self.gpu_waits)
        return {f"p{q}": float(np.percentile(waits, q)) for q in (50, 90, 99)}
