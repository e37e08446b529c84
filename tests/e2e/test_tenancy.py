"""Multi-tenancy on the real control plane (issue 11): a tenant with the usual namespace-scoped rights
cannot steer makeroom, cannot move another namespace's pod or scale its Deployment, and cannot halt
makeroom; makeroom's own ServiceAccount is refused by the API server when it reaches beyond what it
needs; `makeroom cleanup` in the middle of a relocation and the uninstall leave nothing behind.

makeroom runs as a process impersonating the chart's ServiceAccount (no container runtime here), with
the chart's own arguments, RBAC and ValidatingAdmissionPolicy applied to the API server.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from makeroom_e2e import ControlPlane
from makeroom_e2e.makeroom_run import (
    Installed,
    Makeroom,
    installed_chart,
    leftovers,
    makeroom_command,
    prepared_seed,
    render_chart,
    run_args,
)
from makeroom_e2e.tenancy import impersonating, service_account_client, tenant
from tests.builders.http import scrape

pytestmark = pytest.mark.e2e
GROUP, VERSION = "makeroom.io", "v1alpha1"
GPU_POD = {"cpu": "3", "memory": "12Gi", "nvidia.com/gpu": "1"}


def status_of(call: Any) -> int:
    """The HTTP status a call gets (200 when it succeeds)."""
    from kubernetes import client

    try:
        call()
    except client.ApiException as exc:
        return int(exc.status)
    return 200


Calls = dict[str, Callable[[], Any]]


def once_the_policy_holds(
    core: Any, ns: str, refused: Calls, allowed: Calls
) -> tuple[dict[str, int], dict[str, int]]:
    """The status of each call, made once the admission policy holds (the API server syncs it a moment
    after it is created): probed with a change it refuses, on the pod ``pending`` of ``ns``."""
    deadline = time.monotonic() + 15

    def probe() -> int:  # never the same change twice
        label = {"metadata": {"labels": {"probe": uuid.uuid4().hex[:8]}}}
        return status_of(lambda: core.patch_namespaced_pod("pending", ns, label))

    while probe() == 200 and time.monotonic() < deadline:
        time.sleep(0.5)
    return (
        {what: status_of(call) for what, call in refused.items()},
        {what: status_of(call) for what, call in allowed.items()},
    )


def records(
    cp: ControlPlane,
    namespace: str,
    plurals: tuple[str, ...] = ("relocations", "consolidations", "cooldowns", "keepings", "headrooms"),
) -> list[str]:
    from kubernetes import client

    custom: Any = client.CustomObjectsApi(cp.api)
    out = []
    for plural in plurals:
        for obj in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)["items"]:
            out.append(f"{plural}/{obj['metadata']['name']}")
    return out


def relocation_body(namespace: str, pod: str, victim: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Relocation",
        "metadata": {"name": f"{namespace}.{pod}", "namespace": namespace},
        "spec": {
            "pod": f"{namespace}/{pod}",
            "strategy": "migrate",
            "node": "gpu-0",
            "startedAt": "2026-01-01T00:00:00Z",
            "deadline": "2099-01-01T00:00:00Z",
            "victims": [{"pod": victim, "workload": victim.rsplit("-", 2)[0], "node": "gpu-0"}],
            "surge": {
                victim.split("/", 1)[0] + "/iris-classifier": {"by": 500, "base": 10, "needReady": 510}
            },
        },
    }


def unschedulable(cp: ControlPlane, namespace: str, name: str) -> bool:
    """kube-scheduler tried the pod and found no node for it."""
    p = cp.core.read_namespaced_pod(name, namespace)
    return any(c.reason == "Unschedulable" for c in p.status.conditions or [])


def pod_body(name: str, requests: dict[str, str], **extra: Any) -> dict[str, Any]:
    limits = {k: v for k, v in requests.items() if "/" in k}
    spec = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": requests, "limits": limits}}]
    }
    spec.update(extra.pop("spec", {}))
    return {"metadata": {"name": name, **extra}, "spec": spec}


def quiet_seed(tmp_path: Path) -> tuple[Path, Path]:
    """seed-1 (preemption off) without its event: the test scales text-generator itself."""
    scenario, groups = prepared_seed(1, tmp_path)
    data = yaml.safe_load(scenario.read_text())
    data["events"] = []
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    return scenario, groups


# --- the chart ---------------------------------------------------------------------------------------------
def test_the_chart_grants_only_what_each_side_needs(tmp_path: Path) -> None:
    objects = render_chart("mr", "makeroom", {}, tmp_path)
    rules = {o["metadata"]["name"]: o["rules"] for o in objects if o["kind"] in ("ClusterRole", "Role")}
    granted = {
        (name, g, res, v)
        for name, rs in rules.items()
        for r in rs
        for g in r.get("apiGroups", [])
        for res in r.get("resources", [])
        for v in r["verbs"]
    }
    writes = {(n, g, r, v) for n, g, r, v in granted if v not in ("get", "list", "watch")}
    # Where a pod's volumes can be reached (issue 19): read, never written.
    for kind in ("persistentvolumeclaims", "persistentvolumes"):
        assert {("mr-makeroom-read", "", kind, v) for v in ("list", "watch")} <= granted
        assert not [w for w in writes if w[2] == kind]
    assert ("mr-makeroom-read", "", "nodes", "patch") in writes  # taints, narrowed by the admission policy
    assert not [w for w in writes if w[2] == "deployments"], "no patch of Deployments (their templates)"
    assert {w[2] for w in writes if w[0] == "mr-makeroom-move"} == {
        "pods",
        "pods/eviction",
        "deployments/scale",
        "events",
    }
    assert {w[2] for w in writes if w[0] == "mr-makeroom-room-for"} == {"pods", "pods/status", "events"}
    deletes = {(n, r) for n, _, r, v in granted if v in ("delete", "deletecollection")}
    assert deletes == {
        ("mr-makeroom", "relocations"),
        ("mr-makeroom", "consolidations"),
        ("mr-makeroom", "cooldowns"),
        ("mr-makeroom", "keepings"),
        ("mr-makeroom", "headrooms"),
        ("mr-makeroom", "leases"),
    }
    (lease_rule,) = [r for r in rules["mr-makeroom"] if "delete" in r["verbs"] and "leases" in r["resources"]]
    assert lease_rule["resourceNames"] == ["makeroom"]
    kinds = {o["kind"] for o in objects}
    assert {
        "CustomResourceDefinition",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    } <= kinds
    assert {"PodDisruptionBudget", "NetworkPolicy", "Job"} <= kinds
    (policy,) = [o for o in objects if o["kind"] == "NetworkPolicy"]
    assert policy["spec"]["ingress"] == []  # no peer may scrape until the admin names one
    (hook,) = [o for o in objects if o["kind"] == "Job"]
    assert hook["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
    assert hook["spec"]["template"]["spec"]["containers"][0]["args"][0] == "cleanup"

    scoped = render_chart("mr", "makeroom", {"controller": {"namespaces": ["team-a", "team-b"]}}, tmp_path)
    bindings = {
        (o["kind"], o["metadata"].get("namespace"), o["roleRef"]["name"]) for o in scoped if "roleRef" in o
    }
    assert ("ClusterRoleBinding", None, "mr-makeroom-move") not in bindings
    assert ("ClusterRoleBinding", None, "mr-makeroom-room-for") not in bindings
    for ns in ("team-a", "team-b"):
        assert ("RoleBinding", ns, "mr-makeroom-move") in bindings
        assert ("RoleBinding", ns, "mr-makeroom-room-for") in bindings
    (d,) = [o for o in scoped if o["kind"] == "Deployment"]
    args = d["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=team-a" in args and "--records-namespace=makeroom" in args
    single = render_chart("mr", "makeroom", {"replicaCount": 1}, tmp_path)
    assert "PodDisruptionBudget" not in {o["kind"] for o in single}  # it would block every drain
    with pytest.raises(subprocess.CalledProcessError) as refused:  # surges the policy would refuse
        render_chart("mr", "makeroom", {"controller": {"maxMoves": 30}}, tmp_path)
    assert "maxScaleStep must be at least" in str(refused.value.stderr)


def test_makeroom_s_account_is_refused_beyond_what_it_needs(cp: ControlPlane) -> None:
    from kubernetes import client

    ns = f"victims-{uuid.uuid4().hex[:5]}"
    cp.core.create_namespace({"metadata": {"name": ns, "labels": {"makeroom.io/e2e": "true"}}})
    cp.core.create_node(
        {
            "metadata": {"name": f"n-{ns}", "labels": {"makeroom.io/e2e": "true"}},
            "spec": {"taints": [{"key": "team", "value": "a", "effect": "NoSchedule"}]},
        }
    )
    cp.core.create_namespaced_pod(ns, pod_body("bound", {"cpu": "100m"}, spec={"nodeName": f"n-{ns}"}))
    cp.core.create_namespaced_pod(ns, pod_body("pending", {"cpu": "100m"}))
    cp.apps.create_namespaced_deployment(
        ns,
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": pod_body("x", {"cpu": "1m"})["spec"],
                },
            },
        },
    )
    with installed_chart(cp, {"controller": {"namespaces": [ns]}}) as inst:
        api = impersonating(cp, inst.user)
        core: Any = client.CoreV1Api(api)
        apps: Any = client.AppsV1Api(api)
        custom: Any = client.CustomObjectsApi(api)
        node = f"n-{ns}"

        def taints(*extra: dict[str, str]) -> dict[str, Any]:
            current = [
                {k: v for k, v in t.to_dict().items() if v is not None and k != "time_added"}
                for t in cp.core.read_node(node).spec.taints or []
            ]
            return {"spec": {"taints": current + list(extra)}}

        refused = {
            "a container image": lambda: core.patch_namespaced_pod(
                "bound", ns, {"spec": {"containers": [{"name": "c", "image": "evil"}]}}
            ),
            "a pod's label": lambda: core.patch_namespaced_pod(
                "bound", ns, {"metadata": {"labels": {"x": "y"}}}
            ),
            "a tenant's annotation": lambda: core.patch_namespaced_pod(
                "bound", ns, {"metadata": {"annotations": {"team.io/owner": "evil"}}}
            ),
            "a pod template": lambda: apps.patch_namespaced_deployment(
                "web", ns, {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "evil"}]}}}}
            ),
            "a foreign taint": lambda: core.patch_node(node, taints({"key": "evil", "effect": "NoSchedule"})),
            "the removal of a foreign taint": lambda: core.patch_node(node, {"spec": {"taints": None}}),
            "a cordon": lambda: core.patch_node(node, {"spec": {"unschedulable": True}}),
            "a node's label": lambda: core.patch_node(node, {"metadata": {"labels": {"x": "y"}}}),
            "a pod's phase": lambda: core.patch_namespaced_pod_status(
                "bound", ns, {"status": {"phase": "Failed"}}
            ),
            "a surge of 500": lambda: apps.patch_namespaced_deployment_scale(
                "web", ns, {"spec": {"replicas": 501}}
            ),
            "an eviction outside its scope": lambda: core.create_namespaced_pod_eviction(
                "x", "kube-system", {"metadata": {"name": "x", "namespace": "kube-system"}}
            ),
            "a scale outside its scope": lambda: apps.patch_namespaced_deployment_scale(
                "coredns", "kube-system", {"spec": {"replicas": 0}}
            ),
            "a record outside its namespace": lambda: custom.create_namespaced_custom_object(
                GROUP, VERSION, ns, "relocations", relocation_body(ns, "pending", f"{ns}/bound")
            ),
            "a secret": lambda: core.list_namespaced_secret(ns),
        }
        allowed = {
            "its own annotations": lambda: core.patch_namespaced_pod(
                "bound",
                ns,
                {
                    "metadata": {
                        "annotations": {
                            "makeroom.io/victim-of": f"{ns}/pending",
                            "controller.kubernetes.io/pod-deletion-cost": "-2147483647",
                        }
                    }
                },
            ),
            "the scale-up delay": lambda: core.patch_namespaced_pod(
                "pending",
                ns,
                {"metadata": {"annotations": {"cluster-autoscaler.kubernetes.io/pod-scale-up-delay": "60s"}}},
            ),
            "a nomination": lambda: core.patch_namespaced_pod_status(
                "pending", ns, {"status": {"nominatedNodeName": node}}
            ),
            "its own taint": lambda: core.patch_node(
                node, taints({"key": "makeroom.io/consolidating", "effect": "NoSchedule"})
            ),
            "a surge of 3": lambda: apps.patch_namespaced_deployment_scale(
                "web", ns, {"spec": {"replicas": 4}}
            ),
            "its own record": lambda: custom.create_namespaced_custom_object(
                GROUP,
                VERSION,
                inst.namespace,
                "relocations",
                relocation_body(inst.namespace, "p", f"{ns}/bound"),
            ),
        }
        got_refused, got_allowed = once_the_policy_holds(core, ns, refused, allowed)
    print(json.dumps({"refused": got_refused, "allowed": got_allowed}, indent=1))
    assert {what for what, code in got_refused.items() if code not in (403, 422)} == set()
    assert {what for what, code in got_allowed.items() if code != 200} == set()
    assert got_refused["a pod template"] == 403  # RBAC: no patch of Deployments at all
    assert got_refused["a container image"] == 422  # the admission policy


def test_a_stolen_token_is_worth_little(cp: ControlPlane) -> None:
    """Issue 20, with the ServiceAccount's own token and the chart's defaults (cluster-wide bindings).
    Before: the token could add finalizers and owner references to a node (the garbage collector then
    deletes a node owned by a missing object), taint a node `makeroom.io/...:NoExecute` (every pod
    evicted past the Eviction API and its budgets), set pods/status fields besides the nomination, and
    evict pods and scale Deployments in kube-system."""
    from kubernetes import client

    ns = f"victims-{uuid.uuid4().hex[:5]}"
    node = f"n-{ns}"
    cp.core.create_namespace({"metadata": {"name": ns, "labels": {"makeroom.io/e2e": "true"}}})
    cp.core.create_node({"metadata": {"name": node, "labels": {"makeroom.io/e2e": "true"}}})
    for where in (ns, "kube-system"):
        cp.core.create_namespaced_pod(
            where, pod_body(f"bound-{ns}", {"cpu": "100m"}, spec={"nodeName": node})
        )
        cp.apps.create_namespaced_deployment(
            where,
            {
                "metadata": {"name": f"web-{ns}"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": f"web-{ns}"}},
                    "template": {
                        "metadata": {"labels": {"app": f"web-{ns}"}},
                        "spec": pod_body("x", {"cpu": "1m"}, spec={"nodeName": node})["spec"],
                    },
                },
            },
        )
    cp.core.create_namespaced_pod(ns, pod_body("pending", {"cpu": "100m"}))
    pod = f"bound-{ns}"
    try:
        with installed_chart(cp, {}) as inst:
            api = service_account_client(cp, inst.namespace, inst.service_account)
            core: Any = client.CoreV1Api(api)
            apps: Any = client.AppsV1Api(api)

            def taints(*extra: dict[str, str]) -> dict[str, Any]:
                current = [
                    {k: v for k, v in t.to_dict().items() if v is not None and k != "time_added"}
                    for t in cp.core.read_node(node).spec.taints or []
                ]
                return {"spec": {"taints": current + list(extra)}}

            def evict(where: str) -> Any:
                return core.create_namespaced_pod_eviction(
                    pod, where, {"metadata": {"name": pod, "namespace": where}}
                )

            owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": str(uuid.uuid4())}
            refused = {
                "a node's finalizer": lambda: core.patch_node(
                    node, {"metadata": {"finalizers": ["evil.io/hold"]}}
                ),
                "a node's owner": lambda: core.patch_node(node, {"metadata": {"ownerReferences": [owner]}}),
                "a NoExecute taint of its own": lambda: core.patch_node(
                    node, taints({"key": "makeroom.io/consolidating", "effect": "NoExecute"})
                ),
                "a PreferNoSchedule taint of its own": lambda: core.patch_node(
                    node,
                    taints({"key": "makeroom.io/reserved-for", "value": "x", "effect": "PreferNoSchedule"}),
                ),
                "headroom's PreferNoSchedule taint with a value": lambda: core.patch_node(
                    node,
                    taints({"key": "makeroom.io/headroom", "value": "x", "effect": "PreferNoSchedule"}),
                ),
                "headroom's taint as NoExecute": lambda: core.patch_node(
                    node, taints({"key": "makeroom.io/headroom", "effect": "NoExecute"})
                ),
                "a pod's start time": lambda: core.patch_namespaced_pod_status(
                    pod, ns, {"status": {"startTime": "2020-01-01T00:00:00Z"}}
                ),
                "an eviction in kube-system": lambda: evict("kube-system"),
                "a scale in kube-system": lambda: apps.patch_namespaced_deployment_scale(
                    f"web-{ns}", "kube-system", {"spec": {"replicas": 0}}
                ),
                "a mark in kube-system": lambda: core.patch_namespaced_pod(
                    pod, "kube-system", {"metadata": {"annotations": {"makeroom.io/victim-of": "x/y"}}}
                ),
            }
            allowed = {
                "its own NoSchedule taint": lambda: core.patch_node(
                    node, taints({"key": "makeroom.io/consolidating", "effect": "NoSchedule"})
                ),
                "headroom's PreferNoSchedule taint": lambda: core.patch_node(
                    node, taints({"key": "makeroom.io/headroom", "effect": "PreferNoSchedule"})
                ),
                "a nomination": lambda: core.patch_namespaced_pod_status(
                    "pending", ns, {"status": {"nominatedNodeName": node}}
                ),
                "a scale in scope": lambda: apps.patch_namespaced_deployment_scale(
                    f"web-{ns}", ns, {"spec": {"replicas": 2}}
                ),
                "an eviction in scope": lambda: evict(ns),
            }
            got_refused, got_allowed = once_the_policy_holds(core, ns, refused, allowed)
            print(json.dumps({"refused": got_refused, "allowed": got_allowed}, indent=1))
            kept = cp.core.read_node(node)
            assert not kept.metadata.finalizers and not kept.metadata.owner_references
            headroom = ("makeroom.io/headroom", None, "PreferNoSchedule")
            assert not [
                t
                for t in kept.spec.taints or []
                if t.effect != "NoSchedule" and (t.key, t.value or None, t.effect) != headroom
            ]
            assert cp.apps.read_namespaced_deployment(f"web-{ns}", "kube-system").spec.replicas == 1
            assert cp.core.read_namespaced_pod(pod, "kube-system").metadata.deletion_timestamp is None
        assert {what for what, code in got_refused.items() if code not in (403, 422)} == set()
        assert {what for what, code in got_allowed.items() if code != 200} == set()
    finally:
        for where in (ns, "kube-system"):
            with contextlib.suppress(client.ApiException):
                cp.apps.delete_namespaced_deployment(f"web-{ns}", where, propagation_policy="Foreground")
            with contextlib.suppress(client.ApiException):
                cp.core.delete_namespaced_pod(pod, where, grace_period_seconds=0)

        def web_pods_gone() -> bool:
            # No kubelet plays this node: its pods are removed by force, or they would outlive the
            # test in kube-system (a Deployment there is no e2e object) on a node that is gone.
            left = cp.core.list_namespaced_pod("kube-system", label_selector=f"app=web-{ns}").items
            for p in left:
                with contextlib.suppress(client.ApiException):
                    cp.core.delete_namespaced_pod(p.metadata.name, "kube-system", grace_period_seconds=0)
            return (
                not left
                and not cp.apps.list_namespaced_deployment(
                    "kube-system", field_selector=f"metadata.name=web-{ns}"
                ).items
            )

        cp.wait_for(web_pods_gone, 60, f"web-{ns} gone from kube-system")
        with contextlib.suppress(client.ApiException):
            cp.core.patch_node(node, {"metadata": {"finalizers": None, "ownerReferences": None}})
            cp.core.delete_node(node)


def test_metrics_are_read_only_with_a_token_the_api_server_lets_read_them(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """Issue 20: /metrics answered whoever reached the port. Now a token is reviewed by the API server
    (TokenReview, SubjectAccessReview on /metrics) with makeroom's own rights, as the chart grants them."""
    import socket

    from kubernetes import client

    _, groups = quiet_seed(tmp_path)  # the groups file makeroom runs with
    with installed_chart(cp, {}) as inst:
        ns = inst.namespace
        for sa in ("prometheus", "nosy"):
            cp.core.create_namespaced_service_account(ns, {"metadata": {"name": sa}})
        rbac: Any = client.RbacAuthorizationV1Api(cp.api)
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": f"{ns}-prometheus", "labels": {"makeroom.io/e2e": "true"}},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "mr-makeroom-metrics-reader",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": ns}],
            }
        )
        tokens = {
            sa: cp.core.create_namespaced_service_account_token(
                sa, ns, {"spec": {"expirationSeconds": 600}}
            ).status.token
            for sa in ("prometheus", "nosy")
        }
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        extra = ("--metrics-port", str(port), "--metrics-host", "127.0.0.1")
        mr = Makeroom(
            run_args(cp, inst, groups, strategy="migrate", identity="solo", extra=extra), tmp_path / "run.log"
        ).start()

        try:
            cp.wait_for(lambda: scrape(port, None) != 0, 60, "makeroom serving its port")
            got = {
                "no token": scrape(port, None),
                "a forged token": scrape(port, "not-a-token"),
                "a token not allowed to read": scrape(port, tokens["nosy"]),
                "the reader's token": scrape(port, tokens["prometheus"]),
            }
        finally:
            mr.stop()
            rbac.delete_cluster_role_binding(f"{ns}-prometheus")
    assert got == {
        "no token": 401,
        "a forged token": 403,
        "a token not allowed to read": 403,
        "the reader's token": 200,
    }, (got, mr.tail())


