"""Generated scheduling cases for the differential test against kube-scheduler (issue 19).

A case is a small cluster of its own and one new pod: nodes in 2-3 zones with labels, taints (some
cordoned, some with room for few pods), pods already bound to them (labels, requests, host ports, some
with their own required anti-affinity), namespaces with labels, a PersistentVolume with zone node
affinity bound to a claim; and a pending pod with a random mix of node selector and required node
affinity, tolerations, requests, host ports, the claim, required pod affinity and anti-affinity
(hostname, zone and rack keys; namespaces, namespace selectors, matchLabelKeys, mismatchLabelKeys) and
DoNotSchedule topology spread (maxSkew, minDomains, nodeAffinityPolicy, nodeTaintsPolicy, matchLabelKeys).

Every case is a function of (seed, index) alone, so a failing one is rebuilt from those two numbers.

Many cases share one control plane; what keeps them apart:
- every name, every label value and the rack topology key carry the case's prefix, so no node of one
  case shares a topology domain with another's, and no selector of one case matches another's pods;
- the new pod's nodeSelector pins it to its case's nodes (CASE_LABEL). Its spread constraints with
  nodeAffinityPolicy Honor count only those nodes, as a cluster of the case's own would; with Ignore
  they count every node with the key: the zone key then sees other cases' zones, as any cluster's
  other zones, while the rack key stays the case's own;
- a pod affinity term whose namespace scope reaches past the case's namespaces (an empty or a generic
  namespace selector) always selects by a label value of the case, since the "first pod of a group"
  rule looks for matching pods in the whole cluster.
The new pod has no nodeName: a pod created with one never meets the scheduler (the NodeName filter is
tested on paper, against the independent checker).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from .cluster import E2E_LABEL, node_manifest

Obj = dict[str, Any]

CASE_LABEL = "e2e.makeroom.io/case"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
GROUP = "constraints"
EXTENDED = "example.com/widget"
NEW_POD = "new"


def rack_key(case: str) -> str:
    """A topology key that only this case's nodes have."""
    return f"{case}.e2e.makeroom.io/rack"


@dataclass
class Case:
    seed: int
    index: int
    name: str  # the prefix of every name and label value of the case
    namespaces: list[Obj] = field(default_factory=list)
    nodes: list[Obj] = field(default_factory=list)
    volumes: list[Obj] = field(default_factory=list)
    claims: list[Obj] = field(default_factory=list)
    existing: list[Obj] = field(default_factory=list)
    pod: Obj = field(default_factory=dict)

    @property
    def namespace(self) -> str:
        return self.name

    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]

    def objects(self) -> list[Obj]:
        """Everything but the new pod, in the order to create it."""
        return [*self.namespaces, *self.nodes, *self.volumes, *self.claims, *self.existing]

    def to_json(self) -> Obj:
        return {
            "seed": self.seed,
            "index": self.index,
            "name": self.name,
            "objects": self.objects(),
            "pod": self.pod,
        }


