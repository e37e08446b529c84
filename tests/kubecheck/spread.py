"""PodTopologySpread's Filter for the DoNotSchedule constraints: a node passes when, for each
constraint, the matching pods of its domain plus the pod itself exceed the smallest domain by at most
maxSkew. Domains are the values of the topology key over the nodes that have every constraint's key
and pass the constraint's node inclusion policies (nodeAffinityPolicy: Honor by default counts only
nodes the pod's node selector and required affinity allow; nodeTaintsPolicy: Ignore by default);
fewer domains than minDomains make the smallest count 0. Only pods of the pod's namespace that are not
being deleted are counted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tests.kubecheck.cluster import Cluster, pod_labels, pod_namespace, spec_of
from tests.kubecheck.selectors import (
    Obj,
    label_selector_matches,
    node_labels,
    required_node_affinity_matches,
    untolerated_taint,
    with_label_keys,
)


@dataclass(frozen=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: Obj | None
    min_domains: int
    honor_affinity: bool
    honor_taints: bool

    def includes(self, pod: Obj, node: Obj) -> bool:
        if self.honor_affinity and not required_node_affinity_matches(pod, node):
            return False
        taints = spec_of(node).get("taints") or ()
        tolerations = spec_of(pod).get("tolerations") or ()
        return not (self.honor_taints and untolerated_taint(taints, tolerations) is not None)


def constraints(pod: Obj) -> list[Constraint]:
    labels = pod_labels(pod)
    out = []
    for c in spec_of(pod).get("topologySpreadConstraints") or ():
        if c.get("whenUnsatisfiable") != "DoNotSchedule":
            continue
        selector = with_label_keys(c.get("labelSelector"), labels, c.get("matchLabelKeys") or (), "In")
        out.append(
            Constraint(
                int(c["maxSkew"]),
                c["topologyKey"],
                selector,
                int(c.get("minDomains") or 1),
                (c.get("nodeAffinityPolicy") or "Honor") == "Honor",
                (c.get("nodeTaintsPolicy") or "Ignore") == "Honor",
            )
        )
    return out


@dataclass
class PodTopologySpread:
    constraints: list[Constraint]
    counts: list[dict[str, int]]  # per constraint: domain value -> matching pods
    self_match: list[bool]

    @classmethod
    def prefilter(cls, pod: Obj, cluster: Cluster) -> PodTopologySpread:
        cs = constraints(pod)
        counts: list[dict[str, int]] = [{} for _ in cs]
        ns = pod_namespace(pod)
        for name, node in cluster.nodes.items():
            labels = node_labels(node)
            if not all(c.topology_key in labels for c in cs):
                continue
            here = [
                p
                for p in cluster.pods_on.get(name, ())
                if pod_namespace(p) == ns and not (p.get("metadata") or {}).get("deletionTimestamp")
            ]
            for i, c in enumerate(cs):
                if not c.includes(pod, node):
                    continue
                value = labels[c.topology_key]
                n = sum(1 for p in here if label_selector_matches(c.selector, pod_labels(p)))
                counts[i][value] = counts[i].get(value, 0) + n
        own = pod_labels(pod)
        return cls(cs, counts, [label_selector_matches(c.selector, own) for c in cs])

    def filter(self, node: Obj) -> str | None:
        labels: Mapping[str, str] = node_labels(node)
        for c, counts, me in zip(self.constraints, self.counts, self.self_match, strict=True):
            value = labels.get(c.topology_key)
            if value is None:
                return f"PodTopologySpread: node(s) didn't have the label {c.topology_key}"
            smallest = min(counts.values()) if counts else 2**31 - 1
            if len(counts) < c.min_domains:
                smallest = 0
            if counts.get(value, 0) + int(me) - smallest > c.max_skew:
                return "PodTopologySpread: node(s) didn't match pod topology spread constraints"
        return None
