"""Load a spec-v1 scenario into a real control plane and play its timed events in scaled real time.

Reading: `makeroom.scenario.load_scenario(path)` when the product provides it (its pydantic model is
dumped to plain data), otherwise a minimal reading of the YAML here. Either way the data is normalised
into the small dataclasses below (durations in seconds, quantities as strings).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from makeroom.controller import Strategy
from makeroom.model import ZONE_LABEL

from .cluster import (
    E2E_LABEL,
    GPU_LABEL,
    GROUP_LABEL,
    PROVISION_DELAY_ANNOTATION,
    AutoscalerSettings,
    ControlPlane,
    _kube_client,
    node_manifest,
)

WORKLOAD_LABEL = "makeroom.io/workload"
HOSTNAME_LABEL = "kubernetes.io/hostname"
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
STANDARD_RESOURCES = {"cpu", "memory", "ephemeral-storage", "pods"}
STRATEGIES: tuple[str, ...] = tuple(s.value for s in Strategy)

# ------------------------------------------------------------------------------------------ reading
_DUR = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_SUFFIX = {
    "": 1.0,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}
_QTY = re.compile(r"^([+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")


def parse_duration(value: Any) -> float:
    """Seconds from a number or a string such as `30s`, `5m`, `1h30m`."""
    if isinstance(value, (int, float)):
        return float(value)
    if hasattr(value, "total_seconds"):
        return float(value.total_seconds())
    s = str(value).strip()
    with contextlib.suppress(ValueError):
        return float(s)
    parts = _DUR.findall(s)
    if not parts or "".join(n + u for n, u in parts) != s:
        raise ValueError(f"not a duration: {value!r}")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def parse_quantity(value: Any) -> float:
    s = str(value).strip()
    m = _QTY.match(s)
    if not m:
        raise ValueError(f"not a quantity: {value!r}")
    return float(m.group(1)) * _SUFFIX[m.group(2) or ""]


def _qstr(value: Any) -> str:
    return str(value) if not isinstance(value, float) or not value.is_integer() else str(int(value))


@dataclass
class NodeGroup:
    name: str
    capacity: dict[str, str]
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    min: int = 0
    max: int = 1
    initial: int = 0
    provision_time_s: float = 120.0
    zones: list[str] = field(default_factory=list)

    def zone_labels(self, number: int) -> dict[str, str]:
        """The zone of the group's node number `number` (0-based, in order of creation): round-robin
        over its zones, as the simulator numbers them (docs/scenarios.md)."""
        return {ZONE_LABEL: self.zones[number % len(self.zones)]} if self.zones else {}


@dataclass
class Workload:
    name: str
    replicas: int
    priority: int
    requests: dict[str, str]
    preemption_policy: str = "PreemptLowerPriority"
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, str]] = field(default_factory=list)
    pdb: dict[str, int | str] | None = None
    startup_time_s: float = 10.0
    termination_grace_s: float = 30.0
    placement: dict[str, int] = field(default_factory=dict)
    # The constraints kube-scheduler keeps (docs/scenarios.md), as the scenario states them.
    labels: dict[str, str] = field(default_factory=dict)
    topology_spread: list[dict[str, Any]] = field(default_factory=list)
    affinity: list[dict[str, Any]] = field(default_factory=list)
    anti_affinity: list[dict[str, Any]] = field(default_factory=list)
    host_ports: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Event:
    at_s: float
    kind: str
    body: dict[str, Any]


@dataclass
class Scenario:
    name: str
    duration_s: float
    node_groups: list[NodeGroup]
    workloads: list[Workload]
    events: list[Event]
    autoscaler: dict[str, Any]
    scheduler: dict[str, Any]
    strategy: str | None
    path: Path | None = None
    reader: str = "makeroom_e2e minimal reader"
    placement_by_node: dict[str, dict[str, int]] | None = None

    def group(self, name: str) -> NodeGroup:
        return next(g for g in self.node_groups if g.name == name)


def _dumped(obj: Any) -> Any:
    """Plain data from the product's pydantic model (by YAML key), else the object itself."""
    if hasattr(obj, "model_dump"):
        return obj.model_dump(by_alias=True, mode="json")
    return obj


def _int_or_percent(v: Any) -> int | str:
    return v if isinstance(v, str) and v.endswith("%") else int(v)


