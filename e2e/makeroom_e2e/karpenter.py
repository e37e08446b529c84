"""Real Karpenter (v1.14.1, its KWOK cloud provider) on the loopback control plane, and scenarios that
say `autoscaler.kind: karpenter` loaded into it.

- `e2e/build-karpenter.sh` builds `sigs.k8s.io/karpenter/kwok` into the e2e cache as `bin/karpenter`
  and copies its CRDs (NodePool, NodeClaim, NodeOverlay, CapacityBuffer, KWOKNodeClass) out of the module
  into `bin/karpenter-crds/`.
- From the scenario: an instance-types file (each type's resources are its allocatable plus the KWOK
  provider's overhead of 100m CPU and 10Mi memory, so that a node's allocatable is the scenario's), one
  KWOKNodeClass per pool whose `nodeRegistrationDelay` is the pool's scaled provision time (and one
  without delay for the initial nodes), and the NodePools as `makeroom.snapshot.nodepools` writes them.
- The initial nodes are NodeClaims named `<pool>-<n>` (so Karpenter counts them in the pools' limits
  and may consolidate them); their nodes carry the hostname `<pool>-<n>`. While the initial pods are
  placed (the same cordon steering as `scenario.load_into`), the NodePools' budgets allow no
  disruption; the scenario's budgets are put back at t=0.
- Karpenter runs as a process with `KUBECONFIG`, leader election off, and the scenario's batch window.
  Karpenter's own timers (its 1 s batch idle time, 10 s polls, 15 s validation) are not scaled by the
  time scale: they run at Karpenter's speed, so the race between makeroom's nomination and Karpenter's
  batch is the real one.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from makeroom.model import InstanceType, NodeGroup
from makeroom.model.nodepool import INSTANCE_TYPE_LABEL, NODEPOOL_LABEL
from makeroom.scenario import Scenario as ProductScenario
from makeroom.scenario import load_scenario
from makeroom.snapshot.nodepools import nodepool_object

from .cluster import E2E_LABEL, GROUP_LABEL, ControlPlane, _kube_client
from .cluster import install_crds as install_crd_files
from .procs import Process, free_port
from .scenario import STRATEGIES, LoadedScenario, _add_workload, _scale, _slug, place_initially, read_scenario

KARPENTER_GROUP = "karpenter.sh"
VERSION = "v1"
NODE_CLASS = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass"}
UNREGISTERED_TAINT = "karpenter.sh/unregistered"
OVERHEAD_CPU_MILLI = 100  # the KWOK provider's kube-reserved, taken off each type's capacity
OVERHEAD_MEMORY = 10 * 2**20
ZONE = "test-zone-a"
HOLD_BUDGETS = [{"nodes": "0"}]  # while the initial pods are placed


def binary(cp: ControlPlane) -> Path:
    return cp.binaries.path("karpenter")


def crd_dir(cp: ControlPlane) -> Path:
    return cp.binaries.directory / "karpenter-crds"


def available(cp: ControlPlane) -> bool:
    return cp.binaries.has("karpenter") and any(crd_dir(cp).glob("*.yaml"))


# --------------------------------------------------------------------------------------- manifests
def _quantity(milli: int, name: str) -> str:
    if name == "memory" or name.endswith("storage"):
        return str(milli // 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def instance_types(groups: Iterable[NodeGroup]) -> list[dict[str, Any]]:
    """The KWOK provider's instance-types file: every type of every pool, its price as one on-demand
    offering in one zone, its resources its allocatable plus the provider's overhead."""
    out: dict[str, dict[str, Any]] = {}
    for g in groups:
        for it in g.types():
            resources = {name: _quantity(it.capacity[name], name) for name in it.capacity}
            resources["cpu"] = _quantity(it.capacity["cpu"] + OVERHEAD_CPU_MILLI, "cpu")
            resources["memory"] = _quantity(it.capacity["memory"] + OVERHEAD_MEMORY * 1000, "memory")
            entry = {
                "name": it.name,
                "offerings": [
                    {
                        "Price": it.price_per_hour,
                        "Available": True,
                        "Requirements": [
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]},
                        ],
                    }
                ],
                "architecture": "amd64",
                "operatingSystems": ["linux"],
                "resources": resources,
            }
            if it.name in out and out[it.name] != entry:
                raise ValueError(f"instance type {it.name!r} is described twice, differently")
            out[it.name] = entry
    return list(out.values())


