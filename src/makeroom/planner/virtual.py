"""The new nodes of a plan as virtual nodes for the filters that look at other pods: each with its
group's labels, its zone (the group's nodes are zoned round-robin by number) and a hostname of its own."""

from __future__ import annotations

from makeroom.model.objects import HOSTNAME_LABEL
from makeroom.model.scheduling.placement import Placement, VirtualNode
from makeroom.planner.context import Context
from makeroom.planner.options import Decision, NewNode


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


def decided(ctx: Context, decisions: list[Decision], new_nodes: list[NewNode]) -> Placement:
    """The cluster once the decisions so far are carried out: their pending pods on their nodes, their
    victims at their destinations (``new_nodes``: the plan's new nodes so far)."""
    view = ctx.view
    virtual = virtual_nodes(ctx, new_nodes)
    names = list(virtual)
    moved: dict[str, str | None] = {}
    for d in decisions:
        if d.reason is None:
            continue
        for victim, dest in zip(d.victims, d.dests, strict=True):
            if dest.slot >= 0:
                moved[victim.key] = view.name(dest.slot)
            elif 0 <= dest.new_node < len(names):
                moved[victim.key] = names[dest.new_node]
        if d.slot >= 0:
            moved[d.pod.key] = view.name(d.slot)
        elif 0 <= d.new_node < len(names):
            moved[d.pod.key] = names[d.new_node]
    return Placement(view.state, moved, virtual)