def _workload(w: Mapping[str, Any]) -> Workload:
    pdb = w.get("pdb")
    return Workload(
        name=str(w["name"]),
        replicas=int(w.get("replicas", 1)),
        priority=int(w.get("priority", 0)),
        requests={str(k): _qstr(v) for k, v in (w.get("requests") or {}).items()},
        preemption_policy=str(w.get("preemption_policy") or "PreemptLowerPriority"),
        node_selector={str(k): str(v) for k, v in (w.get("node_selector") or {}).items()},
        tolerations=[
            {str(k): str(v) for k, v in t.items() if v is not None} for t in (w.get("tolerations") or [])
        ],
        pdb={str(k): _int_or_percent(v) for k, v in pdb.items() if v is not None} if pdb else None,
        startup_time_s=parse_duration(w.get("startup_time", 10)),
        termination_grace_s=parse_duration(w.get("termination_grace", 30)),
        placement={str(k): int(v) for k, v in (w.get("placement") or {}).items()},
        labels={str(k): str(v) for k, v in (w.get("labels") or {}).items()},
        topology_spread=[dict(c) for c in w.get("topology_spread") or []],
        affinity=[dict(t) for t in w.get("affinity") or []],
        anti_affinity=[dict(t) for t in w.get("anti_affinity") or []],
        host_ports=[dict(h) for h in w.get("host_ports") or []],
    )


def scenario_from_data(data: Mapping[str, Any], path: Path | None = None) -> Scenario:
    groups = [
        NodeGroup(
            name=str(g["name"]),
            capacity={str(k): _qstr(v) for k, v in (g.get("capacity") or {}).items()},
            labels={str(k): str(v) for k, v in (g.get("labels") or {}).items()},
            taints=[{str(k): str(v) for k, v in t.items() if v is not None} for t in (g.get("taints") or [])],
            min=int(g.get("min", 0)),
            max=int(g.get("max", 1)),
            initial=int(g.get("initial", 0)),
            provision_time_s=parse_duration(g.get("provision_time") or 120),
            zones=[str(z) for z in g.get("zones") or []],
        )
        for g in data.get("node_groups") or []
    ]
    events = []
    for e in data.get("events") or []:
        kinds = [k for k in e if k != "at" and e[k] is not None]
        if len(kinds) != 1:
            raise ValueError(f"event needs exactly one kind besides 'at': {e!r}")
        events.append(Event(at_s=parse_duration(e["at"]), kind=kinds[0], body=dict(e[kinds[0]])))
    events.sort(key=lambda ev: ev.at_s)
    controller = data.get("controller") or {}
    return Scenario(
        name=str(data.get("name", path.stem if path else "scenario")),
        duration_s=parse_duration(data.get("duration", 1800)),
        node_groups=groups,
        workloads=[_workload(w) for w in data.get("workloads") or []],
        events=events,
        autoscaler=dict(data.get("autoscaler") or {}),
        scheduler=dict(data.get("scheduler") or {}),
        strategy=controller.get("strategy"),
        path=path,
    )


