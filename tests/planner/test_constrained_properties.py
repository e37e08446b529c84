"""Property (issue 19): on small generated clusters over two zones, where an API workload keeps one
replica per node (required anti-affinity on hostname) and spreads over the zones (maxSkew 1,
DoNotSchedule), every plan of every search, carried out move by move as the controller does (under
evict: each moved replica gone, then its replacement placed), never puts a replica where the rules say
it cannot go. The rules are checked here from their Kubernetes definition, with counts of pods per node
and zone, not with the model's filters."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from makeroom.model import (
    HOSTNAME_LABEL,
    ZONE_LABEL,
    LabelSelector,
    PodAffinityTerm,
    PodSpec,
    Resources,
    TopologySpreadConstraint,
)
from makeroom.planner import Plan, Policy, plan
from tests.builders.state import CPU_NODE, StateBuilder

API = LabelSelector((("app", "api"),))
API_SPEC = PodSpec(
    Resources.parse({"cpu": "1", "memory": "1Gi"}),
    100,
    pod_anti_affinity=(PodAffinityTerm(HOSTNAME_LABEL, API),),
    topology_spread=(TopologySpreadConstraint(1, ZONE_LABEL, label_selector=API),),
)


@dataclass(frozen=True)
class Case:
    zones: tuple[str, ...]  # per node
    api_on: tuple[int, ...]  # nodes holding an API replica (distinct)
    filler: tuple[int, ...]  # per node, 1-CPU filler pods of priority 500 (API replicas move first)
    pending_cpu: int  # the pending pod's CPU (whole), priority 1000


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """Every node holds something, so the pending pod (a whole node's CPU) needs room made: moving
    one API replica is the cheapest way, and where it may go is what the rules decide."""
    n = draw(st.integers(3, 6))
    zones = tuple(draw(st.lists(st.sampled_from("ab"), min_size=n, max_size=n)))
    on = draw(st.lists(st.integers(0, n - 1), unique=True, min_size=1, max_size=n))
    filler = tuple(draw(st.integers(0 if i in on else 1, 2)) for i in range(n))
    return Case(zones, tuple(on), filler, 4)


def build(case: Case) -> StateBuilder | None:
    b = StateBuilder([StateBuilder.group("cpu", CPU_NODE, len(case.zones))])
    for i, z in enumerate(case.zones):
        b.node("cpu", name=f"n{i}", labels={ZONE_LABEL: z})
    counts = {z: 0 for z in set(case.zones)}
    for i in case.api_on:
        counts[case.zones[i]] += 1
    if max(counts.values()) - min(counts.values()) > 1:
        return None  # kube-scheduler would not have placed them so
    for i in case.api_on:
        b.pod("api", {}, node=f"n{i}", spec=API_SPEC, labels={"app": "api"})
    for i, k in enumerate(case.filler):
        for _ in range(k):
            b.pod("filler", {"cpu": "1", "memory": "1Gi"}, 500, f"n{i}", labels={"app": "filler"})
    b.pod("big", {"cpu": str(case.pending_cpu), "memory": "1Gi"}, 1000, labels={"app": "big"})
    return b


def violations(b: StateBuilder, result: Plan) -> list[str]:
    """Replay the moves in order and check each API replacement by the Kubernetes rules."""
    where = {p.key: p.node for p in b.state.pods.values() if p.node is not None}
    zone = {name: node.labels[ZONE_LABEL] for name, node in b.state.nodes.items()}
    new = 0
    out = []
    for move in result.moves:
        where.pop(move.pod.key)
        if move.to_node is None:  # a new node: its own hostname, its zone unknown to this checker
            new += 1
            where[move.pod.key] = f"new-{new}"
            continue
        to = move.to_node
        api = [k for k, n in where.items() if b.state.pods[k].labels.get("app") == "api"]
        if move.pod.labels.get("app") != "api":
            where[move.pod.key] = to
            continue
        if any(where[k] == to for k in api):
            out.append(f"{move.pod.name} to {to}: another replica is there")
        per_zone = {z: 0 for z in set(zone.values())}
        for k in api:
            if where[k] in zone:
                per_zone[zone[where[k]]] += 1
        if per_zone[zone[to]] + 1 - min(per_zone.values()) > 1:
            out.append(f"{move.pod.name} to {to}: zone skew over 1")
        where[move.pod.key] = to
    return out


POLICIES = {"default": Policy(), "per-pod": Policy(joint=False)}


@settings(max_examples=150, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
@pytest.mark.parametrize("policy", list(POLICIES))
def test_every_move_keeps_the_replicas_apart_and_spread(policy: str, case: Case) -> None:
    b = build(case)
    if b is None:
        return
    result = plan(b.state, POLICIES[policy])
    assert violations(b, result) == []


def test_pending_replicas_that_fit_now_are_placed_apart() -> None:
    b = StateBuilder([StateBuilder.group("cpu", CPU_NODE, 2)])
    for i in range(2):
        b.node("cpu", name=f"n{i}", labels={ZONE_LABEL: "ab"[i]})
    for _ in range(2):
        b.pod("api", {}, spec=API_SPEC, labels={"app": "api"})
    result = plan(b.state, Policy())
    assert sorted(p.node or "" for p in result.placements) == ["n0", "n1"]
    assert result.unplaceable == ()