# --- a tenant --------------------------------------------------------------------------------------------
def test_a_tenant_cannot_steer_or_halt_makeroom(cp: ControlPlane, tmp_path: Path) -> None:
    from kubernetes import client

    scenario, groups = quiet_seed(tmp_path)
    team_a = f"team-a-{uuid.uuid4().hex[:5]}"
    allowed_class = f"{team_a}-text-generator"  # the harness's PriorityClass of text-generator
    values = {"scope": {"roomFor": {"priorityClasses": [allowed_class]}}}
    with installed_chart(cp, values) as inst:
        ls = cp.load_scenario(
            scenario, strategy="migrate", time_scale=0.1, namespace=team_a, autoscaler=False
        )
        team_b = f"team-b-{uuid.uuid4().hex[:5]}"
        as_tenant = tenant(cp, team_b, "tenant-b")
        cp.scheduling.create_priority_class(
            {
                "metadata": {"name": f"{team_b}-high", "labels": {"makeroom.io/e2e": "true"}},
                "value": 2000,
                "preemptionPolicy": "Never",
            }
        )
        t_core: Any = client.CoreV1Api(as_tenant)
        t_apps: Any = client.AppsV1Api(as_tenant)
        t_custom: Any = client.CustomObjectsApi(as_tenant)
        t_leases: Any = client.CoordinationV1Api(as_tenant)
        iris = sorted(p.metadata.name for p in ls.workload_pods("iris-classifier"))
        on_gpu = [p.metadata.name for p in ls.workload_pods("iris-classifier") if p.spec.node_name == "gpu-0"]
        victim = f"{team_a}/{on_gpu[0]}"
        forged = {
            "strategy": "migrate",
            "node": "gpu-0",
            "started": 0,
            "deadline": 4e9,
            "victims": [{"pod": victim, "workload": f"{team_a}/iris-classifier", "node": "gpu-0"}],
            "surge": {f"{team_a}/iris-classifier": 500},
        }
        high = {"priorityClassName": f"{team_b}-high"}
        # The attacks: forged records where a tenant can write, a high-priority pod, marks.
        t_core.create_namespaced_pod(
            team_b,
            pod_body(
                "forger",
                {"cpu": "100m"},
                annotations={"makeroom.io/relocation": json.dumps(forged)},
                spec={**high, "nodeSelector": {"nowhere": "true"}},
            ),
        )
        t_core.create_namespaced_pod(team_b, pod_body("greedy", GPU_POD, spec=high))
        t_core.create_namespaced_pod(
            team_b, pod_body("marked", {"cpu": "10m"}, annotations={"makeroom.io/victim-of": victim})
        )
        # A nodeName of no node (the API server takes it): once stopped planning cluster-wide.
        t_core.create_namespaced_pod(
            team_b, pod_body("squatter", {"cpu": "10m"}, spec={"nodeName": "nowhere"})
        )
        t_apps.create_namespaced_deployment(
            team_b,
            {
                "metadata": {"name": "decoy", "annotations": {"makeroom.io/surge": '{"base":1,"by":500}'}},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "decoy"}},
                    "template": {
                        "metadata": {"labels": {"app": "decoy"}},
                        "spec": pod_body("x", {"cpu": "10m"})["spec"],
                    },
                },
            },
        )
        writes = {
            "a record in makeroom's namespace": lambda: t_custom.create_namespaced_custom_object(
                GROUP,
                VERSION,
                inst.namespace,
                "relocations",
                relocation_body(inst.namespace, "greedy", victim),
            ),
            "a record in its own namespace": lambda: t_custom.create_namespaced_custom_object(
                GROUP, VERSION, team_b, "relocations", relocation_body(team_b, "greedy", victim)
            ),
            "makeroom's Lease": lambda: t_leases.create_namespaced_lease(
                inst.namespace, {"metadata": {"name": "makeroom"}, "spec": {"holderIdentity": "tenant-b"}}
            ),
            "its namespace's labels": lambda: t_core.patch_namespace(
                team_b, {"metadata": {"labels": {"tier": "gold"}}}
            ),
            "an iris pod": lambda: t_core.patch_namespaced_pod(
                victim.split("/")[1], team_a, {"metadata": {"labels": {"x": "y"}}}
            ),
        }
        refused = {what: status_of(call) for what, call in writes.items()}
        assert refused == {what: 403 for what in writes}, refused
        cp.wait_for(
            lambda: unschedulable(cp, team_b, "greedy"), 30, "the tenant's high-priority pod unschedulable"
        )
        high_water = Watch(cp, team_a, team_b)
        mr = Makeroom(
            run_args(cp, inst, groups, strategy="migrate", identity="solo"), tmp_path / "run.log"
        ).start()
        try:
            cp.wait_for(lambda: bool(mr.messages("watch cache synced")), 60, "makeroom synced")
            time.sleep(6)  # several reconciliations with the attacks in place
            phase_a = {
                "records": records(cp, inst.namespace),
                "greedy nominated": cp.core.read_namespaced_pod("greedy", team_b).status.nominated_node_name,
                "iris": sorted(p.metadata.name for p in ls.workload_pods("iris-classifier")),
                "iris marks": [
                    k
                    for p in ls.workload_pods("iris-classifier")
                    for k in (p.metadata.annotations or {})
                    if k.startswith("makeroom.io/")
                ],
                "relocating events": [
                    e.involved_object.name
                    for e in cp.core.list_event_for_all_namespaces().items
                    if e.reason == "Relocating"
                ],
            }
            assert phase_a == {
                "records": [],
                "greedy nominated": None,
                "iris": iris,
                "iris marks": [],
                "relocating events": [],
            }, phase_a
            # makeroom is not halted: room is still made for a pod it is allowed to make room for, with
            # the forged marks still in place (the greedy pod leaves: at priority 2000 the scheduler
            # itself would give it the room makeroom makes for text-generator).
            cp.core.delete_namespaced_pod("greedy", team_b, grace_period_seconds=0)
            cp.apps.patch_namespaced_deployment_scale("text-generator", team_a, {"spec": {"replicas": 1}})
            cp.wait_for(
                lambda: (
                    [p.spec.node_name for p in ls.ready_pods("text-generator")] == ["gpu-0"]
                    and len(ls.ready_pods("iris-classifier")) == 10
                ),
                120,
                "text-generator Ready on gpu-0, 10 iris Ready",
            )
            cp.wait_for(
                lambda: not leftovers(cp, team_a, {"iris-classifier": 10, "text-generator": 1}),
                30,
                "released",
            )
            moves = ("relocations", "consolidations")
            cp.wait_for(lambda: not records(cp, inst.namespace, moves), 30, "record deleted")
            # the replacements cool down, in makeroom's own store (a new leader would know)
            assert [r.split(".")[-1] for r in records(cp, inst.namespace, ("cooldowns",))] == [
                "iris-classifier"
            ]
        finally:
            high_water.stop()
            ls.stop()
            mr.stop()
        assert not [d for d in mr.lines() if "403" in str(d.get("error", ""))], mr.tail()
        assert not mr.messages("the cluster cannot be planned on"), mr.tail()  # the squatter is left out
        started = [d["pod"] for d in mr.messages("relocation started")]
        assert started == [f"{team_a}/{ls.workload_pods('text-generator')[0].metadata.name}"], started
        assert high_water.replicas[f"{team_a}/iris-classifier"] <= 13, high_water.replicas  # 10 + 3 victims
        assert high_water.replicas[f"{team_b}/decoy"] == 1, high_water.replicas
        forger = cp.core.read_namespaced_pod("forger", team_b)
        assert (
            forger.status.nominated_node_name is None
            and "makeroom.io/relocation" in forger.metadata.annotations
        )
        assert cp.apps.read_namespaced_deployment("decoy", team_b).spec.replicas == 1


