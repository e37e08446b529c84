"""The pure model: resources, node groups, nodes, pods, workloads, budgets and the fit rules."""

from makeroom.model.fit import FitFailure, label_fit, resource_fit, static_fit
from makeroom.model.objects import (
    DELETION_COST,
    DO_NOT_MOVE,
    GROUP_LABEL,
    SCALE_UP_DELAY,
    VICTIM_OF,
    DisruptionBudget,
    Node,
    NodeGroup,
    NodeSelectorRequirement,
    OwnerKind,
    Pod,
    PodSpec,
    PreemptionPolicy,
    Taint,
    TaintEffect,
    Toleration,
    Workload,
)
from makeroom.model.quantity import QuantityError, format_quantity, parse_duration, parse_quantity
from makeroom.model.resources import ResourceIndex, Resources

__all__ = [
    "DELETION_COST",
    "DO_NOT_MOVE",
    "GROUP_LABEL",
    "SCALE_UP_DELAY",
    "VICTIM_OF",
    "DisruptionBudget",
    "FitFailure",
    "Node",
    "NodeGroup",
    "NodeSelectorRequirement",
    "OwnerKind",
    "Pod",
    "PodSpec",
    "PreemptionPolicy",
    "QuantityError",
    "ResourceIndex",
    "Resources",
    "Taint",
    "TaintEffect",
    "Toleration",
    "Workload",
    "format_quantity",
    "label_fit",
    "parse_duration",
    "parse_quantity",
    "resource_fit",
    "static_fit",
]