class _Gen:
    """Draws one case. All randomness comes from `rng`."""

    def __init__(self, rng: random.Random, case: Case) -> None:
        self.rng = rng
        self.case = case
        self.c = case.name
        self.zones = [f"{self.c}-z{k}" for k in range(rng.choice((2, 2, 3)))]
        self.apps = [f"{self.c}-web", f"{self.c}-api", f"{self.c}-db"]
        self.vers = [f"{self.c}-v1", f"{self.c}-v2"]
        self.teams = [f"{self.c}-red", f"{self.c}-blue"]
        self.other_ns = f"{self.c}-o"
        self.topology_keys = [HOSTNAME, ZONE, rack_key(self.c)]

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # ------------------------------------------------------------------------------------ cluster
    def build(self) -> None:
        self.namespaces()
        self.nodes()
        self.volume()
        for i in range(self.rng.randint(0, 7)):
            self.case.existing.append(self.existing_pod(i))
        self.case.pod = self.new_pod()

    def namespaces(self) -> None:
        for name, team in ((self.c, self.teams[0]), (self.other_ns, self.rng.choice(self.teams))):
            self.case.namespaces.append(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {
                        "name": name,
                        # The API server adds the name label to every namespace.
                        "labels": {E2E_LABEL: "true", "team": team, "kubernetes.io/metadata.name": name},
                    },
                }
            )

    def nodes(self) -> None:
        rng = self.rng
        j = 0
        for z, zone in enumerate(self.zones):
            for _ in range(rng.choice((1, 1, 2))):
                name = f"{self.c}-n{j}"
                j += 1
                labels = {CASE_LABEL: self.c, "tier": str(rng.randint(1, 5))}
                if not (z == len(self.zones) - 1 and self.chance(0.1)):
                    labels[ZONE] = zone  # now and then a node without a zone
                if self.chance(0.9):
                    labels[rack_key(self.c)] = f"{self.c}-r{rng.randint(0, 2)}"
                if self.chance(0.5):
                    labels["disk"] = rng.choice(("ssd", "hdd"))
                capacity = {
                    "cpu": str(rng.choice((1, 2, 4, 4, 8))),
                    "memory": f"{rng.choice((2, 4, 8, 8))}Gi",
                    "pods": str(rng.choice((110, 110, 110, 110, 2, 3))),
                }
                if self.chance(0.3):
                    capacity[EXTENDED] = str(rng.randint(1, 2))
                taints = []
                if self.chance(0.2):
                    taints.append(
                        {"key": "dedicated", "value": rng.choice(("a", "b")), "effect": "NoSchedule"}
                    )
                if self.chance(0.1):
                    taints.append({"key": "spot", "value": "true", "effect": "NoExecute"})
                if self.chance(0.15):
                    taints.append({"key": "maint", "value": "soon", "effect": "PreferNoSchedule"})
                node = node_manifest(
                    name, group=GROUP, capacity=capacity, labels=labels, taints=taints, annotations={}
                )
                if self.chance(0.05):
                    node["spec"]["unschedulable"] = True
                # As a running cluster shows it (KWOK reports it on the control plane).
                node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
                self.case.nodes.append(node)

    def volume(self) -> None:
        if not self.chance(0.3):
            return
        rng = self.rng
        zones = rng.sample(self.zones, rng.choice((1, 1, 2)))
        pv_name = f"{self.c}-pv"
        labels: dict[str, str] = {E2E_LABEL: "true"}
        if self.chance(0.3):
            labels[ZONE] = "__".join(zones)  # VolumeZone reads this
        spec: Obj = {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "hostPath": {"path": f"/tmp/{pv_name}"},
            "claimRef": {"namespace": self.c, "name": "data"},
        }
        if self.chance(0.85):
            if self.chance(0.8):
                expr = {"key": ZONE, "operator": "In", "values": zones}
            else:
                expr = {"key": HOSTNAME, "operator": "In", "values": [rng.choice(self.case.node_names())]}
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}
        self.case.volumes.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": pv_name, "labels": labels},
                "spec": spec,
            }
        )
        self.case.claims.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "namespace": self.c},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                    "storageClassName": "",
                    "volumeName": pv_name,
                },
                # What the PV controller makes of the pre-bound pair (the API ignores it on create).
                "status": {"phase": "Bound"},
            }
        )

    # ------------------------------------------------------------------------------------ pods
    def labels(self) -> dict[str, str]:
        out = {}
        if self.chance(0.85):
            out["app"] = self.rng.choice(self.apps)
        if self.chance(0.6):
            out["ver"] = self.rng.choice(self.vers)
        return out

    def resources(self, heavy: bool) -> Obj:
        rng = self.rng
        requests: dict[str, str] = {}
        if self.chance(0.8):
            requests["cpu"] = f"{rng.choice((100, 250, 500, 1000, 1500 if heavy else 700))}m"
        if self.chance(0.6):
            requests["memory"] = f"{rng.choice((256, 512, 1024, 3072))}Mi"
        if self.chance(0.1):
            requests[EXTENDED] = "1"
        out: Obj = {}
        if requests:
            # Now and then only limits: the API server makes them the requests.
            out["limits" if self.chance(0.15) else "requests"] = requests
        if EXTENDED in requests:
            out.setdefault("limits", {})[EXTENDED] = requests[EXTENDED]  # an extended resource needs both
        return out

    def ports(self) -> list[Obj]:
        if not self.chance(0.3):
            return []
        rng = self.rng
        port: Obj = {"containerPort": rng.choice((8080, 9090)), "hostPort": rng.choice((8080, 9090))}
        if self.chance(0.3):
            port["protocol"] = "UDP"
        if self.chance(0.3):
            port["hostIP"] = rng.choice(("127.0.0.1", "10.0.0.1"))
        return [port]

    def selector(self, for_leaky_affinity: bool = False) -> Obj:
        """A label selector over the case's pod labels (case values, so it never matches another
        case's pods unless an operator admits a missing key)."""
        rng = self.rng
        kind = rng.choice(("labels", "in", "notin", "exists", "mixed"))
        if for_leaky_affinity and kind in ("notin", "exists"):
            kind = "in"
        if kind == "labels":
            return {"matchLabels": {"app": rng.choice(self.apps)}}
        if kind == "in":
            return {
                "matchExpressions": [{"key": "app", "operator": "In", "values": rng.sample(self.apps, 2)}]
            }
        if kind == "notin":
            return {
                "matchExpressions": [{"key": "app", "operator": "NotIn", "values": [rng.choice(self.apps)]}]
            }
        if kind == "exists":
            return {
                "matchExpressions": [
                    {"key": rng.choice(("app", "ver")), "operator": rng.choice(("Exists", "DoesNotExist"))}
                ]
            }
        return {
            "matchLabels": {"app": rng.choice(self.apps)},
            "matchExpressions": [
                {"key": "ver", "operator": rng.choice(("In", "NotIn")), "values": [rng.choice(self.vers)]}
            ],
        }

    def affinity_term(self, kind: str, labels: dict[str, str]) -> Obj:
        rng = self.rng
        term: Obj = {"topologyKey": rng.choice(self.topology_keys)}
        scope = rng.choice(("own", "own", "own", "names", "team", "all", "generic"))
        leaky = scope in ("all", "generic")
        if scope == "names":
            term["namespaces"] = rng.choice(([self.other_ns], [self.c, self.other_ns]))
        elif scope == "team":
            term["namespaceSelector"] = {"matchLabels": {"team": rng.choice(self.teams)}}
        elif scope == "all":
            term["namespaceSelector"] = {}
        elif scope == "generic":
            term["namespaceSelector"] = {"matchExpressions": [{"key": "team", "operator": "Exists"}]}
        selector = self.selector(for_leaky_affinity=leaky and kind == "podAffinity")
        term["labelSelector"] = selector
        used = set(selector.get("matchLabels") or {}) | {
            e["key"] for e in selector.get("matchExpressions") or ()
        }
        free = [k for k in ("app", "ver") if k not in used]
        if free and self.chance(0.3):
            key = rng.choice(free)
            term["mismatchLabelKeys" if self.chance(0.4) else "matchLabelKeys"] = [key]
        return term

    def affinity(self, labels: dict[str, str], p_aff: float, p_anti: float) -> Obj:
        out: Obj = {}
        for kind, p in (("podAffinity", p_aff), ("podAntiAffinity", p_anti)):
            if self.chance(p):
                terms = [self.affinity_term(kind, labels) for _ in range(self.rng.choice((1, 1, 2)))]
                out[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": terms}
        return out

    def existing_pod(self, i: int) -> Obj:
        rng = self.rng
        labels = self.labels()
        spec: Obj = {
            "nodeName": rng.choice(self.case.node_names()),
            "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": self.resources(False)}
            ],
            # Bound by nodeName, past every filter: it must also outlive NoExecute taints.
            "tolerations": [{"operator": "Exists"}],
            "terminationGracePeriodSeconds": 0,
        }
        ports = self.ports()
        if ports:
            spec["containers"][0]["ports"] = ports
        affinity = self.affinity(labels, 0.0, 0.3)
        if affinity:
            spec["affinity"] = affinity
        namespace = self.c if self.chance(0.75) else self.other_ns
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": namespace, "labels": labels},
            "spec": spec,
        }

    def node_affinity(self) -> Obj | None:
        rng = self.rng
        if not self.chance(0.25):
            return None
        terms = []
        for _ in range(rng.choice((1, 1, 2))):
            exprs = []
            for _ in range(rng.choice((1, 1, 2))):
                what = rng.choice(("zone-in", "zone-notin", "tier", "disk"))
                if what == "zone-in":
                    exprs.append({"key": ZONE, "operator": "In", "values": rng.sample(self.zones, 1)})
                elif what == "zone-notin":
                    exprs.append({"key": ZONE, "operator": "NotIn", "values": rng.sample(self.zones, 1)})
                elif what == "tier":
                    exprs.append(
                        {
                            "key": "tier",
                            "operator": rng.choice(("Gt", "Lt")),
                            "values": [str(rng.randint(1, 5))],
                        }
                    )
                else:
                    exprs.append({"key": "disk", "operator": rng.choice(("Exists", "DoesNotExist"))})
            terms.append({"matchExpressions": exprs})
        return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}

    def tolerations(self) -> list[Obj]:
        rng = self.rng
        out: list[Obj] = []
        if self.chance(0.6):
            out.append(
                {
                    "key": "dedicated",
                    "operator": "Equal",
                    "value": rng.choice(("a", "b")),
                    "effect": "NoSchedule",
                }
            )
        if self.chance(0.2):
            out.append({"key": "dedicated", "operator": "Exists"})
        if self.chance(0.4):
            out.append({"key": "spot", "operator": "Exists", "effect": "NoExecute"})
        if self.chance(0.15):
            out.append(
                {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
            )
        return out

    def spread(self, labels: dict[str, str]) -> list[Obj]:
        rng = self.rng
        out: list[Obj] = []
        for key in rng.sample(self.topology_keys, rng.choice((0, 1, 1, 1, 2))):
            c: Obj = {
                "maxSkew": rng.choice((1, 1, 2)),
                "topologyKey": key,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": self.selector(),
            }
            if self.chance(0.35):
                c["minDomains"] = rng.randint(1, 4)
            if self.chance(0.4):
                c["nodeAffinityPolicy"] = rng.choice(("Honor", "Ignore"))
            if self.chance(0.4):
                c["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
            sel = c["labelSelector"]
            used = set(sel.get("matchLabels") or {}) | {e["key"] for e in sel.get("matchExpressions") or ()}
            free = [k for k in ("app", "ver") if k not in used]
            if free and self.chance(0.3):
                c["matchLabelKeys"] = [rng.choice(free)]
            out.append(c)
        if self.chance(0.2):  # ScheduleAnyway: scoring only, never a reason to refuse a node
            out.append(
                {
                    "maxSkew": 1,
                    "topologyKey": rng.choice(
                        [k for k in self.topology_keys if all(k != o["topologyKey"] for o in out)]
                    ),
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": self.selector(),
                }
            )
        return out

    def new_pod(self) -> Obj:
        labels = self.labels()
        container: Obj = {
            "name": "c",
            "image": "registry.k8s.io/pause:3.10",
            "resources": self.resources(True),
        }
        ports = self.ports()
        if ports:
            container["ports"] = ports
        selector = {CASE_LABEL: self.c}
        if self.chance(0.1):
            selector["disk"] = self.rng.choice(("ssd", "hdd"))
        spec: Obj = {
            "containers": [container],
            "nodeSelector": selector,
            "terminationGracePeriodSeconds": 0,
        }
        tolerations = self.tolerations()
        if tolerations:
            spec["tolerations"] = tolerations
        affinity = self.affinity(labels, 0.3, 0.35)
        node_affinity = self.node_affinity()
        if node_affinity:
            affinity["nodeAffinity"] = node_affinity
        if affinity:
            spec["affinity"] = affinity
        spread = self.spread(labels)
        if spread:
            spec["topologySpreadConstraints"] = spread
        if self.case.claims and self.chance(0.8):
            spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": NEW_POD, "namespace": self.c, "labels": labels},
            "spec": spec,
        }


def case(seed: int, index: int, prefix: str = "dc") -> Case:
    """Case `index` of the run with `seed`; `prefix` only names things (a run's own, so that a namespace
    still terminating from an earlier run is never in the way)."""
    rng = random.Random(seed * 1_000_003 + index)
    c = Case(seed, index, f"{prefix}-{index}")
    _Gen(rng, c).build()
    return c


def cases(seed: int, count: int, prefix: str = "dc") -> list[Case]:
    return [case(seed, i, prefix) for i in range(count)]
