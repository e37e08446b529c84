"""model.scheduling's filters, rule by rule, against kube-scheduler's plugins (tables over tiny builders)."""

from __future__ import annotations

import numpy as np
import pytest

from makeroom.model import (
    HOSTNAME_LABEL,
    ZONE_LABEL,
    FitFailure,
    HostPort,
    InclusionPolicy,
    LabelSelector,
    NodeSelectorRequirement,
    PodAffinityTerm,
    PodSpec,
    Resources,
    TopologySpreadConstraint,
    UnsatisfiableAction,
    VolumeConstraint,
)
from makeroom.model.scheduling import Placement, filter_nodes, pod_mask
from makeroom.model.scheduling.score import spread_score
from tests.builders.state import CPU_NODE, StateBuilder

WEB = LabelSelector((("app", "web"),))
CPU = Resources.parse({"cpu": "100m"})


def cluster(zones: str = "aabb") -> StateBuilder:
    """Nodes n0.. in the zones given, one letter per node."""
    b = StateBuilder([StateBuilder.group("g", CPU_NODE, 9)])
    for i, z in enumerate(zones):
        b.node("g", name=f"n{i}", labels={ZONE_LABEL: z})
    return b


def verdicts(
    b: StateBuilder, spec: PodSpec, labels: dict[str, str] | None = None
) -> dict[str, FitFailure | None]:
    pod = b.pod("new", {}, spec=spec, labels={"app": "web"} if labels is None else labels)
    return filter_nodes(b.state, pod)


def place(
    b: StateBuilder, node: str, spec: PodSpec | None = None, labels: dict[str, str] | None = None
) -> None:
    b.pod(
        "old", {}, node=node, spec=spec or PodSpec(CPU), labels={"app": "web"} if labels is None else labels
    )


def test_every_node_carries_its_hostname() -> None:
    b = cluster("ab")
    assert all(n.labels[HOSTNAME_LABEL] == name for name, n in b.state.nodes.items())


@pytest.mark.parametrize(
    ("key", "expect"),
    [
        (HOSTNAME_LABEL, {"n0": FitFailure.POD_ANTI_AFFINITY, "n1": None, "n2": None, "n3": None}),
        (
            ZONE_LABEL,
            {"n0": FitFailure.POD_ANTI_AFFINITY, "n1": FitFailure.POD_ANTI_AFFINITY, "n2": None, "n3": None},
        ),
    ],
)
def test_required_anti_affinity_by_topology_key(key: str, expect: dict[str, FitFailure | None]) -> None:
    b = cluster()
    place(b, "n0")
    assert verdicts(b, PodSpec(CPU, pod_anti_affinity=(PodAffinityTerm(key, WEB),))) == expect


def test_existing_pods_anti_affinity_keeps_the_incoming_pod_away() -> None:
    b = cluster()
    place(b, "n2", PodSpec(CPU, pod_anti_affinity=(PodAffinityTerm(ZONE_LABEL, WEB),)), labels={"app": "db"})
    got = verdicts(b, PodSpec(CPU))
    assert got == {
        "n0": None,
        "n1": None,
        "n2": FitFailure.EXISTING_ANTI_AFFINITY,
        "n3": FitFailure.EXISTING_ANTI_AFFINITY,
    }


def test_anti_affinity_only_looks_in_its_namespace_unless_told() -> None:
    b = cluster()
    b.pod("old", {}, node="n0", spec=PodSpec(CPU), labels={"app": "web"}, namespace="other")
    own = PodSpec(CPU, pod_anti_affinity=(PodAffinityTerm(HOSTNAME_LABEL, WEB),))
    assert verdicts(b, own)["n0"] is None
    every = PodSpec(
        CPU, pod_anti_affinity=(PodAffinityTerm(HOSTNAME_LABEL, WEB, namespace_selector=LabelSelector()),)
    )
    assert verdicts(b, every)["n0"] is FitFailure.POD_ANTI_AFFINITY


def test_affinity_needs_a_matching_pod_in_the_domain() -> None:
    b = cluster()
    place(b, "n1", labels={"app": "cache"})
    spec = PodSpec(CPU, pod_affinity=(PodAffinityTerm(ZONE_LABEL, LabelSelector((("app", "cache"),))),))
    got = verdicts(b, spec)
    assert got == {"n0": None, "n1": None, "n2": FitFailure.POD_AFFINITY, "n3": FitFailure.POD_AFFINITY}


def test_first_pod_of_a_self_affine_group_may_go_anywhere() -> None:
    b = cluster()
    spec = PodSpec(CPU, pod_affinity=(PodAffinityTerm(ZONE_LABEL, WEB),))
    assert set(verdicts(b, spec).values()) == {None}
    # ... but not when it does not match its own terms
    assert set(verdicts(b, spec, labels={"app": "db"}).values()) == {FitFailure.POD_AFFINITY}


def spread(max_skew: int = 1, min_domains: int | None = None) -> PodSpec:
    c = TopologySpreadConstraint(max_skew, ZONE_LABEL, label_selector=WEB, min_domains=min_domains)
    return PodSpec(CPU, topology_spread=(c,))


def test_spread_max_skew() -> None:
    b = cluster()
    place(b, "n0")
    got = verdicts(b, spread())
    assert got == {"n0": FitFailure.SPREAD, "n1": FitFailure.SPREAD, "n2": None, "n3": None}
    assert set(verdicts(b, spread(2)).values()) == {None}


