"""ClusterState and model objects straight from a few arguments: groups first, then nodes, then pods
(for the model, planner and controller tests)."""

from __future__ import annotations

from collections.abc import Mapping

from makeroom.model import (
    Node,
    NodeGroup,
    OwnerKind,
    Pod,
    PodSpec,
    Resources,
    Taint,
    Toleration,
)
from makeroom.model.state import ClusterState

CPU_NODE = {"cpu": "4", "memory": "16Gi", "pods": "110"}
GPU_NODE = {"cpu": "4", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "1"}
GPU_TAINT = Taint("nvidia.com/gpu", "present")
GPU_TOLERATION = Toleration("nvidia.com/gpu", "Exists")


class StateBuilder:
    """A ClusterState under construction: groups first, then nodes, then pods."""

    def __init__(self, groups: list[NodeGroup]) -> None:
        self.state = ClusterState(groups, (), {"nvidia.com/gpu"})
        self.numbers: dict[str, int] = {}
        self.seq = 0

    @staticmethod
    def group(
        name: str,
        capacity: Mapping[str, str],
        max: int = 1,
        price: float = 0.0,
        taints: tuple[Taint, ...] = (),
    ) -> NodeGroup:
        return NodeGroup(name, Resources.parse(capacity), {}, taints, 0, max, price)

    def node(
        self, group: str, ready: bool = True, name: str | None = None, labels: Mapping[str, str] | None = None
    ) -> str:
        g = self.state.groups[group]
        n = self.numbers.get(group, 0)
        self.numbers[group] = n + 1
        node_labels = {**g.node_labels(), **(labels or {})}
        node = Node(name or f"{group}-{n}", group, g.capacity, node_labels, g.taints, ready=ready)
        self.state.add_node(node)
        return node.name

    def pod(
        self,
        workload: str,
        requests: Mapping[str, str],
        priority: int = 0,
        node: str | None = None,
        *,
        owner: OwnerKind = OwnerKind.REPLICA_SET,
        selector: Mapping[str, str] | None = None,
        tolerations: tuple[Toleration, ...] = (),
        annotations: Mapping[str, str] | None = None,
        local_storage: bool = False,
        spec: PodSpec | None = None,
        namespace: str = "default",
        priority_class: str = "",
        labels: Mapping[str, str] | None = None,
    ) -> Pod:
        if spec is None:
            spec = PodSpec(
                Resources.parse(requests),
                priority,
                node_selector=tuple(sorted((selector or {}).items())),
                tolerations=tolerations,
                local_storage=local_storage,
                priority_class=priority_class,
            )
        key = workload if namespace == "default" else f"{namespace}/{workload}"  # as snapshot keys them
        n = sum(1 for p in self.state.pods.values() if p.workload == key)
        self.seq += 1
        pod = Pod(
            f"{workload}-{n}",
            spec,
            key,
            owner_kind=owner,
            node=node,
            seq=self.seq,
            created_at=float(self.seq),
            annotations=dict(annotations or {}),
            namespace=namespace,
            labels=dict(labels or {}),
        )
        self.state.add_pod(pod)
        return pod

    def fill(
        self,
        workload: str,
        requests: Mapping[str, str],
        priority: int,
        node: str,
        count: int,
        namespace: str = "default",
    ) -> list[Pod]:
        spec = PodSpec(Resources.parse(requests), priority)
        return [
            self.pod(workload, requests, priority, node, spec=spec, namespace=namespace) for _ in range(count)
        ]