class Watch:
    """The highest replica count each Deployment of the namespaces reaches (polled every 0.2 s)."""

    def __init__(self, cp: ControlPlane, *namespaces: str) -> None:
        self.cp, self.namespaces = cp, namespaces
        self.replicas: dict[str, int] = {}
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):
                for ns in self.namespaces:
                    for d in self.cp.apps.list_namespaced_deployment(ns).items:
                        key = f"{ns}/{d.metadata.name}"
                        self.replicas[key] = max(self.replicas.get(key, 0), d.spec.replicas or 0)
            self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()


# --- cleanup and uninstall -------------------------------------------------------------------------------
def cleanup(cp: ControlPlane, inst: Installed) -> subprocess.CompletedProcess[str]:
    args = [
        *makeroom_command(),
        "cleanup",
        "--kubeconfig",
        str(cp.kubeconfig),
        "--as",
        inst.user,
        "--records-namespace",
        inst.namespace,
        "--lease-namespace",
        inst.namespace,
        "--timeout",
        "60",
    ]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def test_cleanup_in_the_middle_of_a_relocation_and_the_uninstall_leave_nothing(
    cp: ControlPlane, tmp_path: Path
) -> None:
    from kubernetes import client

    scenario, groups = quiet_seed(tmp_path)
    ext: Any = client.ApiextensionsV1Api(cp.api)
    rbac: Any = client.RbacAuthorizationV1Api(cp.api)
    with installed_chart(cp) as inst:
        ls = cp.load_scenario(scenario, strategy="migrate", time_scale=0.5, autoscaler=False)  # 10 s starts
        mr = Makeroom(
            run_args(cp, inst, groups, strategy="migrate", identity="solo"), tmp_path / "run.log"
        ).start()
        try:
            cp.wait_for(lambda: bool(mr.messages("became the leader")), 60, "makeroom leads")
            cp.apps.patch_namespaced_deployment_scale(
                "text-generator", ls.namespace, {"spec": {"replicas": 1}}
            )
            cp.wait_for(
                lambda: (
                    cp.apps.read_namespaced_deployment("iris-classifier", ls.namespace).spec.replicas == 13
                ),
                90,
                "iris surged for the relocation",
            )
        finally:
            mr.stop()  # the chart's hook scales makeroom to 0 first
        assert records(cp, inst.namespace), "a relocation under way"
        assert leftovers(cp, ls.namespace, {"iris-classifier": 10, "text-generator": 1})
        first = cleanup(cp, inst)
        assert first.returncode == 0, first.stderr
        assert "rolled back the relocation" in first.stdout, first.stdout
        try:
            cp.wait_for(
                lambda: not leftovers(cp, ls.namespace, {"iris-classifier": 10, "text-generator": 1}),
                30,
                "nothing of makeroom on the cluster's objects",
            )
        finally:
            ls.stop()
        tg = ls.workload_pods("text-generator")[0]
        assert tg.status.nominated_node_name is None
        assert records(cp, inst.namespace) == []
        leases: Any = client.CoordinationV1Api(cp.api)
        assert status_of(lambda: leases.read_namespaced_lease("makeroom", inst.namespace)) == 404
        again = cleanup(cp, inst)
        assert again.returncode == 0 and "nothing of makeroom was left" in again.stdout, again.stdout
        objects = inst.objects
    # the uninstall (`helm uninstall` deletes what the chart made, after the hook)
    names = {o["metadata"]["name"] for o in objects}
    assert not names & {c.metadata.name for c in ext.list_custom_resource_definition().items}
    assert not names & {r.metadata.name for r in rbac.list_cluster_role().items}
    assert not names & {b.metadata.name for b in rbac.list_cluster_role_binding().items}
    adm: Any = client.AdmissionregistrationV1Api(cp.api)
    assert not names & {p.metadata.name for p in adm.list_validating_admission_policy().items}


