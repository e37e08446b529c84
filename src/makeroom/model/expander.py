"""The cluster-autoscaler's ``--expander``: how it picks, among the node groups whose new node would
help a pending pod, the one it grows. The names are the autoscaler's (``expander/expander.go``)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from enum import StrEnum

from makeroom.model.quantity import InvalidValueError
from makeroom.model.resources import CPU, GPU_RESOURCES, MEMORY


class Expander(StrEnum):
    LEAST_WASTE = "least-waste"
    """The group whose new node wastes the least of its CPU and memory (the autoscaler's default)."""
    PRIORITY = "priority"
    """Groups by their configured priority (the cluster-autoscaler-priority-expander ConfigMap; in a
    scenario, the groups' order), highest first."""
    PRICE = "price"
    """The group whose new nodes cost least for the pods they place, as the autoscaler's price
    expander scores them (``price_score``)."""
    RANDOM = "random"
    """Any group that helps."""
    MOST_PODS = "most-pods"
    LEAST_NODES = "least-nodes"
    GRPC = "grpc"


SIMULATED = (Expander.LEAST_WASTE, Expander.PRIORITY, Expander.PRICE, Expander.RANDOM)
"""The expanders the simulated autoscaler runs."""


def expander(value: object) -> Expander:
    """The expander that decides, from the autoscaler's flag: a chain such as ``priority,least-waste``
    is decided by its first (the others only break its ties)."""
    if isinstance(value, Expander):
        return value
    try:
        return Expander(value.split(",")[0].strip() if isinstance(value, str) else "")
    except ValueError:
        raise InvalidValueError(
            f"expected one of {', '.join(Expander)} (or a chain of them), got {value!r}"
        ) from None


# --- the price expander (cluster-autoscaler expander/price/price.go, preferred.go) ------------------
# Pods are priced as the autoscaler's reference pricing model (GCE's) prices them: per CPU, GiB of
# memory and GPU per hour. Nodes are priced by their group's price_per_hour.
POD_CPU_PER_HOUR = 0.033174
POD_MEMORY_PER_GIB_HOUR = 0.004446
POD_GPU_PER_HOUR = 0.35
STABILIZATION_CPU = 500  # milli-CPU of the pod that steadies the node/pod price ratio
STABILIZATION_MEMORY = 500 * 2**20 * 1000  # 500 MiB, in milli-units
GPU_UNFITNESS = 1000.0
"""The unfitness of a group whose nodes have GPUs: so large that the price expander never grows one
for pods that a GPU-less group takes too."""
_GIB = float(2**30 * 1000)


def pod_price(requests: Mapping[str, int]) -> float:
    """A pod's price per hour from its requests (milli-units), as the pricing model prices it."""
    gpus = sum(requests.get(name, 0) for name in GPU_RESOURCES) / 1000.0
    return (
        requests.get(CPU, 0) / 1000.0 * POD_CPU_PER_HOUR
        + requests.get(MEMORY, 0) / _GIB * POD_MEMORY_PER_GIB_HOUR
        + gpus * POD_GPU_PER_HOUR
    )


def preferred_cpu(cluster_nodes: int) -> float:
    """The CPUs of the node size the price expander prefers: doubled each time the cluster triples."""
    for most, cpus in ((2, 1.0), (6, 2.0), (20, 4.0), (60, 8.0), (200, 16.0)):
        if cluster_nodes <= most:
            return cpus
    return 32.0


def price_score(
    node_price: float,
    node_count: int,
    pods_price: float,
    node_cpu: float,
    node_has_gpu: bool,
    cluster_nodes: int,
) -> float:
    """The price expander's score of growing a group by ``node_count`` nodes (of ``node_cpu`` CPUs at
    ``node_price`` per hour) for pods priced ``pods_price``: the lowest wins, ties go to the next
    expander. Money well spent (node price over pod price, both steadied by a small pod), times how
    far the node is from the preferred size (less so the more nodes), or a GPU group's fixed
    unfitness."""
    steady = pod_price({CPU: STABILIZATION_CPU, MEMORY: STABILIZATION_MEMORY})
    ratio = (node_price * node_count + steady) / (pods_price + steady)
    if node_has_gpu:
        unfitness = GPU_UNFITNESS
    else:
        preferred = preferred_cpu(cluster_nodes)
        size = max(node_cpu, 1e-3)
        unfitness = max(preferred / size, size / preferred)
        unfitness = (unfitness - 1.0) * (1.0 - math.tanh((node_count - 1) / 15.0)) + 1.0
    return unfitness * ratio


# --- the priority expander (expander/priority/priority.go) -------------------------------------------
PRIORITY_CONFIGMAP = "cluster-autoscaler-priority-expander"


def group_priorities(rules: Mapping[int, Iterable[str]], groups: Iterable[str]) -> dict[str, int]:
    """Each group's priority under the priority expander's rules (priority -> regular expressions
    of group names): the highest priority with an expression found in the name (as Go's regexp
    finds it: anywhere). A group that none matches, or only below -1 (where the expander's search
    starts), is left out: the expander passes it over while another group matches."""
    compiled = [(prio, [re.compile(r) for r in exprs]) for prio, exprs in rules.items()]
    out: dict[str, int] = {}
    for g in groups:
        found = [prio for prio, exprs in compiled if any(r.search(g) for r in exprs)]
        if found and max(found) >= -1:
            out[g] = max(found)
    return out