def node_class(name: str, delay_s: float) -> dict[str, Any]:
    spec = {"nodeRegistrationDelay": f"{max(round(delay_s), 0)}s"} if delay_s >= 1 else {}
    return {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": name, "labels": {E2E_LABEL: "true"}},
        "spec": spec,
    }


def initial_class(pool: str) -> str:
    return f"{pool}-initial"


def nodepool(group: NodeGroup, *, hold: bool) -> dict[str, Any]:
    obj = nodepool_object(group, {**NODE_CLASS, "name": group.name})
    obj["metadata"]["labels"] = {E2E_LABEL: "true"}
    obj["spec"]["template"]["metadata"]["labels"][E2E_LABEL] = "true"
    if hold:
        obj["spec"]["disruption"]["budgets"] = HOLD_BUDGETS
    return obj


def initial_nodeclaim(group: NodeGroup, name: str) -> dict[str, Any]:
    """An initial node as a NodeClaim of its pool, of the pool's first type, launched at once."""
    it: InstanceType = group.types()[0]
    pool = nodepool_object(group, {**NODE_CLASS, "name": initial_class(group.name)})
    template = pool["spec"]["template"]
    requirements = [r for r in template["spec"]["requirements"] if r["key"] != INSTANCE_TYPE_LABEL]
    requirements += [
        {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": [it.name]},
        {"key": NODEPOOL_LABEL, "operator": "In", "values": [group.name]},
    ]
    spec: dict[str, Any] = {
        "nodeClassRef": template["spec"]["nodeClassRef"],
        "requirements": requirements,
        "expireAfter": "Never",
        "resources": {"requests": {n: _quantity(it.capacity[n], n) for n in it.capacity}},
    }
    if template["spec"].get("taints"):
        spec["taints"] = template["spec"]["taints"]
    labels = {**template["metadata"]["labels"], NODEPOOL_LABEL: group.name, E2E_LABEL: "true"}
    return {
        "apiVersion": f"{KARPENTER_GROUP}/{VERSION}",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


# --------------------------------------------------------------------------------------- objects
def _custom(cp: ControlPlane) -> Any:
    return _kube_client().client.CustomObjectsApi(cp.api)


def install_crds(cp: ControlPlane, timeout: float = 60.0) -> None:
    """Karpenter's CRDs from the module (idempotent); returns once they are established."""
    install_crd_files(cp, sorted(crd_dir(cp).glob("*.yaml")), "Karpenter's CRDs", timeout)


def _create(cp: ControlPlane, obj: dict[str, Any]) -> None:
    group, version = obj["apiVersion"].split("/")
    plural = obj["kind"].lower() + ("es" if obj["kind"].endswith("s") else "s")
    _custom(cp).create_cluster_custom_object(group, version, plural, obj)


def list_objects(
    cp: ControlPlane, plural: str, group: str = KARPENTER_GROUP, version: str = VERSION
) -> list[Any]:
    k = _kube_client()
    try:
        return list(_custom(cp).list_cluster_custom_object(group, version, plural).get("items") or [])
    except k.client.ApiException:
        return []


def nodeclaims(cp: ControlPlane) -> list[dict[str, Any]]:
    return list_objects(cp, "nodeclaims")


def delete_objects(cp: ControlPlane, timeout: float = 60.0) -> None:
    """NodeClaims, NodePools and KWOKNodeClasses go (their finalizers too: Karpenter is stopped first),
    and the nodes Karpenter made; the caller then removes the rest (`delete_e2e_objects`)."""
    k = _kube_client()
    api = _custom(cp)
    for plural, group, version in (
        ("nodeclaims", KARPENTER_GROUP, VERSION),
        ("nodepools", KARPENTER_GROUP, VERSION),
        ("kwoknodeclasses", "karpenter.kwok.sh", "v1alpha1"),
    ):
        for obj in list_objects(cp, plural, group, version):
            name = obj["metadata"]["name"]
            with contextlib.suppress(k.client.ApiException):
                api.patch_cluster_custom_object(
                    group, version, plural, name, {"metadata": {"finalizers": None}}
                )
            with contextlib.suppress(k.client.ApiException):
                api.delete_cluster_custom_object(group, version, plural, name)
    for n in cp.core.list_node().items:
        if (n.metadata.labels or {}).get(NODEPOOL_LABEL):
            with contextlib.suppress(k.client.ApiException):
                cp.core.patch_node(n.metadata.name, {"metadata": {"finalizers": None}})
            with contextlib.suppress(k.client.ApiException):
                cp.core.delete_node(n.metadata.name)
    cp.wait_for(lambda: not nodeclaims(cp), timeout, "NodeClaims deleted")


# --------------------------------------------------------------------------------------- the process
def start(
    cp: ControlPlane,
    types_file: Path,
    *,
    batch_idle_s: float,
    batch_max_s: float,
    capacity_buffers: bool = False,
) -> Process:
    """Karpenter as a process against the control plane (its name in `cp.processes`: karpenter); with
    `capacity_buffers`, its CapacityBuffer feature gate on (the other gates keep their defaults)."""
    stop(cp)
    env = {
        **os.environ,
        "KUBECONFIG": str(cp.kubeconfig),
        "DISABLE_LEADER_ELECTION": "true",
        "SYSTEM_NAMESPACE": "kube-system",
        "INSTANCE_TYPES_FILE_PATH": str(types_file),
        "METRICS_PORT": str(free_port()),
        "HEALTH_PROBE_PORT": str(free_port()),
        "BATCH_IDLE_DURATION": f"{batch_idle_s:g}s",
        "BATCH_MAX_DURATION": f"{batch_max_s:g}s",
        "LOG_LEVEL": "debug",
        **({"FEATURE_GATES": "CapacityBuffer=true"} if capacity_buffers else {}),
    }
    p = Process(
        "karpenter", [str(binary(cp))], cp.workdir / "logs" / "karpenter.log", env=env, detach=cp.detach
    )
    cp.processes["karpenter"] = p
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and p.alive():
        time.sleep(0.1)
    if not p.alive():
        cp.processes.pop("karpenter", None)
        raise RuntimeError(f"karpenter exited at start:\n{p.tail()}")
    return p


def stop(cp: ControlPlane) -> None:
    if "karpenter" in cp.processes:
        cp.processes.pop("karpenter").stop()


def reset(cp: ControlPlane) -> None:
    """Karpenter stopped and every object of the previous scenario gone."""
    stop(cp)
    delete_objects(cp)


# --------------------------------------------------------------------------------------- scenarios
def _ready_and_registered(node: Any) -> bool:
    ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
    return ready and not any(t.key == UNREGISTERED_TAINT for t in node.spec.taints or [])


def _by_hostname(cp: ControlPlane) -> dict[str, Any]:
    return {str((n.metadata.labels or {}).get("kubernetes.io/hostname")): n for n in cp.nodes()}


def load(
    cp: ControlPlane,
    path: str | Path,
    *,
    strategy: str | None = None,
    time_scale: float = 0.1,
    timeout: float = 120.0,
    before_clock: Callable[[LoadedScenario], None] | None = None,
    capacity_buffers: bool = False,
) -> Loaded:
    """Load a Karpenter scenario: NodePools, Karpenter, initial NodeClaims, the initial pods where the
    scenario places them; then t=0: the scenario's budgets, the pending replicas, the clock."""
    product: ProductScenario = load_scenario(Path(path))
    sc = read_scenario(path)
    strat = strategy or sc.strategy or "none"
    if strat not in STRATEGIES:
        raise ValueError(f"unknown strategy {strat!r}; expected one of {', '.join(STRATEGIES)}")
    cp.configure_autoscaler(None)
    reset(cp)
    cp.delete_e2e_objects()
    preempt = strat != "none" and bool(sc.scheduler.get("preemption", True))
    cp.configure_scheduler(preemption=preempt, scoring=str(sc.scheduler.get("scoring", "LeastAllocated")))
    install_crds(cp)
    ns = f"k-{_slug(sc.name)}"[:40] + f"-{int(time.time() * 1000) % 100000}"
    cp.core.create_namespace({"metadata": {"name": ns, "labels": {E2E_LABEL: "true"}}})

    groups = product.groups
    by_name = {g.name: g for g in groups}
    for g in groups:
        _create(cp, node_class(g.name, g.provision_time * time_scale))
        _create(cp, node_class(initial_class(g.name), 0))
        _create(cp, nodepool(g, hold=True))
    types_file = cp.workdir / f"instance-types-{ns}.json"
    types_file.write_text(json.dumps(instance_types(groups), indent=1), encoding="utf-8")
    karpenter = product.spec.autoscaler.karpenter
    if product.spec.autoscaler.enabled:
        start(
            cp,
            types_file,
            batch_idle_s=karpenter.batch_idle_duration,
            batch_max_s=karpenter.batch_max_duration,
            capacity_buffers=capacity_buffers,
        )

    initial: dict[str, list[str]] = {}
    for first in product.initial_nodes:
        initial.setdefault(first.group, []).append(first.name)
        _create(cp, initial_nodeclaim(by_name[first.group], first.name))
    wanted = [n for names in initial.values() for n in names]

    def registered() -> bool:
        nodes = _by_hostname(cp)
        return all(name in nodes and _ready_and_registered(nodes[name]) for name in wanted)

    cp.wait_for(registered, timeout, f"initial NodeClaims' nodes Ready and registered: {wanted}")
    real = {name: found.metadata.name for name, found in _by_hostname(cp).items() if name in wanted}
    for name in real.values():
        cp.set_unschedulable(name, True)

    ls = LoadedScenario(
        cp=cp,
        scenario=sc,
        namespace=ns,
        strategy=strat,
        scale=time_scale,
        initial_nodes={g: [real[n] for n in names] for g, names in initial.items()},
    )
    plan: dict[str, dict[str, int]] = {}
    for workload, node_name in product.placement:
        per = plan.setdefault(workload, {})
        per[real[node_name]] = per.get(real[node_name], 0) + 1
    for w in sc.workloads:
        _add_workload(ls, w, 0)
    place_initially(ls, plan, timeout)
    for name in real.values():
        cp.set_unschedulable(name, False)
    if before_clock is not None:  # e.g. start makeroom run, which then never sees the placement made
        before_clock(ls)
    for g in groups:  # t=0: the scenario's own budgets
        budgets = nodepool(g, hold=False)["spec"]["disruption"]["budgets"]
        _custom(cp).patch_cluster_custom_object(
            KARPENTER_GROUP, VERSION, "nodepools", g.name, {"spec": {"disruption": {"budgets": budgets}}}
        )
    for w in sc.workloads:
        if w.replicas > sum(plan.get(w.name, {}).values()):
            _scale(ls, w.name, w.replicas)
    seen = ClaimsSeen(cp, {n for names in initial.values() for n in names})
    ls.start()
    seen.start()
    return Loaded(ls, seen)


@dataclass
class ClaimsSeen:
    """Every NodeClaim Karpenter launched since t=0 (the initial ones aside), even one gone since:
    name -> (pool, instance type). Polled every 0.5 s."""

    cp: ControlPlane
    initial: set[str]
    claims: dict[str, tuple[str, str]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="nodeclaims-seen", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                self.poll()
            self._stop.wait(0.5)

    def poll(self) -> None:
        for claim in nodeclaims(self.cp):
            meta = claim["metadata"]
            if meta["name"] in self.initial or self.claims.get(meta["name"], ("", ""))[1]:
                continue  # an initial node, or one whose type is known already
            labels = meta.get("labels") or {}
            kind = labels.get(INSTANCE_TYPE_LABEL) or ""
            if not kind:
                for r in (claim.get("spec") or {}).get("requirements") or []:
                    if r.get("key") == INSTANCE_TYPE_LABEL and len(r.get("values") or []) == 1:
                        kind = r["values"][0]
            self.claims[meta["name"]] = (str(labels.get(NODEPOOL_LABEL)), kind)

    def per_pool(self) -> dict[str, list[str]]:
        self.poll()
        out: dict[str, list[str]] = {}
        for pool, kind in self.claims.values():
            out.setdefault(pool, []).append(kind)
        return out

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


@dataclass
class Loaded:
    """A Karpenter scenario running: the scenario (clock, events, observations) and the NodeClaims."""

    ls: LoadedScenario
    claims: ClaimsSeen

    def stop(self) -> None:
        self.claims.stop()
        self.ls.stop()


def group_of(node: Any) -> str | None:
    return (node.metadata.labels or {}).get(GROUP_LABEL)