# --- issue 20: a tenant's own pods, nothing forged ----------------------------------------------------
def test_a_tenant_s_own_pods_neither_get_others_evicted_nor_block_room_making(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """Issue 20, with only what the built-in `admin` role on its own namespace allows, and the chart's
    default scope (room is made for every namespace). Before (the previous controller, on this plane):
    - high-priority GPU pods the scheduler never places (node affinity by `matchFields` on a node that
      does not exist, read as "matches every node"; a required podAffinity nothing satisfies; a
      hostPort a pod of the tenant already holds on the GPU node) had another tenant's pods evicted
      for them, again after each timeout;
    - 110 request-free pods held by a scheduling gate, at text-generator's priority, were counted as
      taking the room first: text-generator's relocation was refused `no-destination`;
    - 60 of them marked `makeroom.io/victim-of`: every mark removed inside the round, before planning.
    Now: nobody moves for the futile pods, the marks go after planning on the namespace's turns (10 at
    once, then 2 a second), and room is made for text-generator with the gated pods in place."""
    from kubernetes import client

    scenario, groups = quiet_seed(tmp_path)
    team_a = f"team-a-{uuid.uuid4().hex[:5]}"
    with installed_chart(cp, {}) as inst:
        ls = cp.load_scenario(
            scenario, strategy="migrate", time_scale=0.1, namespace=team_a, autoscaler=False
        )
        team_b = f"team-b-{uuid.uuid4().hex[:5]}"
        t_core: Any = client.CoreV1Api(tenant(cp, team_b, "tenant-b"))
        high = {"priorityClassName": f"{team_a}-text-generator"}  # any namespace may name a class
        port = [{"containerPort": 8080, "hostPort": 8080}]

        def with_ports(body: dict[str, Any]) -> dict[str, Any]:
            body["spec"]["containers"][0]["ports"] = port
            return body

        nowhere = {"key": "metadata.name", "operator": "In", "values": ["no-such-node"]}
        nobody = {
            "labelSelector": {"matchLabels": {"app": "nobody"}},
            "topologyKey": "kubernetes.io/hostname",
        }
        futile = {
            "pinned": pod_body(
                "pinned",
                GPU_POD,
                spec={
                    **high,
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchFields": [nowhere]}]
                            }
                        }
                    },
                },
            ),
            "lonely": pod_body(
                "lonely",
                GPU_POD,
                spec={
                    **high,
                    "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [nobody]}},
                },
            ),
            "port-clash": with_ports(pod_body("port-clash", GPU_POD, spec=high)),
        }
        # the port's holder: a bare pod the tenant binds to gpu-0 itself (bare pods never move)
        t_core.create_namespaced_pod(team_b, with_ports(pod_body("holder", {}, spec={"nodeName": "gpu-0"})))
        for body in futile.values():
            t_core.create_namespaced_pod(team_b, body)
        gated = [f"gated-{i}" for i in range(110)]
        for i, name in enumerate(gated):
            t_core.create_namespaced_pod(
                team_b,
                pod_body(
                    name,
                    {},
                    annotations={"makeroom.io/victim-of": f"{team_a}/x"} if i < 60 else {},
                    spec={**high, "schedulingGates": [{"name": "team-b.io/wait"}]},
                ),
            )

        cp.wait_for(
            lambda: all(unschedulable(cp, team_b, n) for n in futile), 60, "the futile pods unschedulable"
        )
        iris = sorted(p.metadata.name for p in ls.workload_pods("iris-classifier"))

        def marks_left() -> list[str]:
            return [
                p.metadata.name
                for p in cp.core.list_namespaced_pod(team_b).items
                if "makeroom.io/victim-of" in (p.metadata.annotations or {})
            ]

        mr = Makeroom(
            run_args(cp, inst, groups, strategy="migrate", identity="solo"), tmp_path / "run.log"
        ).start()
        try:
            cp.wait_for(lambda: bool(mr.messages("watch cache synced")), 60, "makeroom synced")
            # On the namespace's turns: gone after 25 s or more, many rounds with the futile pods waiting.
            cp.wait_for(lambda: not marks_left(), 90, "the tenant's marks removed")
            # More rounds with the futile pods waiting (the previous controller removed every mark
            # first, in a round of 8 s here, and started evicting for them only then).
            time.sleep(5)
            phase_a = {
                "started": [d["pod"] for d in mr.messages("relocation started")],
                "iris": sorted(p.metadata.name for p in ls.workload_pods("iris-classifier")),
                "nominated": {
                    n: cp.core.read_namespaced_pod(n, team_b).status.nominated_node_name for n in futile
                },
                "still gated": sum(
                    1 for n in gated if cp.core.read_namespaced_pod(n, team_b).spec.scheduling_gates
                ),
            }
            assert phase_a == {
                "started": [],
                "iris": iris,
                "nominated": dict.fromkeys(futile),
                "still gated": len(gated),
            }, (phase_a, mr.tail())
            # Room is still made for text-generator, with the 110 gated pods at its priority in place.
            for name in futile:
                cp.core.delete_namespaced_pod(name, team_b, grace_period_seconds=0)
            cp.apps.patch_namespaced_deployment_scale("text-generator", team_a, {"spec": {"replicas": 1}})
            cp.wait_for(
                lambda: [p.spec.node_name for p in ls.ready_pods("text-generator")] == ["gpu-0"],
                120,
                "text-generator Ready on gpu-0",
            )
        finally:
            ls.stop()
            mr.stop()
        started = [d["pod"] for d in mr.messages("relocation started")]
        assert started == [f"{team_a}/{ls.workload_pods('text-generator')[0].metadata.name}"], started
        assert not [d for d in mr.lines() if "403" in str(d.get("error", ""))], mr.tail()


