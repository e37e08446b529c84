"""Run the Filter plugins for one pod over every node, as the scheduler's findNodesThatPassFilters does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tests.kubecheck.cluster import Cluster, pod_key, spec_of
from tests.kubecheck.interpod import InterPodAffinity
from tests.kubecheck.node_filters import (
    bound_volumes,
    node_affinity,
    node_name_filter,
    node_ports,
    node_resources_fit,
    node_unschedulable,
    taint_toleration,
    volume_binding,
    volume_zone,
)
from tests.kubecheck.selectors import Obj
from tests.kubecheck.spread import PodTopologySpread


@dataclass
class _PreFiltered:
    cluster: Cluster
    spread: PodTopologySpread
    interpod: InterPodAffinity

    @classmethod
    def of(cls, pod: Obj, cluster: Cluster) -> _PreFiltered:
        return cls(
            cluster, PodTopologySpread.prefilter(pod, cluster), InterPodAffinity.prefilter(pod, cluster)
        )


def node_filters(
    pod: Obj, node: Obj, pods_here: Sequence[Obj], volumes: Sequence[Obj] = (), resources: bool = True
) -> str | None:
    """The Filter plugins that read the node and its own pods only, in the default profile's order
    (the pod's bound volumes given; NodeResourcesFit left out without `resources`); the first that
    fails says why."""
    return (
        node_unschedulable(pod, node)
        or node_name_filter(pod, node)
        or taint_toleration(pod, node)
        or node_affinity(pod, node)
        or node_ports(pod, pods_here)
        or (node_resources_fit(pod, node, pods_here) if resources else None)
        or volume_binding(volumes, node)
        or volume_zone(volumes, node)
    )


def _run_filters(
    pod: Obj, node: Obj, name: str, state: _PreFiltered, volumes: Sequence[Obj], resources: bool
) -> str | None:
    """Every Filter plugin of the default profile, in its order."""
    here = state.cluster.pods_on.get(name, [])
    return (
        node_filters(pod, node, here, volumes, resources)
        or state.spread.filter(node)
        or state.interpod.filter(node)
    )


def _priority(pod: Obj) -> int:
    return int(spec_of(pod).get("priority") or 0)


def feasible_nodes(cluster: Cluster, pod: Obj, *, resources: bool = True) -> dict[str, str | None]:
    """Every node of the cluster -> None when the pod may go there now, else the first failing
    plugin and its reason. The pod itself is taken out of the cluster first (a bound pod is checked as
    if it were scheduled again). Pods nominated to a node with at least the pod's priority count there:
    the node must pass with them and without them (the scheduler's two passes). Without `resources`,
    NodeResourcesFit is left out (a step of a plan after which more room is still to come)."""
    key = pod_key(pod)
    base = cluster.without(key)
    volumes, unschedulable = bound_volumes(pod, base)
    if unschedulable is not None:
        return dict.fromkeys(base.nodes, unschedulable)
    state = _PreFiltered.of(pod, base)
    out: dict[str, str | None] = {}
    for name, node in base.nodes.items():
        nominated = [p for p in base.nominated.get(name, ()) if _priority(p) >= _priority(pod)]
        why = None
        if nominated:
            with_them = _PreFiltered.of(pod, base.with_pods_on(name, nominated))
            why = _run_filters(pod, node, name, with_them, volumes, resources)
        out[name] = why or _run_filters(pod, node, name, state, volumes, resources)
    return out