def _milli_to_quantity(value: Any) -> str:
    """The product's model holds quantities as integer milli-units; Kubernetes wants a quantity."""
    if isinstance(value, str):
        return value
    v = int(value)
    return str(v // 1000) if v % 1000 == 0 else f"{v}m"


def _from_product(obj: Any, path: Path) -> Scenario:
    """Adapt `makeroom.scenario.load_scenario`'s result (a wrapper of the pydantic ScenarioSpec)."""
    spec = getattr(obj, "spec", obj)
    data: dict[str, Any] = spec.model_dump(mode="json")
    for g in data.get("node_groups") or []:
        g["capacity"] = {k: _milli_to_quantity(v) for k, v in (g.get("capacity") or {}).items()}
    workloads = list(data.get("workloads") or [])
    workloads += [e["deploy"] for e in data.get("events") or [] if e.get("deploy")]
    for w in workloads:
        w["requests"] = {k: _milli_to_quantity(v) for k, v in (w.get("requests") or {}).items()}
    sc = scenario_from_data(data, path)
    sc.reader = "makeroom.scenario.load_scenario"
    placement = getattr(obj, "placement", None)
    if placement is not None:  # the product's own initial placement: ((workload, node), ...)
        per: dict[str, dict[str, int]] = {}
        for workload, node in placement:
            per.setdefault(str(workload), {}).setdefault(str(node), 0)
            per[str(workload)][str(node)] += 1
        sc.placement_by_node = per
    return sc


def read_scenario(path: str | Path) -> Scenario:
    """The scenario at `path`, read by the product's loader when it exists, else by a minimal reader."""
    p = Path(path)
    try:
        from makeroom.scenario import load_scenario
    except ImportError:
        pass
    else:
        loaded = load_scenario(p)  # invalid input: the product's InputError propagates
        try:
            return _from_product(loaded, p)
        except (AttributeError, KeyError, TypeError, ValueError):
            pass  # its shape changed: fall back to the minimal reader below
    raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    if not isinstance(raw, Mapping):
        raise ValueError(f"{p}: not a scenario mapping")
    return scenario_from_data(raw, p)


# ------------------------------------------------------------------------------------------ manifests
def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", s.lower()).strip("-")[:50] or "x"


def priority_class_name(namespace: str, workload: str) -> str:
    return f"{namespace}-{_slug(workload)}"[:253]


def _dur_annotation(seconds: float) -> str:
    return f"{max(round(seconds * 1000), 0)}ms"


def pod_labels(w: Workload) -> dict[str, str]:
    """The workload's pods' own labels, as the simulator gives them: its `labels`, else app: <name>."""
    return dict(w.labels) or {"app": _slug(w.name)}


def _selector(term: Mapping[str, Any], own: dict[str, str]) -> dict[str, Any]:
    match = term.get("match_labels")
    return {"matchLabels": dict(own if match is None else match)}


def _affinity_term(term: Mapping[str, Any], own: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"topologyKey": term["topology_key"], "labelSelector": _selector(term, own)}
    if term.get("namespaces"):
        out["namespaces"] = list(term["namespaces"])
    return out


def constraints(w: Workload, own: dict[str, str]) -> dict[str, Any]:
    """The pod spec's topologySpreadConstraints and required pod (anti-)affinity, from the scenario's
    extension keys (docs/scenarios.md); a selector left out means the workload's own labels."""
    spec: dict[str, Any] = {}
    spread = []
    for c in w.topology_spread:
        entry: dict[str, Any] = {
            "maxSkew": c["max_skew"],
            "topologyKey": c["topology_key"],
            "whenUnsatisfiable": c.get("when_unsatisfiable", "DoNotSchedule"),
            "labelSelector": _selector(c, own),
            "nodeAffinityPolicy": c.get("node_affinity_policy", "Honor"),
            "nodeTaintsPolicy": c.get("node_taints_policy", "Ignore"),
        }
        if c.get("min_domains") is not None:
            entry["minDomains"] = c["min_domains"]
        if c.get("match_label_keys"):
            entry["matchLabelKeys"] = list(c["match_label_keys"])
        spread.append(entry)
    if spread:
        spec["topologySpreadConstraints"] = spread
    affinity: dict[str, Any] = {}
    for key, terms in (("podAffinity", w.affinity), ("podAntiAffinity", w.anti_affinity)):
        if terms:
            affinity[key] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [_affinity_term(t, own) for t in terms]
            }
    if affinity:
        spec["affinity"] = affinity
    return spec


def deployment_manifest(ns: str, w: Workload, replicas: int, scale: float) -> dict[str, Any]:
    limits = {k: v for k, v in w.requests.items() if k not in STANDARD_RESOURCES}
    resources: dict[str, Any] = {"requests": dict(w.requests)}
    if limits:
        resources["limits"] = limits  # extended resources need limits equal to requests
    startup = _dur_annotation(w.startup_time_s * scale)
    pod_spec: dict[str, Any] = {
        "priorityClassName": priority_class_name(ns, w.name),
        "terminationGracePeriodSeconds": max(round(w.termination_grace_s * scale), 0),
        "containers": [{"name": "main", "image": "registry.invalid/fake:1", "resources": resources}],
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
    }
    if w.node_selector:
        pod_spec["nodeSelector"] = dict(w.node_selector)
    if w.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in w.tolerations]
    own = pod_labels(w)
    pod_spec.update(constraints(w, own))
    if w.host_ports:
        pod_spec["containers"][0]["ports"] = [
            {"containerPort": h["port"], "hostPort": h["port"], "protocol": h.get("protocol", "TCP")}
            | ({"hostIP": h["host_ip"]} if h.get("host_ip") not in (None, "0.0.0.0") else {})
            for h in w.host_ports
        ]
    labels = {**own, WORKLOAD_LABEL: _slug(w.name)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": _slug(w.name), "namespace": ns, "labels": {**labels, E2E_LABEL: "true"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        "pod-create.stage.kwok.x-k8s.io/delay": "0ms",
                        "pod-create.stage.kwok.x-k8s.io/jitter-delay": "0ms",
                        "pod-ready.stage.kwok.x-k8s.io/delay": startup,
                        "pod-ready.stage.kwok.x-k8s.io/jitter-delay": startup,
                    },
                },
                "spec": pod_spec,
            },
        },
    }