def test_a_tenant_s_own_victims_neither_hold_makeroom_nor_lose_work(cp: ControlPlane, tmp_path: Path) -> None:
    """Issue 20, the tenant's own pods on the GPU node text-generator needs, with only what its `admin`
    role allows. Before (the previous controller, on this plane):
    - its Job's pod (backoffLimit 0) was chosen to move: evicted, the Job failed;
    - its Deployment under two PodDisruptionBudgets was chosen to move: every eviction answered 500,
      retried until the 900 s deadline, text-generator held nominated and the autoscaler kept away;
    - with one budget, pods that never finish terminating (a finalizer of its own) held the
      relocation, text-generator nominated, until the deadline.
    Also its StatefulSet's pod, bound to a local PersistentVolume on the GPU node (which the controller
    before issue 20 evicted to where it can never run; shown on the controller only).
    Now: the Job's pod, the StatefulSet's pod and a workload under two budgets are never chosen; a
    victim still terminating 30 s past its grace period ends the relocation, the nomination and the
    scale-up delay released."""
    from kubernetes import client

    scenario, groups = quiet_seed(tmp_path)
    data = yaml.safe_load(scenario.read_text())
    iris = next(w for w in data["workloads"] if w["name"] == "iris-classifier")
    iris["replicas"] = 0  # both nodes empty: the GPU node holds only the tenant's pods
    iris.pop("placement")
    scenario.write_text(yaml.safe_dump(data, sort_keys=False))
    team_a = f"team-a-{uuid.uuid4().hex[:5]}"
    team_b = f"team-b-{uuid.uuid4().hex[:5]}"
    with installed_chart(cp, {}) as inst:
        ls = cp.load_scenario(scenario, strategy="evict", time_scale=0.1, namespace=team_a, autoscaler=False)
        as_tenant = tenant(cp, team_b, "tenant-b")
        t_core: Any = client.CoreV1Api(as_tenant)
        t_apps: Any = client.AppsV1Api(as_tenant)
        t_batch: Any = client.BatchV1Api(as_tenant)
        t_policy: Any = client.PolicyV1Api(as_tenant)
        one_cpu = {"cpu": "1", "memory": "1Gi"}
        cp.core.patch_node("cpu-0", {"spec": {"unschedulable": True}})  # the tenant's pods land on gpu-0
        t_apps.create_namespaced_deployment(
            team_b,
            {
                "metadata": {"name": "guarded"},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "guarded"}},
                    "template": {
                        "metadata": {"labels": {"app": "guarded"}},
                        "spec": pod_body("x", one_cpu, spec={"terminationGracePeriodSeconds": 1})["spec"],
                    },
                },
            },
        )
        for budget in ("one", "two"):
            t_policy.create_namespaced_pod_disruption_budget(
                team_b,
                {
                    "metadata": {"name": budget},
                    "spec": {"maxUnavailable": 2, "selector": {"matchLabels": {"app": "guarded"}}},
                },
            )
        job_pod = pod_body("x", {"cpu": "900m", "memory": "1Gi"}, spec={"restartPolicy": "Never"})
        t_batch.create_namespaced_job(
            team_b,
            {
                "metadata": {"name": "batch"},
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        # kwok completes a Job's pod within seconds; this one works for an hour
                        "metadata": {
                            "annotations": {
                                "pod-complete.stage.kwok.x-k8s.io/delay": "1h",
                                "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "1h",
                            }
                        },
                        "spec": job_pod["spec"],
                    },
                },
            },
        )

        # its StatefulSet's pod, on a local volume on gpu-0 (the admin's PV, pre-bound to the claim)
        volume = f"{team_b}-data"
        cp.core.create_persistent_volume(
            {
                "metadata": {"name": volume},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "local",
                    "local": {"path": "/mnt/data"},
                    "claimRef": {"namespace": team_b, "name": "data-store-0"},
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "kubernetes.io/hostname",
                                            "operator": "In",
                                            "values": ["gpu-0"],
                                        }
                                    ]
                                }
                            ]
                        }
                    },
                },
            }
        )
        store = pod_body("x", {"cpu": "100m", "memory": "128Mi"}, spec={"terminationGracePeriodSeconds": 1})
        store["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        t_apps.create_namespaced_stateful_set(
            team_b,
            {
                "metadata": {"name": "store"},
                "spec": {
                    "replicas": 1,
                    "serviceName": "store",
                    "selector": {"matchLabels": {"app": "store"}},
                    "template": {"metadata": {"labels": {"app": "store"}}, "spec": store["spec"]},
                    "volumeClaimTemplates": [
                        {
                            "metadata": {"name": "data"},
                            "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "storageClassName": "local",
                                "resources": {"requests": {"storage": "1Gi"}},
                            },
                        }
                    ],
                },
            },
        )

        def tenant_pods() -> dict[str, Any]:
            return {p.metadata.name: p for p in cp.core.list_namespaced_pod(team_b).items}

        def job_failed() -> int:
            batch: Any = client.BatchV1Api(cp.api)
            return int(batch.read_namespaced_job("batch", team_b).status.failed or 0)

        def running_on_gpu() -> int:
            return sum(
                1
                for p in tenant_pods().values()
                if p.spec.node_name == "gpu-0" and p.status.phase == "Running"
            )

        mr = None
        try:
            cp.wait_for(lambda: running_on_gpu() == 4, 60, "the tenant's 4 pods running on gpu-0")
            cp.core.patch_node("cpu-0", {"spec": {"unschedulable": False}})
            first = set(tenant_pods())
            mr = Makeroom(
                run_args(cp, inst, groups, strategy="evict", identity="solo"), tmp_path / "run.log"
            ).start()
            cp.wait_for(lambda: bool(mr.messages("watch cache synced")), 60, "makeroom synced")
            cp.apps.patch_namespaced_deployment_scale("text-generator", team_a, {"spec": {"replicas": 1}})
            cp.wait_for(lambda: len(ls.workload_pods("text-generator")) == 1, 30, "text-generator pending")
            tg = ls.workload_pods("text-generator")[0].metadata.name

            def text_generator() -> Any:
                return cp.core.read_namespaced_pod(tg, team_a)

            time.sleep(8)  # several rounds with text-generator waiting and only the tenant's pods to move
            phase_a = {
                "started": [d["pod"] for d in mr.messages("relocation started")],
                "tenant's pods": sorted(tenant_pods()),
                "terminating": [n for n, p in tenant_pods().items() if p.metadata.deletion_timestamp],
                "nominated": text_generator().status.nominated_node_name,
                "job failed": job_failed(),
            }
            assert phase_a == {
                "started": [],
                "tenant's pods": sorted(first),
                "terminating": [],
                "nominated": None,
                "job failed": 0,
            }, (phase_a, mr.tail())
            # One budget now, and pods that never finish terminating: a relocation starts, and ends
            # 30 s after their 1 s grace period, freeing text-generator; the Job's pod stays.
            for name in tenant_pods():
                if name.startswith("guarded-"):
                    t_core.patch_namespaced_pod(
                        name, team_b, {"metadata": {"finalizers": ["team-b.io/hold"]}}
                    )
            t_policy.delete_namespaced_pod_disruption_budget("two", team_b)
            # (a budget's removal is no change of the pods: planned again within REPLAN_EVERY, 60 s)
            cp.wait_for(lambda: bool(mr.messages("relocation started")), 120, "a relocation started")
            cp.wait_for(lambda: bool(mr.messages("relocation rolled back")), 90, "the relocation ended")
            (ended,) = mr.messages("relocation rolled back")
            assert "still terminating" in ended["reason"], ended
            freed = text_generator()
            assert freed.status.nominated_node_name is None, mr.tail()
            assert "cluster-autoscaler.kubernetes.io/pod-scale-up-delay" not in (
                freed.metadata.annotations or {}
            )
            (batch_pod,) = [p for n, p in tenant_pods().items() if n.startswith("batch-")]
            assert batch_pod.status.phase == "Running" and batch_pod.metadata.deletion_timestamp is None
            kept = tenant_pods()["store-0"]
            assert (kept.spec.node_name, kept.metadata.deletion_timestamp) == ("gpu-0", None)
            evicted = {
                str(d.get("object"))
                for d in mr.lines()
                if d.get("msg") == "action" and d.get("verb") == "evict"
            }
            assert evicted and all(e.startswith(f"{team_b}/guarded-") for e in evicted), evicted
            assert job_failed() == 0
        finally:
            for name in tenant_pods():
                with contextlib.suppress(client.ApiException):
                    cp.core.patch_namespaced_pod(name, team_b, {"metadata": {"finalizers": None}})
            cp.core.patch_node("cpu-0", {"spec": {"unschedulable": False}})
            ls.stop()
            if mr is not None:
                mr.stop()
            with contextlib.suppress(client.ApiException):
                cp.core.delete_persistent_volume(volume)


