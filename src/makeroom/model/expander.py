"""The cluster-autoscaler's ``--expander``: how it picks, among the node groups whose new node would
help a pending pod, the one it grows. The names are the autoscaler's (``expander/expander.go``)."""

from __future__ import annotations

from enum import StrEnum

from makeroom.model.quantity import InvalidValueError


class Expander(StrEnum):
    LEAST_WASTE = "least-waste"
    """The group whose new node wastes the least of its CPU and memory (the autoscaler's default)."""
    PRIORITY = "priority"
    """Groups in a configured order (makeroom: the groups' order)."""
    PRICE = "price"
    """The cheapest group for what it places."""
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