def pdb_manifest(ns: str, w: Workload) -> dict[str, Any] | None:
    if not w.pdb:
        return None
    spec: dict[str, Any] = {"selector": {"matchLabels": {WORKLOAD_LABEL: _slug(w.name)}}}
    if "max_unavailable" in w.pdb:
        spec["maxUnavailable"] = w.pdb["max_unavailable"]
    if "min_available" in w.pdb:
        spec["minAvailable"] = w.pdb["min_available"]
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": _slug(w.name), "namespace": ns},
        "spec": spec,
    }


def priority_class_manifest(ns: str, w: Workload, strategy: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": priority_class_name(ns, w.name), "labels": {E2E_LABEL: "true"}},
        "value": w.priority,
        "preemptionPolicy": "Never" if strategy == "none" else w.preemption_policy,
        "globalDefault": False,
    }


def template_node(g: NodeGroup, annotations: dict[str, str]) -> dict[str, Any]:
    """The node the kwok provider copies for every node it adds to group `g`.

    One zone for all of them: that of the group's next node in the simulator (its number `initial`),
    so the first node added lands in the same zone in both worlds (e2e/README.md, "Zones"). No
    hostname: every node made from the template would carry it."""
    node = node_manifest(
        f"{g.name}-template",
        group=g.name,
        capacity=g.capacity,
        labels={**g.labels, **g.zone_labels(g.initial)},
        taints=g.taints,
        annotations=annotations,
    )
    node["metadata"]["labels"].pop(HOSTNAME_LABEL, None)
    return node


def template_labels(g: NodeGroup) -> dict[str, str]:
    return dict(template_node(g, {})["metadata"]["labels"])


def kwok_provider_configmaps(sc: Scenario, scale: float) -> list[dict[str, Any]]:
    """The kwok cloud provider's config and node templates (one template node per group).

    The harness creates the initial nodes itself (`<group>-<n>`, as the spec names them) with the
    provider's markers (cluster.node_manifest), before the autoscaler starts; the provider sizes each
    group by counting its nodes at every refresh, and creates nodes only when the autoscaler scales up.
    Nodes the autoscaler adds are named `<group>-<5 random characters>` by the provider.
    """
    templates = []
    gpu_types: set[str] = set()
    for g in sc.node_groups:
        node = template_node(
            g,
            {
                PROVISION_DELAY_ANNOTATION: _dur_annotation(g.provision_time_s * scale),
                "cluster-autoscaler.kwok.nodegroup/min-count": str(g.min),
                "cluster-autoscaler.kwok.nodegroup/max-count": str(g.max),
                # Read only until the provider's first refresh, which counts the group's nodes; it
                # must lie within [min, max] (a missing one means 0, refused when min > 0).
                "cluster-autoscaler.kwok.nodegroup/desired-count": str(max(g.min, min(g.initial, g.max))),
            },
        )
        # A new node registers as a kubelet does: NotReady and tainted not-ready:NoSchedule, so that
        # nothing is bound to it before KWOK makes it Ready after the provision delay; the node
        # lifecycle controller then lifts the taint. The autoscaler drops such condition taints from
        # its templates.
        node["spec"]["taints"] = [*node["spec"].get("taints", []), NOT_READY_TAINT]
        node["status"]["conditions"] = [
            {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "provisioning"}
        ]
        gpu = node["metadata"]["labels"].get(GPU_LABEL)
        if gpu:
            gpu_types.add(gpu)
        templates.append(node)
    node_list = {"apiVersion": "v1", "kind": "List", "items": templates}
    config = {
        "apiVersion": "v1alpha1",
        "readNodesFrom": "configmap",
        "nodegroups": {"fromNodeLabelKey": GROUP_LABEL},
        # skipTaint: no kwok-provider:NoSchedule taint on new nodes (scenario pods do not tolerate it).
        "nodes": {
            "skipTaint": True,
            "gpuConfig": {"gpuLabelKey": GPU_LABEL, "availableGPUTypes": {t: {} for t in sorted(gpu_types)}},
        },
        "configmap": {"name": "kwok-provider-templates"},
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "kwok-provider-config",
                "namespace": "kube-system",
                "labels": {E2E_LABEL: "true"},
            },
            "data": {"config": yaml.safe_dump(config)},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "kwok-provider-templates",
                "namespace": "kube-system",
                "labels": {E2E_LABEL: "true"},
            },
            "data": {"templates": yaml.safe_dump(node_list)},
        },
    ]