def test_a_pod_out_of_scope_neither_halts_nor_aborts_consolidation(cp: ControlPlane, tmp_path: Path) -> None:
    """Issue 20, scope is scope. Room is made for team-a only (`scope.roomFor.namespaceSelector`); the GPU
    node may go (its group's minimum 0), its five iris replicas fitting on the CPU node. Before (on the
    controller, `test_consolidation_gives_way_only_to_waiting_pods_makeroom_may_help`): one
    never-schedulable priority-0 pod of another tenant halted consolidation cluster-wide, and one
    created mid-way stopped a consolidation under way. Now: the GPU node is emptied for the autoscaler
    with both in place. On the same install, makeroom's record store under its own account: the
    Cooldowns of `default/<team-a>.iris-classifier` and `<team-a>/iris-classifier` both stay (before,
    one name: writing one erased the other)."""
    from kubernetes import client

    from makeroom.controller.records import Cooldown
    from makeroom.kube.cache import Cache
    from makeroom.kube.client import ConnectOptions, connect
    from makeroom.kube.cluster import KubeCluster

    scenario, groups = quiet_seed(tmp_path)
    for path, key in ((scenario, "node_groups"), (groups, "groups")):
        data = yaml.safe_load(path.read_text())
        next(g for g in data[key] if g["name"] == "gpu")["min"] = 0
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    team_a = f"team-a-{uuid.uuid4().hex[:5]}"
    with installed_chart(
        cp, {"scope": {"roomFor": {"namespaceSelector": f"kubernetes.io/metadata.name={team_a}"}}}
    ) as inst:
        # the store first (no controller running): two workloads whose names once collided
        api, _ = connect(ConnectOptions(kubeconfig=str(cp.kubeconfig), impersonate=inst.user))
        store = KubeCluster(api, Cache(api), records_namespace=inst.namespace)
        keys = (f"{team_a}.iris-classifier", f"{team_a}/iris-classifier")  # the first in `default`
        for key in keys:
            store.save_record(Cooldown(workload=key, pods=[], until=time.time() + 3600))
        cooldowns = sorted(records(cp, inst.namespace, ("cooldowns",)))
        assert cooldowns == [
            f"cooldowns/default.{team_a}.iris-classifier",
            f"cooldowns/{team_a}.iris-classifier",
        ]
        assert sorted(store.records().cooldowns) == sorted(keys)
        for key in keys:
            store.delete_record(Cooldown.kind, key)
        api.close()

        ls = cp.load_scenario(
            scenario, strategy="migrate", time_scale=0.1, namespace=team_a, autoscaler=False
        )
        team_b = f"team-b-{uuid.uuid4().hex[:5]}"
        t_core: Any = client.CoreV1Api(tenant(cp, team_b, "tenant-b"))

        def never(name: str) -> None:
            t_core.create_namespaced_pod(team_b, pod_body(name, {"cpu": "64"}))
            cp.wait_for(lambda: unschedulable(cp, team_b, name), 30, f"{name} unschedulable")

        never("never")
        mr = Makeroom(
            run_args(cp, inst, groups, strategy="migrate", identity="solo"), tmp_path / "run.log"
        ).start()
        try:
            cp.wait_for(lambda: bool(mr.messages("consolidation started")), 90, "a consolidation started")
            never("never-2")
            cp.wait_for(
                lambda: sorted(p.spec.node_name for p in ls.ready_pods("iris-classifier")) == ["cpu-0"] * 10,
                120,
                "every iris replica Ready on cpu-0",
            )
            time.sleep(3)  # rounds with the GPU node empty and both pods waiting
        finally:
            ls.stop()
            mr.stop()
        (started,) = mr.messages("consolidation started")
        assert started["node"] == "gpu-0", started
        assert mr.messages("consolidation stopped") == [], mr.tail()
        assert records(cp, inst.namespace, ("consolidations",)) == ["consolidations/gpu-0"]


