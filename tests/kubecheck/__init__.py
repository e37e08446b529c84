"""kube-scheduler's Filter plugins, written again from the Kubernetes rules over raw API objects.

An oracle for makeroom's own fit rules: it reads the objects as the API server returns them (plain
dicts), imports nothing of makeroom, and follows the plugins of kube-scheduler 1.36 one function each
(NodeName, NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, VolumeBinding
and VolumeZone for bound claims, PodTopologySpread's DoNotSchedule constraints, InterPodAffinity's
required terms), with the scheduler's two passes for pods nominated to a node. Not modelled: dynamic
provisioning (an unbound claim fails everywhere, as an immediate one does), ReadWriteOncePod, CSI
attach limits, DRA claims, pod-level resources, the alpha comparison operators of tolerations.

    cluster = Cluster.of(objects)            # Nodes, Pods, Namespaces, PVCs, PVs (any order)
    verdicts = feasible_nodes(cluster, pod)  # node name -> None (fits) or why not ("Plugin: reason")
"""

from tests.kubecheck.check import feasible_nodes
from tests.kubecheck.cluster import Cluster

__all__ = ["Cluster", "feasible_nodes"]