def autoscaler_settings(sc: Scenario, scale: float) -> AutoscalerSettings:
    """The scenario's autoscaler as flags: every duration times `scale` (real seconds per scenario
    second). Scenario keys map to their flags; the autoscaler's other timers keep their default
    values, scaled the same way, so that the compressed world keeps their proportions. The
    autoscaler's hard-coded real-time constants cannot be scaled (e2e/README.md lists them)."""
    a = sc.autoscaler

    def dur(key: str, default: float) -> float:
        return parse_duration(a.get(key, default)) * scale

    default = AutoscalerSettings()
    return AutoscalerSettings(
        scan_interval_s=dur("scan_interval", 10),
        expander=str(a.get("expander", "least-waste")),
        priorities=tuple(g.name for g in sc.node_groups),
        scale_down_unneeded_time_s=dur("scale_down_unneeded_time", 600),
        scale_down_delay_after_add_s=dur("scale_down_delay_after_add", 600),
        scale_down_utilization_threshold=float(a.get("scale_down_utilization_threshold", 0.5)),
        expendable_pods_priority_cutoff=int(a.get("expendable_pods_priority_cutoff", -10)),
        max_graceful_termination_s=dur("max_graceful_termination", 600),
        max_node_provision_time_s=default.max_node_provision_time_s * scale,
        max_node_startup_time_s=default.max_node_startup_time_s * scale,
        scale_down_unready_time_s=default.scale_down_unready_time_s * scale,
        scale_down_delay_after_failure_s=default.scale_down_delay_after_failure_s * scale,
        unremovable_node_recheck_timeout_s=default.unremovable_node_recheck_timeout_s * scale,
        node_delete_delay_after_taint_s=default.node_delete_delay_after_taint_s * scale,
        # The drain retries a refused eviction every 10 s, a constant: keeping this bound unscaled
        # keeps the number of attempts the real autoscaler makes (12).
        max_pod_eviction_time_s=default.max_pod_eviction_time_s,
        initial_node_group_backoff_s=default.initial_node_group_backoff_s * scale,
        max_node_group_backoff_s=default.max_node_group_backoff_s * scale,
    )


# ------------------------------------------------------------------------------------------ placement
def first_fit(sc: Scenario, node_names: dict[str, list[str]]) -> dict[str, dict[str, int]]:
    """Per workload, how many pods start on each node (group placements: first-fit in name order)."""
    used: dict[str, dict[str, float]] = {n: {} for names in node_names.values() for n in names}
    cap: dict[str, dict[str, float]] = {}
    for g in sc.node_groups:
        for n in node_names.get(g.name, []):
            cap[n] = {k: parse_quantity(v) for k, v in g.capacity.items()}
    out: dict[str, dict[str, int]] = {}
    for w in sc.workloads:
        req = {k: parse_quantity(v) for k, v in w.requests.items()}
        req["pods"] = req.get("pods", 0) + 1
        per_node: dict[str, int] = {}
        for target, count in w.placement.items():
            candidates = node_names.get(target, [target] if target in cap else [])
            for _ in range(count):
                for n in sorted(candidates):
                    if all(used[n].get(k, 0) + v <= cap[n].get(k, 0) + 1e-9 for k, v in req.items()):
                        for k, v in req.items():
                            used[n][k] = used[n].get(k, 0) + v
                        per_node[n] = per_node.get(n, 0) + 1
                        break
                else:
                    raise ValueError(f"placement of {w.name} on {target} does not fit")
        out[w.name] = per_node
    return out


