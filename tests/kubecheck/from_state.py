"""A ClusterState written out as the Kubernetes objects it stands for, so that the independent checker
can judge the planner's plans. Only field by field (names, labels, quantities, terms): no rule of
makeroom is used. Nodes still coming up are written as nodes, since a plan may count on them."""

from __future__ import annotations

from typing import Any

from makeroom.model import (
    LabelSelector,
    Node,
    NodeGroup,
    NodeSelectorRequirement,
    Pod,
    PodAffinityTerm,
    Resources,
    TopologySpreadConstraint,
)
from makeroom.model.objects import HOSTNAME_LABEL, NodeSelectorTerm
from makeroom.model.resources import PODS
from makeroom.model.state import ClusterState

Obj = dict[str, Any]


def _quantities(resources: Resources) -> dict[str, str]:
    return {name: f"{amount}m" for name, amount in resources.items()}


def _requirement(r: NodeSelectorRequirement) -> Obj:
    out: Obj = {"key": r.key, "operator": r.operator}
    if r.values:
        out["values"] = list(r.values)
    return out


def _terms(terms: tuple[NodeSelectorTerm, ...]) -> list[Obj]:
    return [{"matchExpressions": [_requirement(r) for r in term]} for term in terms]


def _selector(s: LabelSelector | None) -> Obj | None:
    if s is None:
        return None
    out: Obj = {}
    if s.match_labels:
        out["matchLabels"] = dict(s.match_labels)
    if s.match_expressions:
        out["matchExpressions"] = [_requirement(r) for r in s.match_expressions]
    return out


def _affinity_term(t: PodAffinityTerm) -> Obj:
    out: Obj = {"topologyKey": t.topology_key, "labelSelector": _selector(t.label_selector)}
    if t.namespaces:
        out["namespaces"] = list(t.namespaces)
    if t.namespace_selector is not None:
        out["namespaceSelector"] = _selector(t.namespace_selector)
    if t.match_label_keys:
        out["matchLabelKeys"] = list(t.match_label_keys)
    if t.mismatch_label_keys:
        out["mismatchLabelKeys"] = list(t.mismatch_label_keys)
    return out


def _spread(c: TopologySpreadConstraint) -> Obj:
    out: Obj = {
        "maxSkew": c.max_skew,
        "topologyKey": c.topology_key,
        "whenUnsatisfiable": c.when_unsatisfiable.value,
        "labelSelector": _selector(c.label_selector),
        "nodeAffinityPolicy": c.node_affinity_policy.value,
        "nodeTaintsPolicy": c.node_taints_policy.value,
    }
    if c.min_domains is not None:
        out["minDomains"] = c.min_domains
    if c.match_label_keys:
        out["matchLabelKeys"] = list(c.match_label_keys)
    return out


def claim_name(volume: str) -> str:
    return f"claim-{volume}"


def pod_object(pod: Pod, node: str | None) -> Obj:
    """The pod bound to `node` (None: pending, with its nomination if it has one)."""
    spec = pod.spec
    container: Obj = {
        "name": "c",
        "resources": {
            "requests": _quantities(Resources({k: v for k, v in spec.requests.items() if k != PODS}))
        },
    }
    if spec.host_ports:
        container["ports"] = [
            {"containerPort": h.port, "hostPort": h.port, "protocol": h.protocol, "hostIP": h.host_ip}
            for h in spec.host_ports
        ]
    s: Obj = {"containers": [container], "priority": spec.priority}
    if spec.node_selector:
        s["nodeSelector"] = dict(spec.node_selector)
    if spec.tolerations:
        s["tolerations"] = [
            {"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect}
            for t in spec.tolerations
        ]
    affinity: Obj = {}
    if spec.required_affinity:
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": _terms(spec.required_affinity)
            }
        }
    for kind, terms in (("podAffinity", spec.pod_affinity), ("podAntiAffinity", spec.pod_anti_affinity)):
        if terms:
            affinity[kind] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [_affinity_term(t) for t in terms]
            }
    if affinity:
        s["affinity"] = affinity
    if spec.topology_spread:
        s["topologySpreadConstraints"] = [_spread(c) for c in spec.topology_spread]
    if spec.volumes:
        s["volumes"] = [
            {"name": v.name, "persistentVolumeClaim": {"claimName": claim_name(v.name)}} for v in spec.volumes
        ]
    if spec.node_name:
        s["nodeName"] = spec.node_name
    if node is not None:
        s["nodeName"] = node
    status: Obj = {}
    if node is None and pod.nominated_node:
        status["nominatedNodeName"] = pod.nominated_node
    meta: Obj = {"name": pod.name, "namespace": pod.namespace, "labels": dict(pod.labels)}
    if pod.terminating:
        meta["deletionTimestamp"] = "1970-01-01T00:00:00Z"
    return {"kind": "Pod", "metadata": meta, "spec": s, "status": status}


def node_object(
    name: str,
    labels: dict[str, str],
    taints: tuple[Any, ...],
    allocatable: Resources,
    unschedulable: bool = False,
) -> Obj:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME_LABEL: name, **labels}},
        "spec": {
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect.value} for t in taints],
            "unschedulable": unschedulable,
        },
        "status": {"allocatable": _quantities(allocatable)},
    }


def of_node(node: Node) -> Obj:
    return node_object(node.name, dict(node.labels), node.taints, node.allocatable, node.unschedulable)


def new_node_name(group: str, index: int) -> str:
    return f"new-{group}-{index}"


def of_new_node(group: NodeGroup, index: int) -> Obj:
    """A node the plan buys, as its group's template describes it."""
    return node_object(new_node_name(group.name, index), group.node_labels(), group.taints, group.capacity)


def objects_of(state: ClusterState) -> list[Obj]:
    """Namespaces, nodes, every pod (bound or pending), and a claim bound to a volume for each volume
    constraint a pod spec carries."""
    out: list[Obj] = [
        {"kind": "Namespace", "metadata": {"name": ns, "labels": state.namespace_labels(ns)}}
        for ns in {*state.namespaces, *(p.namespace for p in state.pods.values())}
    ]
    out += [of_node(n) for n in state.nodes.values()]
    out += [pod_object(p, p.node) for p in state.pods.values()]
    seen: set[tuple[str, str]] = set()
    for p in state.pods.values():
        for v in p.spec.volumes:
            if (p.namespace, v.name) in seen:
                continue
            seen.add((p.namespace, v.name))
            out.append(
                {
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": claim_name(v.name), "namespace": p.namespace},
                    "spec": {"volumeName": v.name},
                    "status": {"phase": "Bound"},
                }
            )
            pv: Obj = {
                "kind": "PersistentVolume",
                "metadata": {"name": v.name, "labels": dict(v.zone_labels)},
                "spec": {},
            }
            if v.node_affinity:
                pv["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": _terms(v.node_affinity)}}
            out.append(pv)
    return out