def test_a_namespace_makeroom_has_not_seen_yet_is_out_of_scope(cp: ControlPlane, tmp_path: Path) -> None:
    """Issue 20, scope is scope: room is made for namespaces `tier notin (untrusted)`. A namespace
    labelled `tier=untrusted` whose pods makeroom sees before the namespace itself (its watch of
    namespaces held by a proxy: the race of two watches, on demand) was judged by its name alone, so
    in scope. Now: out of scope until its labels are seen, then out for good; nobody moves for its
    GPU pod at text-generator's priority."""
    from kubernetes import client
    from makeroom_e2e.faults import FaultProxy

    scenario, groups = quiet_seed(tmp_path)
    team_a = f"team-a-{uuid.uuid4().hex[:5]}"
    values = {"scope": {"roomFor": {"namespaceSelector": "tier notin (untrusted)"}}}
    with installed_chart(cp, values) as inst, FaultProxy(cp) as proxy:
        ls = cp.load_scenario(
            scenario, strategy="migrate", time_scale=0.1, namespace=team_a, autoscaler=False
        )
        iris = sorted(p.metadata.name for p in ls.workload_pods("iris-classifier"))
        args = run_args(cp, inst, groups, strategy="migrate", identity="solo")
        args[args.index("--kubeconfig") + 1] = str(proxy.kubeconfig(tmp_path / "kubeconfig"))
        held = proxy.hold_next("GET", r"^/api/v1/namespaces$", watch=True)
        mr = Makeroom(args, tmp_path / "run.log").start()
        team_c = f"team-c-{uuid.uuid4().hex[:5]}"
        try:
            cp.wait_for(lambda: bool(mr.messages("watch cache synced")), 60, "makeroom synced")
            assert held.holding.wait(30), "makeroom's watch of namespaces held"
            cp.core.create_namespace(
                {"metadata": {"name": team_c, "labels": {"makeroom.io/e2e": "true", "tier": "untrusted"}}}
            )
            t_core: Any = client.CoreV1Api(tenant(cp, team_c, "tenant-c"))
            t_core.create_namespaced_pod(
                team_c, pod_body("intruder", GPU_POD, spec={"priorityClassName": f"{team_a}-text-generator"})
            )
            cp.wait_for(lambda: unschedulable(cp, team_c, "intruder"), 30, "the intruder unschedulable")
            time.sleep(6)  # rounds with the intruder waiting and its namespace unseen

            def after() -> dict[str, Any]:
                return {
                    "started": [d["pod"] for d in mr.messages("relocation started")],
                    "iris": sorted(p.metadata.name for p in ls.workload_pods("iris-classifier")),
                    "nominated": cp.core.read_namespaced_pod("intruder", team_c).status.nominated_node_name,
                }

            unseen = after()
            held.release.set()
            time.sleep(6)  # rounds with its labels seen
            seen = after()
        finally:
            held.release.set()
            ls.stop()
            mr.stop()
        nothing = {"started": [], "iris": iris, "nominated": None}
        assert (unseen, seen) == (nothing, nothing), mr.tail()
