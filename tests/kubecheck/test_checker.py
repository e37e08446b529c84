"""The independent checker against the Kubernetes rules, one rule (and its edge) per case: what the
kube-scheduler plugin does, read from its source, and what the Kubernetes docs promise."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kubecheck import Cluster, feasible_nodes
from tests.kubecheck.builders import HOST, ZONE, affinity, namespace, node, pod, spread, term

Obj = dict[str, Any]
APP_WEB = {"matchLabels": {"app": "web"}}


def fits(objects: list[Obj], incoming: Obj) -> set[str]:
    return {n for n, why in feasible_nodes(Cluster.of(objects), incoming).items() if why is None}


# ---------------------------------------------------------------------------------- node-local
def test_resources_zero_request_passes_an_overcommitted_node() -> None:
    busy = node("a", alloc={"cpu": "1", "memory": "1Gi", "pods": "110"})
    hog = pod("hog", on="a", requests={"cpu": "2"})
    assert fits([busy, hog], pod(requests={"memory": "100Mi"})) == {"a"}
    assert fits([busy, hog], pod(requests={"cpu": "1m"})) == set()


def test_resources_pod_slots_counted_even_without_requests() -> None:
    small = node("a", alloc={"cpu": "4", "memory": "1Gi", "pods": "1"})
    assert fits([small], pod()) == {"a"}
    assert fits([small, pod("x", on="a")], pod()) == set()


def test_resources_limits_are_the_requests_and_sidecars_add_to_the_largest_init() -> None:
    a = node("a", alloc={"cpu": "1", "memory": "8Gi", "pods": "110"})
    only_limits = pod()
    only_limits["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1500m"}}
    assert fits([a], only_limits) == set()
    # main 300m + sidecar 300m = 600m; the plain init container needs 500m + the sidecar before it.
    sidecar: Obj = {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "300m"}}}
    plain: Obj = {"name": "i", "resources": {"requests": {"cpu": "500m"}}}
    p = pod(requests={"cpu": "300m"}, initContainers=[sidecar, plain])
    assert fits([a, pod("x", on="a", requests={"cpu": "200m"})], p) == {"a"}  # 800m + 200m = 1
    assert fits([a, pod("x", on="a", requests={"cpu": "201m"})], p) == set()


def test_resources_extended_missing_from_allocatable() -> None:
    assert fits([node("a")], pod(requests={"example.com/w": "1"})) == set()
    wide = node("b", alloc={"cpu": "1", "memory": "1Gi", "pods": "9", "example.com/w": "1"})
    assert fits([wide], pod(requests={"example.com/w": "1"})) == {"b"}


@pytest.mark.parametrize(
    ("used", "wanted", "conflict"),
    [
        ({"hostPort": 80}, {"hostPort": 80}, True),
        ({"hostPort": 80}, {"hostPort": 80, "protocol": "UDP"}, False),
        ({"hostPort": 80, "hostIP": "10.0.0.1"}, {"hostPort": 80, "hostIP": "10.0.0.2"}, False),
        ({"hostPort": 80, "hostIP": "10.0.0.1"}, {"hostPort": 80}, True),  # 0.0.0.0 takes every IP
        ({"hostPort": 80}, {"hostPort": 80, "hostIP": "10.0.0.2"}, True),
        ({"hostPort": 80}, {"hostPort": 81}, False),
    ],
)
def test_host_ports(used: Obj, wanted: Obj, conflict: bool) -> None:
    there = pod("x", on="a")
    there["spec"]["containers"][0]["ports"] = [{"containerPort": 1, **used}]
    incoming = pod()
    incoming["spec"]["containers"][0]["ports"] = [{"containerPort": 1, **wanted}]
    assert fits([node("a"), there], incoming) == (set() if conflict else {"a"})


def test_host_ports_of_a_sidecar_count_and_of_a_plain_init_container_do_not() -> None:
    for restart, conflict in (("Always", True), (None, False)):
        init: Obj = {"name": "i", "ports": [{"containerPort": 1, "hostPort": 80}]}
        if restart:
            init["restartPolicy"] = restart
        there = pod("x", on="a", initContainers=[init])
        incoming = pod()
        incoming["spec"]["containers"][0]["ports"] = [{"containerPort": 1, "hostPort": 80}]
        assert fits([node("a"), there], incoming) == (set() if conflict else {"a"})


@pytest.mark.parametrize(
    ("taint", "toleration", "ok"),
    [
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, None, False),
        ({"key": "k", "value": "v", "effect": "PreferNoSchedule"}, None, True),
        ({"key": "k", "value": "v", "effect": "NoExecute"}, {"key": "k", "operator": "Exists"}, True),
        (
            {"key": "k", "value": "v", "effect": "NoExecute"},
            {"key": "k", "value": "v", "effect": "NoSchedule"},
            False,
        ),
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, {"key": "k", "value": "w"}, False),
        ({"key": "k", "value": "v", "effect": "NoSchedule"}, {"operator": "Exists"}, True),
    ],
)
def test_taints(taint: Obj, toleration: Obj | None, ok: bool) -> None:
    incoming = pod(tolerations=[toleration] if toleration else [])
    assert fits([node("a", taints=[taint])], incoming) == ({"a"} if ok else set())


def test_cordoned_node_takes_only_a_pod_tolerating_the_unschedulable_taint() -> None:
    cordoned = node("a", unschedulable=True)
    assert fits([cordoned], pod()) == set()
    tol = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    assert fits([cordoned], pod(tolerations=[tol])) == {"a"}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ({"key": "tier", "operator": "Gt", "values": ["2"]}, {"b"}),
        ({"key": "tier", "operator": "Lt", "values": ["3"]}, {"a"}),
        ({"key": "disk", "operator": "NotIn", "values": ["ssd"]}, {"b", "c"}),  # a missing key is not in
        ({"key": "disk", "operator": "DoesNotExist"}, {"b", "c"}),
        ({"key": "tier", "operator": "In", "values": ["2", "x"]}, {"a", "c"}),
    ],
)
def test_node_affinity_operators(expr: Obj, expected: set[str]) -> None:
    nodes = [
        node("a", labels={"tier": "2", "disk": "ssd"}),
        node("b", labels={"tier": "3"}),
        node("c", labels={"tier": "x"}),  # Gt and Lt never match a label that is no integer
    ]
    aff = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expr]}]
            }
        }
    }
    assert fits(nodes, pod(affinity=aff)) == expected


def test_node_affinity_terms_are_ored_an_empty_term_selects_nothing_and_fields_see_the_name() -> None:
    nodes = [node("a", labels={"disk": "ssd"}), node("b")]
    terms = [{}, {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    assert fits(nodes, pod(affinity=aff)) == {"b"}
    assert fits(nodes, pod(affinity=aff, nodeSelector={"disk": "ssd"})) == set()  # ANDed with the selector


def test_node_name() -> None:
    assert fits([node("a"), node("b")], pod(nodeName="b")) == {"b"}


# ---------------------------------------------------------------------------------- volumes
def _volume(pv_labels: dict[str, str], node_affinity: list[Obj] | None, phase: str = "Bound") -> list[Obj]:
    pv: Obj = {"kind": "PersistentVolume", "metadata": {"name": "pv", "labels": pv_labels}, "spec": {}}
    if node_affinity is not None:
        pv["spec"]["nodeAffinity"] = {
            "required": {"nodeSelectorTerms": [{"matchExpressions": node_affinity}]}
        }
    pvc = {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {"volumeName": "pv"},
        "status": {"phase": phase},
    }
    return [pv, pvc]


WITH_CLAIM: dict[str, Any] = {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}


def test_volume_node_affinity_and_zone_labels() -> None:
    nodes = [node("a", "z1"), node("b", "z2"), node("c", "z3")]
    in_z1 = [{"key": ZONE, "operator": "In", "values": ["z1"]}]
    assert fits([*nodes, *_volume({}, in_z1)], pod(**WITH_CLAIM)) == {"a"}
    assert fits([*nodes, *_volume({ZONE: "z2__z3"}, None)], pod(**WITH_CLAIM)) == {"b", "c"}
    # A node with no zone or region label passes VolumeZone; a malformed PV label is ignored.
    assert fits([*nodes, node("d"), *_volume({ZONE: "z1"}, None)], pod(**WITH_CLAIM)) == {"a", "d"}
    assert fits([*nodes, *_volume({ZONE: "z1__"}, None)], pod(**WITH_CLAIM)) == {"a", "b", "c"}


def test_unbound_or_missing_claim_fits_nowhere() -> None:
    nodes = [node("a", "z1")]
    assert fits([*nodes, *_volume({}, None, phase="Pending")], pod(**WITH_CLAIM)) == set()
    assert fits(nodes, pod(**WITH_CLAIM)) == set()


# ---------------------------------------------------------------------------------- inter-pod
def test_anti_affinity_hostname_and_zone() -> None:
    nodes = [node("a", "z1"), node("b", "z1"), node("c", "z2")]
    web = pod("w", on="a", labels={"app": "web"})
    on_host = pod(affinity=affinity("podAntiAffinity", term(HOST, APP_WEB)))
    on_zone = pod(affinity=affinity("podAntiAffinity", term(ZONE, APP_WEB)))
    assert fits([*nodes, web], on_host) == {"b", "c"}
    assert fits([*nodes, web], on_zone) == {"c"}


def test_existing_pods_anti_affinity_repels_the_incoming_pod() -> None:
    nodes = [node("a", "z1"), node("b", "z1"), node("c", "z2")]
    guard = pod("g", on="a", affinity=affinity("podAntiAffinity", term(ZONE, APP_WEB)))
    assert fits([*nodes, guard], pod(labels={"app": "web"})) == {"c"}
    assert fits([*nodes, guard], pod(labels={"app": "db"})) == {"a", "b", "c"}
    # Its term's namespaces are its own: a web pod elsewhere is not repelled.
    assert fits([*nodes, guard], pod(ns="other", labels={"app": "web"})) == {"a", "b", "c"}


def test_affinity_needs_a_matching_pod_in_the_domain_and_the_key_on_the_node() -> None:
    nodes = [node("a", "z1"), node("b", "z1"), node("c", "z2"), node("d")]
    web = pod("w", on="a", labels={"app": "web"})
    incoming = pod(affinity=affinity("podAffinity", term(ZONE, APP_WEB)))
    assert fits([*nodes, web], incoming) == {"a", "b"}


def test_first_pod_of_a_self_affine_group_goes_anywhere_with_the_key() -> None:
    nodes = [node("a", "z1"), node("b", "z2"), node("c")]
    self_affine = pod(labels={"app": "web"}, affinity=affinity("podAffinity", term(ZONE, APP_WEB)))
    assert fits(nodes, self_affine) == {"a", "b"}
    # Not if it does not match its own term; and not once a matching pod sits in some zone...
    other = pod(labels={"app": "db"}, affinity=affinity("podAffinity", term(ZONE, APP_WEB)))
    assert fits(nodes, other) == set()
    assert fits([*nodes, pod("w", on="b", labels={"app": "web"})], self_affine) == {"b"}
    # ...but a matching pod on a node without the key counts for nothing.
    assert fits([*nodes, pod("w", on="c", labels={"app": "web"})], self_affine) == {"a", "b"}


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ({}, {"b"}),  # own namespace only: the web pod in `ops` does not count
        ({"namespaces": ["ops"]}, {"a"}),
        ({"namespaceSelector": {"matchLabels": {"team": "ops"}}}, {"a"}),
        ({"namespaceSelector": {}}, set()),  # every namespace
        ({"namespaces": ["default"], "namespaceSelector": {"matchLabels": {"team": "x"}}}, {"b"}),
    ],
)
def test_anti_affinity_namespace_scope(scope: Obj, expected: set[str]) -> None:
    objs = [
        namespace("default"),
        namespace("ops", team="ops"),
        node("a", "z1"),
        node("b", "z2"),
        pod("w1", on="b", ns="ops", labels={"app": "web"}),
        pod("w2", on="a", labels={"app": "web"}),
    ]
    incoming = pod(affinity=affinity("podAntiAffinity", term(ZONE, APP_WEB, **scope)))
    assert fits(objs, incoming) == expected


def test_match_and_mismatch_label_keys() -> None:
    nodes = [node("a", "z1"), node("b", "z2")]
    v1 = pod("x", on="a", labels={"app": "web", "ver": "1"})
    v2 = pod("y", on="b", labels={"app": "web", "ver": "2"})
    same = term(ZONE, {"matchLabels": {"app": "web"}}, matchLabelKeys=["ver"])
    assert fits([*nodes, v1, v2], pod(labels={"ver": "1"}, affinity=affinity("podAntiAffinity", same))) == {
        "b"
    }
    other = term(ZONE, {"matchLabels": {"app": "web"}}, mismatchLabelKeys=["ver"])
    assert fits([*nodes, v1, v2], pod(labels={"ver": "1"}, affinity=affinity("podAntiAffinity", other))) == {
        "a"
    }


# ---------------------------------------------------------------------------------- spread
def _zones(*counts: int, ns: str = "default") -> list[Obj]:
    objs = []
    for z, n in enumerate(counts):
        objs.append(node(f"n{z}", f"z{z}"))
        objs += [pod(f"w{z}-{i}", on=f"n{z}", ns=ns, labels={"app": "web"}) for i in range(n)]
    return objs


def test_spread_max_skew() -> None:
    incoming = pod(labels={"app": "web"}, topologySpreadConstraints=[spread(ZONE, APP_WEB)])
    assert fits(_zones(1, 0, 1), incoming) == {"n1"}
    assert fits(_zones(1, 1, 1), incoming) == {"n0", "n1", "n2"}
    # A pod that does not match its own selector adds nothing to its domain.
    outsider = pod(labels={"app": "db"}, topologySpreadConstraints=[spread(ZONE, APP_WEB)])
    assert fits(_zones(2, 1), outsider) == {"n0", "n1"}
    # Pods of other namespaces do not count.
    assert fits(_zones(1, 0, 1, ns="other"), incoming) == {"n0", "n1", "n2"}


def test_spread_min_domains_makes_the_minimum_zero() -> None:
    two = _zones(1, 1)
    assert fits(two, pod(labels={"app": "web"}, topologySpreadConstraints=[spread(ZONE, APP_WEB)])) == {
        "n0",
        "n1",
    }
    needs3 = pod(labels={"app": "web"}, topologySpreadConstraints=[spread(ZONE, APP_WEB, minDomains=3)])
    assert fits(two, needs3) == set()


def test_spread_node_without_the_key_fails_and_is_not_a_domain() -> None:
    objs = [*_zones(1, 0), node("bare"), pod("x", on="bare", labels={"app": "web"})]
    incoming = pod(labels={"app": "web"}, topologySpreadConstraints=[spread(ZONE, APP_WEB)])
    assert fits(objs, incoming) == {"n1"}


def test_spread_node_inclusion_policies() -> None:
    # z1 holds one web pod; z0 is empty but this pod's node selector excludes it.
    objs = [
        node("n0", "z0", labels={"pool": "other"}),
        node("n1", "z1", labels={"pool": "mine"}),
        node(
            "n2", "z2", labels={"pool": "mine"}, taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]
        ),
        pod("w", on="n1", labels={"app": "web"}),
        pod("v", on="n2", labels={"app": "web"}),
    ]
    honor = pod(
        labels={"app": "web"},
        nodeSelector={"pool": "mine"},
        topologySpreadConstraints=[spread(ZONE, APP_WEB)],
    )
    tolerating = [{"operator": "Exists"}]
    assert fits(objs, {**honor, "spec": {**honor["spec"], "tolerations": tolerating}}) == {"n1", "n2"}
    ignore = spread(ZONE, APP_WEB, nodeAffinityPolicy="Ignore")
    ignoring = pod(
        labels={"app": "web"},
        nodeSelector={"pool": "mine"},
        tolerations=tolerating,
        topologySpreadConstraints=[ignore],
    )
    assert fits(objs, ignoring) == set()  # z0 counts with 0 pods: 1 + 1 - 0 > 1
    # nodeTaintsPolicy Honor: the tainted z2 is no domain for a pod that does not tolerate it.
    taints_honor = spread(ZONE, APP_WEB, nodeTaintsPolicy="Honor")
    strict = pod(
        labels={"app": "web"}, nodeSelector={"pool": "mine"}, topologySpreadConstraints=[taints_honor]
    )
    assert fits(objs, strict) == {"n1"}  # z1 is its only domain: 1 + 1 - 1 <= 1
    # Ignored, the tainted z2 is a domain again: z1 with two pods is then too far ahead of it.
    crowded = [*objs, pod("u", on="n1", labels={"app": "web"})]
    assert fits(crowded, strict) == {"n1"}
    lenient = pod(
        labels={"app": "web"},
        nodeSelector={"pool": "mine"},
        topologySpreadConstraints=[spread(ZONE, APP_WEB)],
    )
    assert fits(crowded, lenient) == set()


def test_spread_skips_terminating_pods() -> None:
    objs = _zones(0, 0)
    leaving = pod("x", on="n0", labels={"app": "web"})
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    incoming = pod(labels={"app": "web"}, topologySpreadConstraints=[spread(ZONE, APP_WEB)])
    assert fits([*objs, leaving], incoming) == {"n0", "n1"}


# ---------------------------------------------------------------------------------- nominated
def test_nominated_pods_of_equal_or_higher_priority_hold_their_room() -> None:
    a = node("a", alloc={"cpu": "1", "memory": "1Gi", "pods": "110"})
    for priority, expected in ((10, set()), (5, set()), (1, {"a"})):
        waiting = pod("w", requests={"cpu": "600m"}, priority=priority)
        waiting["status"] = {"nominatedNodeName": "a"}
        assert fits([a, waiting], pod(requests={"cpu": "600m"}, priority=5)) == expected


def test_a_bound_pod_is_checked_as_if_scheduled_again() -> None:
    a = node("a", alloc={"cpu": "1", "memory": "1Gi", "pods": "110"})
    me = pod("me", on="a", requests={"cpu": "1"})
    assert fits([a, me], me) == {"a"}
