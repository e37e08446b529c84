"""InterPodAffinity's Filter: the incoming pod's required affinity and anti-affinity terms, and the
required anti-affinity terms of the pods already bound, counted per (topology key, value) over every
node of the cluster as the plugin's PreFilter does."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from tests.kubecheck.cluster import Cluster, pod_labels, pod_namespace, spec_of
from tests.kubecheck.selectors import Obj, label_selector_matches, node_labels, with_label_keys

Pair = tuple[str, str]


@dataclass(frozen=True)
class Term:
    """A required PodAffinityTerm as fwk.AffinityTerm holds it: no namespaces and no namespace selector
    mean the pod's own namespace; a missing namespace selector selects no namespace, an empty one all."""

    namespaces: frozenset[str]
    namespace_selector: Obj | None
    selector: Obj | None
    topology_key: str

    def matches(self, pod: Obj, namespace_labels: Mapping[str, str]) -> bool:
        in_scope = pod_namespace(pod) in self.namespaces or label_selector_matches(
            self.namespace_selector, namespace_labels
        )
        return in_scope and label_selector_matches(self.selector, pod_labels(pod))


def required_terms(pod: Obj, kind: str) -> list[Term]:
    """The pod's required terms of `kind` (podAffinity or podAntiAffinity), with matchLabelKeys and
    mismatchLabelKeys folded into the selector as the API server does."""
    block = (spec_of(pod).get("affinity") or {}).get(kind) or {}
    labels = pod_labels(pod)
    out = []
    for t in block.get("requiredDuringSchedulingIgnoredDuringExecution") or ():
        names = frozenset(t.get("namespaces") or ())
        ns_selector = t.get("namespaceSelector")
        if not names and ns_selector is None:
            names = frozenset({pod_namespace(pod)})
        selector = with_label_keys(t.get("labelSelector"), labels, t.get("matchLabelKeys") or (), "In")
        selector = with_label_keys(selector, labels, t.get("mismatchLabelKeys") or (), "NotIn")
        out.append(Term(names, ns_selector, selector, t["topologyKey"]))
    return out


def _matches_all(terms: list[Term], pod: Obj, cluster: Cluster) -> bool:
    ns_labels = cluster.namespace_labels(pod_namespace(pod))
    return bool(terms) and all(t.matches(pod, ns_labels) for t in terms)


@dataclass
class InterPodAffinity:
    """The PreFilter state for one incoming pod."""

    affinity: list[Term]
    anti_affinity: list[Term]
    affinity_counts: Counter[Pair]
    anti_affinity_counts: Counter[Pair]
    existing_anti_affinity_counts: Counter[Pair]
    self_match: bool

    @classmethod
    def prefilter(cls, pod: Obj, cluster: Cluster) -> InterPodAffinity:
        affinity = required_terms(pod, "podAffinity")
        anti = required_terms(pod, "podAntiAffinity")
        own_ns_labels = cluster.namespace_labels(pod_namespace(pod))
        aff_counts: Counter[Pair] = Counter()
        anti_counts: Counter[Pair] = Counter()
        existing: Counter[Pair] = Counter()
        for node, other in cluster.all_pods():
            labels = node_labels(node)
            # The bound pod's own anti-affinity: does it repel the incoming pod?
            for t in required_terms(other, "podAntiAffinity"):
                if t.matches(pod, own_ns_labels) and t.topology_key in labels:
                    existing[(t.topology_key, labels[t.topology_key])] += 1
            if affinity and _matches_all(affinity, other, cluster):
                for t in affinity:
                    if t.topology_key in labels:
                        aff_counts[(t.topology_key, labels[t.topology_key])] += 1
            other_ns_labels = cluster.namespace_labels(pod_namespace(other))
            for t in anti:
                if t.matches(other, other_ns_labels) and t.topology_key in labels:
                    anti_counts[(t.topology_key, labels[t.topology_key])] += 1
        return cls(affinity, anti, aff_counts, anti_counts, existing, _matches_all(affinity, pod, cluster))

    def filter(self, node: Obj) -> str | None:
        labels = node_labels(node)
        if not self._affinity_holds(labels):
            return "InterPodAffinity: node(s) didn't match pod affinity rules"
        if self.anti_affinity_counts:
            for t in self.anti_affinity:
                value = labels.get(t.topology_key)
                if value is not None and self.anti_affinity_counts[(t.topology_key, value)] > 0:
                    return "InterPodAffinity: node(s) didn't match pod anti-affinity rules"
        if any(self.existing_anti_affinity_counts[pair] > 0 for pair in labels.items()):
            return "InterPodAffinity: node(s) didn't satisfy existing pods anti-affinity rules"
        return None

    def _affinity_holds(self, labels: Mapping[str, str]) -> bool:
        pods_exist = True
        for t in self.affinity:
            value = labels.get(t.topology_key)
            if value is None:
                return False  # every term's topology key must be on the node
            if self.affinity_counts[(t.topology_key, value)] <= 0:
                pods_exist = False
        # The first pod of a group with affinity to itself: allowed where no pod matches at all.
        return pods_exist or (not self.affinity_counts and self.self_match)
