"""The new nodes of a plan as virtual nodes for the filters that look at other pods: each with its
group's labels, its zone (the group's nodes are zoned round-robin by number) and a hostname of its own."""

from __future__ import annotations

from makeroom.model.objects import HOSTNAME_LABEL
from makeroom.model.scheduling.placement import VirtualNode
from makeroom.planner.context import Context
from makeroom.planner.options import NewNode


def new_node_name(nn: NewNode) -> str:
    return f"new {nn.group} node #{nn.index}"


def virtual_nodes(ctx: Context, new_nodes: list[NewNode]) -> dict[str, VirtualNode]:
    """By name, in the order of ``new_nodes`` (position j is the j-th virtual slot)."""
    groups = ctx.view.state.groups
    out: dict[str, VirtualNode] = {}
    for nn in new_nodes:
        name = new_node_name(nn)
        g = groups[nn.group]
        number = ctx.view.group_size[nn.group] + nn.index  # nodes are numbered, and zoned, in order
        out[name] = ({**g.node_labels(number), HOSTNAME_LABEL: name}, g.taints)
    return out
