"""Kubernetes objects (plain dicts) to the model's ClusterState. Pure: no I/O, no client.

Used by ``makeroom plan`` on a ``kubectl get nodes,pods,poddisruptionbudgets -A -o yaml`` dump, and by
the real-cluster adapter on its watch cache.
"""

from makeroom.snapshot.groups import (
    GROUP_LABELS,
    STATUS_CONFIGMAP,
    GroupConfig,
    GroupSpec,
    group_of,
    parse_autoscaler_status,
    parse_group_config,
)
from makeroom.snapshot.objects import (
    UNGROUPED,
    on_unknown_node,
    pod_from_object,
    selector_matches,
    state_from_objects,
    storage_from_objects,
)
from makeroom.snapshot.placement import Storage


def is_kube_dump(data: object) -> bool:
    """A dump of Kubernetes objects (``kind: List`` with ``items``, or one object), not a scenario."""
    if not isinstance(data, dict) or "version" in data:
        return False
    return "items" in data or ("kind" in data and "apiVersion" in data)


__all__ = [
    "GROUP_LABELS",
    "STATUS_CONFIGMAP",
    "UNGROUPED",
    "GroupConfig",
    "GroupSpec",
    "Storage",
    "group_of",
    "is_kube_dump",
    "on_unknown_node",
    "parse_autoscaler_status",
    "parse_group_config",
    "pod_from_object",
    "selector_matches",
    "state_from_objects",
    "storage_from_objects",
]