# ------------------------------------------------------------------------------------------ running
@dataclass
class LoadedScenario:
    """A scenario loaded into a control plane: its namespace, clock, observer and events runner."""

    cp: ControlPlane
    scenario: Scenario
    namespace: str
    strategy: str
    scale: float
    initial_nodes: dict[str, list[str]]
    t0: float = 0.0
    seen_nodes: dict[str, set[str]] = field(default_factory=dict)
    applied: list[tuple[float, Event]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    # -- clock
    def scenario_time(self) -> float:
        """Scenario seconds elapsed since t=0 (real seconds divided by the time scale)."""
        return (time.monotonic() - self.t0) / self.scale

    def real_seconds(self, scenario_seconds: float) -> float:
        return scenario_seconds * self.scale

    # -- events
    def start(self) -> None:
        self.t0 = time.monotonic()
        for target in (self._observe, self._play_events):
            t = threading.Thread(target=target, name=f"scenario-{target.__name__}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)

    def events_done(self) -> bool:
        return len(self.applied) == len(self.scenario.events)

    def wait_events_applied(self, timeout: float | None = None) -> None:
        last = self.scenario.events[-1].at_s * self.scale if self.scenario.events else 0.0
        limit = timeout if timeout is not None else last + 60
        self.cp.wait_for(self.events_done, limit, "scenario events applied")
        if self.errors:
            raise RuntimeError("scenario events failed: " + "; ".join(self.errors))

    def _play_events(self) -> None:
        for ev in self.scenario.events:
            due = self.t0 + ev.at_s * self.scale
            while not self._stop.is_set() and time.monotonic() < due:
                self._stop.wait(min(0.05, max(due - time.monotonic(), 0)))
            if self._stop.is_set():
                return
            try:
                apply_event(self, ev)
            except Exception as exc:
                self.errors.append(f"{ev.kind} at {ev.at_s}s: {exc!r}")
            self.applied.append((self.scenario_time(), ev))

    def _observe(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                for n in self.cp.nodes():
                    labels = n.metadata.labels or {}
                    g = labels.get(GROUP_LABEL)
                    if g:
                        self.seen_nodes.setdefault(g, set()).add(n.metadata.name)
                    if HOSTNAME_LABEL not in labels:
                        # A kubelet labels its node with its hostname when it registers; the kwok
                        # provider's nodes come without it, and required anti-affinity on hostname
                        # would not see two pods on one such node. Labelled while still NotReady.
                        self.cp.core.patch_node(
                            n.metadata.name, {"metadata": {"labels": {HOSTNAME_LABEL: n.metadata.name}}}
                        )
            self._stop.wait(0.5)

    # -- observations
    def pods(self) -> list[Any]:
        return self.cp.list_pods(self.namespace)

    def workload_pods(self, workload: str) -> list[Any]:
        return self.cp.list_pods(self.namespace, f"{WORKLOAD_LABEL}={_slug(workload)}")

    def ready_pods(self, workload: str) -> list[Any]:
        return [
            p for p in self.workload_pods(workload) if _is_ready(p) and p.metadata.deletion_timestamp is None
        ]

    def evicted_pods(self) -> set[str]:
        """Pods removed by the scheduler's preemption or by an eviction (autoscaler scale-down)."""
        names: set[str] = set()
        for e in self.cp.events(self.namespace):
            if e.reason in ("Preempted", "Evicted", "ScaleDown") and (e.involved_object.kind or "") == "Pod":
                names.add(e.involved_object.name)
        return names

    def nodes_added(self) -> dict[str, int]:
        self._observe_once()
        return {
            g.name: len(self.seen_nodes.get(g.name, set()) - set(self.initial_nodes.get(g.name, [])))
            for g in self.scenario.node_groups
        }

    def _observe_once(self) -> None:
        for n in self.cp.nodes():
            g = (n.metadata.labels or {}).get(GROUP_LABEL)
            if g:
                self.seen_nodes.setdefault(g, set()).add(n.metadata.name)

    def summary(self) -> dict[str, Any]:
        """A subset of `makeroom simulate --json`, observed on the real components."""
        nodes = {n.metadata.name: (n.metadata.labels or {}).get(GROUP_LABEL) for n in self.cp.nodes()}
        added = self.nodes_added()
        evicted = self.evicted_pods()
        names = {_slug(w.name): w.name for w in self.scenario.workloads}
        pods = []
        for p in self.pods():
            if p.metadata.deletion_timestamp is not None:
                continue
            node = p.spec.node_name
            pods.append(
                {
                    "name": p.metadata.name,
                    "workload": names.get(str((p.metadata.labels or {}).get(WORKLOAD_LABEL))),
                    "node": node,
                    "group": nodes.get(node) if node else None,
                    "phase": p.status.phase,
                    "ready": _is_ready(p),
                }
            )
        workloads = {}
        for w in self.scenario.workloads:
            slug = _slug(w.name)
            dep = None
            with contextlib.suppress(Exception):
                dep = self.cp.apps.read_namespaced_deployment(slug, self.namespace)
            workloads[w.name] = {
                "priority": w.priority,
                "desired": int(dep.spec.replicas) if dep is not None else 0,
                "ready_at_end": sum(1 for p in pods if p["workload"] == w.name and p["ready"]),
                "evicted": sum(1 for n in evicted if n.startswith(slug + "-")),
            }
        groups = {
            g.name: {
                "nodes_at_end": sum(1 for v in nodes.values() if v == g.name),
                "peak_nodes": len(self.seen_nodes.get(g.name, set())),
                "nodes_added": added[g.name],
            }
            for g in self.scenario.node_groups
        }
        return {
            "scenario": self.scenario.name,
            "strategy": self.strategy,
            "time_scale": self.scale,
            "elapsed_scenario_s": round(self.scenario_time(), 1),
            "workloads": workloads,
            "node_groups": groups,
            "evictions": len(evicted),
            "pending_at_end": sorted(p["name"] for p in pods if p["phase"] != "Running"),
            "pods": pods,
        }


def _is_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _create(cp: ControlPlane, body: dict[str, Any]) -> None:
    k = _kube_client()
    k.utils.create_from_dict(cp.api, body)


def _add_workload(ls: LoadedScenario, w: Workload, replicas: int) -> None:
    cp, ns = ls.cp, ls.namespace
    cp.scheduling.create_priority_class(priority_class_manifest(ns, w, ls.strategy))
    pdb = pdb_manifest(ns, w)
    if pdb:
        cp.policy.create_namespaced_pod_disruption_budget(ns, pdb)
    cp.apps.create_namespaced_deployment(ns, deployment_manifest(ns, w, replicas, ls.scale))


def _scale(ls: LoadedScenario, workload: str, replicas: int) -> None:
    ls.cp.apps.patch_namespaced_deployment_scale(
        _slug(workload), ls.namespace, {"spec": {"replicas": replicas}}
    )


def apply_event(ls: LoadedScenario, ev: Event) -> None:
    cp, ns, b = ls.cp, ls.namespace, ev.body
    if ev.kind == "scale":
        _scale(ls, str(b["workload"]), int(b["replicas"]))
    elif ev.kind == "deploy":
        w = _workload(b)
        ls.scenario.workloads.append(w)
        _add_workload(ls, w, w.replicas)
    elif ev.kind == "delete":
        name = _slug(str(b["workload"]))
        cp.apps.delete_namespaced_deployment(name, ns)
        with contextlib.suppress(Exception):
            cp.policy.delete_namespaced_pod_disruption_budget(name, ns)
    elif ev.kind == "remove_node":
        node = str(b["node"])
        pods = cp.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
        cp.core.delete_node(node)
        for p in pods:  # an abrupt loss: its pods are gone at once
            with contextlib.suppress(Exception):
                cp.core.delete_namespaced_pod(p.metadata.name, p.metadata.namespace, grace_period_seconds=0)
    elif ev.kind == "cordon":
        cp.set_unschedulable(str(b["node"]), True)
    elif ev.kind == "uncordon":
        cp.set_unschedulable(str(b["node"]), False)
    else:
        raise ValueError(f"unknown event kind {ev.kind!r}")


def place_initially(ls: LoadedScenario, plan: Mapping[str, Mapping[str, int]], timeout: float) -> None:
    """The scenario's initial placement (workload -> node -> pods), made by the real scheduler: for each
    node in turn, only that node is schedulable while the deployment grows by the pods meant for it. No
    pin stays on the pods. The nodes are left unschedulable; the caller opens them at t=0."""
    cp = ls.cp
    for w in ls.scenario.workloads:
        total = 0
        for node, count in sorted(plan.get(w.name, {}).items()):
            cp.set_unschedulable(node, False)
            total += count
            _scale(ls, w.name, total)

            def bound(node: str = node, count: int = count, name: str = w.name) -> bool:
                return len([p for p in ls.workload_pods(name) if p.spec.node_name == node]) >= count

            cp.wait_for(bound, timeout, f"{count} {w.name} pods bound to {node}")
            cp.set_unschedulable(node, True)
    for w in ls.scenario.workloads:
        placed = sum(plan.get(w.name, {}).values())
        if placed:
            cp.wait_for(
                lambda name=w.name, placed=placed: len(ls.ready_pods(name)) >= placed,  # type: ignore[misc]
                timeout,
                f"{placed} {w.name} pods Ready",
            )


def load_into(
    cp: ControlPlane,
    path: str | Path,
    *,
    strategy: str | None = None,
    time_scale: float = 0.1,
    namespace: str | None = None,
    reset: bool = True,
    start: bool = True,
    autoscaler: bool = True,
    capacity_buffers: bool = False,
    timeout: float = 120.0,
) -> LoadedScenario:
    """Load the scenario at `path` and (with start=True) start its clock, observer and events.

    strategy: none | preemption | evict | migrate (default: the file's, else none). `none` runs
    kube-scheduler without DefaultPreemption and gives every PriorityClass preemptionPolicy Never;
    the others run the scheduler with preemption (evict/migrate also need the makeroom controller,
    which is not part of this harness: run it against `cp.kubeconfig`).
    time_scale: real seconds per scenario second (0.1: a 1m event happens 6 s after t=0).
    capacity_buffers: run the autoscaler with its CapacityBuffer controller (and the CRD installed).
    """
    sc = read_scenario(path)
    strat = strategy or sc.strategy or "none"
    if strat not in STRATEGIES:
        raise ValueError(f"unknown strategy {strat!r}; expected one of {', '.join(STRATEGIES)}")
    if reset:
        cp.configure_autoscaler(None)
        cp.delete_e2e_objects()
    preempt = strat != "none" and bool(sc.scheduler.get("preemption", True))
    cp.configure_scheduler(preemption=preempt, scoring=str(sc.scheduler.get("scoring", "LeastAllocated")))
    ns = namespace or f"s-{_slug(sc.name)}"[:40] + f"-{int(time.time() * 1000) % 100000}"
    cp.core.create_namespace({"metadata": {"name": ns, "labels": {E2E_LABEL: "true"}}})

    # Nodes: the initial ones, all cordoned while the initial placement runs.
    initial: dict[str, list[str]] = {}
    for g in sc.node_groups:
        names = [f"{g.name}-{i}" for i in range(g.initial)]
        initial[g.name] = names
        for i, n in enumerate(names):
            body = node_manifest(
                n,
                group=g.name,
                capacity=g.capacity,
                labels={**g.labels, **g.zone_labels(i)},
                taints=g.taints,
                annotations={},
            )
            body["spec"]["unschedulable"] = True
            cp.core.create_node(body)
    all_nodes = [n for names in initial.values() for n in names]
    cp.wait_nodes_ready(all_nodes, timeout=timeout)

    ls = LoadedScenario(
        cp=cp, scenario=sc, namespace=ns, strategy=strat, scale=time_scale, initial_nodes=initial
    )
    plan = sc.placement_by_node if sc.placement_by_node is not None else first_fit(sc, initial)
    for w in sc.workloads:
        _add_workload(ls, w, 0)

    place_initially(ls, plan, timeout)
    for n in all_nodes:
        cp.set_unschedulable(n, False)

    # t=0: the replicas not covered by the placement are created pending, the autoscaler starts.
    for w in sc.workloads:
        if w.replicas > sum(plan.get(w.name, {}).values()):
            _scale(ls, w.name, w.replicas)
    if autoscaler and bool(sc.autoscaler.get("enabled", True)):
        for cm in kwok_provider_configmaps(sc, time_scale):
            cp.core.create_namespaced_config_map("kube-system", cm)
        settings = autoscaler_settings(sc, time_scale)
        cp.configure_autoscaler(replace(settings, capacity_buffers=capacity_buffers))
    if start:
        ls.start()
    return ls
