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
                cp.apps.delete_namespaced_deployment(f"web-{ns}", where)
            with contextlib.suppress(client.ApiException):
                cp.core.delete_namespaced_pod(pod, where, grace_period_seconds=0)
        with contextlib.suppress(client.ApiException):
            cp.core.patch_node(node, {"metadata": {"finalizers": None, "ownerReferences": None}})
            cp.core.delete_node(node)


def test_metrics_are_read_only_with_a_token_the_api_server_lets_read_them(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """Issue 20: /metrics answered whoever reached the port. Now a token is reviewed by the API server
    (TokenReview, SubjectAccessReview on /metrics) with makeroom's own rights, as the chart grants them."""
    import socket
    import urllib.error
    import urllib.request

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

        def scrape(token: str | None) -> int:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
            if token is not None:
                request.add_header("Authorization", f"Bearer {token}")
            try:
                return int(urllib.request.urlopen(request, timeout=10).status)
            except urllib.error.HTTPError as exc:
                return exc.code
            except OSError:
                return 0

        try:
            cp.wait_for(lambda: scrape(None) != 0, 60, "makeroom serving its port")
            got = {
                "no token": scrape(None),
                "a forged token": scrape("not-a-token"),
                "a token not allowed to read": scrape(tokens["nosy"]),
                "the reader's token": scrape(tokens["prometheus"]),
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
            lambda: any(
                c.reason == "Unschedulable"
                for p in [cp.core.read_namespaced_pod("greedy", team_b)]
                for c in p.status.conditions or []
            ),
            30,
            "the tenant's high-priority pod unschedulable",
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
