"""NodePorts, as kube-scheduler's plugin of that name decides it: a node cannot take a pod when a pod
on it already holds one of its host ports, same protocol and port, with the same host IP or either
one the wildcard 0.0.0.0."""

from __future__ import annotations

import numpy as np

from makeroom.model.fit import FitFailure
from makeroom.model.objects import HostPort, Pod
from makeroom.model.scheduling.placement import Placement
from makeroom.model.state import Mask

WILDCARD = "0.0.0.0"


def conflict(a: HostPort, b: HostPort) -> bool:
    if a.port != b.port or (a.protocol or "TCP") != (b.protocol or "TCP"):
        return False
    ip_a, ip_b = a.host_ip or WILDCARD, b.host_ip or WILDCARD
    return ip_a == ip_b or WILDCARD in (ip_a, ip_b)


def port_failures(placement: Placement, pod: Pod) -> list[tuple[FitFailure, Mask]]:
    wanted = pod.spec.host_ports
    if not wanted:
        return []
    bad = np.zeros(placement.size, dtype=np.bool_)
    for other, node in placement.with_ports():
        if any(conflict(a, b) for a in wanted for b in other.spec.host_ports):
            bad[placement.slot(node)] = True
    return [(FitFailure.HOST_PORTS, bad)]