def test_spread_min_domains_counts_missing_domains_as_zero() -> None:
    b = cluster("aa")
    place(b, "n0")
    assert set(verdicts(b, spread()).values()) == {None}  # one domain, so its count is the minimum
    place(b, "n1")
    assert set(verdicts(b, spread(min_domains=2)).values()) == {FitFailure.SPREAD}


def test_spread_node_without_the_key_fails_with_missing_label() -> None:
    b = cluster("a")
    b.node("g", name="bare")
    assert verdicts(b, spread())["bare"] is FitFailure.SPREAD_LABEL


def test_spread_node_affinity_policy_honor_skips_nodes_the_pod_cannot_use() -> None:
    b = cluster("ab")
    place(b, "n0")
    only_a = ((NodeSelectorRequirement(ZONE_LABEL, "In", ("a",)),),)
    honor = PodSpec(CPU, required_affinity=only_a, topology_spread=spread().topology_spread)
    assert verdicts(b, honor)["n0"] is None  # zone b is not eligible: a is the only domain
    ignore = PodSpec(
        CPU,
        required_affinity=only_a,
        topology_spread=(
            TopologySpreadConstraint(
                1, ZONE_LABEL, label_selector=WEB, node_affinity_policy=InclusionPolicy.IGNORE
            ),
        ),
    )
    assert verdicts(b, ignore)["n0"] is FitFailure.SPREAD


@pytest.mark.parametrize(
    ("held", "wanted", "conflict"),
    [
        (HostPort(80), HostPort(80), True),
        (HostPort(80), HostPort(81), False),
        (HostPort(80, "UDP"), HostPort(80), False),
        (HostPort(80, host_ip="10.0.0.1"), HostPort(80, host_ip="10.0.0.2"), False),
        (HostPort(80, host_ip="10.0.0.1"), HostPort(80), True),  # 0.0.0.0 is every address
    ],
)
def test_host_ports(held: HostPort, wanted: HostPort, conflict: bool) -> None:
    b = cluster("a")
    place(b, "n0", PodSpec(CPU, host_ports=(held,)))
    got = verdicts(b, PodSpec(CPU, host_ports=(wanted,)))["n0"]
    assert got is (FitFailure.HOST_PORTS if conflict else None)


def test_volume_zone_and_node_affinity() -> None:
    b = cluster("ab")
    zoned = PodSpec(CPU, volumes=(VolumeConstraint("pv", zone_labels=((ZONE_LABEL, "b__c"),)),))
    assert verdicts(b, zoned) == {"n0": FitFailure.VOLUME_ZONE, "n1": None}
    pinned = PodSpec(
        CPU, volumes=(VolumeConstraint("pv", ((NodeSelectorRequirement(HOSTNAME_LABEL, "In", ("n0",)),),)),)
    )
    assert verdicts(b, pinned) == {"n0": None, "n1": FitFailure.VOLUME_NODE_AFFINITY}


def test_node_name() -> None:
    b = cluster("ab")
    assert verdicts(b, PodSpec(CPU, node_name="n1")) == {"n0": FitFailure.NODE_NAME, "n1": None}


def test_a_placement_with_moves_and_a_virtual_node() -> None:
    b = cluster("ab")
    mover = b.pod("old", {}, node="n0", spec=PodSpec(CPU), labels={"app": "web"})
    pod = b.pod(
        "new",
        {},
        spec=PodSpec(CPU, pod_anti_affinity=(PodAffinityTerm(HOSTNAME_LABEL, WEB),)),
        labels={"app": "web"},
    )
    where = Placement(
        b.state, {mover.key: "fresh"}, {"fresh": ({ZONE_LABEL: "a", HOSTNAME_LABEL: "fresh"}, ())}
    )
    mask = pod_mask(where, pod)
    assert mask is not None and list(mask[[0, 1, where.slot("fresh")]]) == [True, True, False]


def test_pods_without_constraints_cost_nothing() -> None:
    b = cluster()
    place(b, "n0")
    pod = b.pod("new", {}, spec=PodSpec(CPU), labels={"app": "web"})
    assert pod_mask(Placement(b.state), pod) is None


def test_spread_score_system_defaults_prefer_the_emptier_zone_then_node() -> None:
    b = cluster("aab")
    place(b, "n0")
    pod = b.pod("new", {}, spec=PodSpec(CPU), labels={"app": "web"})
    counts = np.array([1, 0, 0] + [0] * (len(b.state.alive) - 3), dtype=np.int64)
    scores = spread_score(Placement(b.state), pod, b.state.alive.copy(), counts)
    assert scores[2] > scores[1] > scores[0]  # zone b is empty; n1 shares zone a with the replica


def test_spread_score_own_schedule_anyway_constraint_and_missing_key() -> None:
    b = cluster("ab")
    b.node("g", name="bare")
    place(b, "n0")
    c = TopologySpreadConstraint(1, ZONE_LABEL, UnsatisfiableAction.SCHEDULE_ANYWAY, WEB)
    pod = b.pod("new", {}, spec=PodSpec(CPU, topology_spread=(c,)), labels={"app": "web"})
    scores = spread_score(Placement(b.state), pod, b.state.alive.copy(), None)
    slot = b.state.slot_of
    assert scores[slot["n1"]] > scores[slot["n0"]]
    assert scores[slot["bare"]] == 0  # a node without the key is not scored
