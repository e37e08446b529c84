"""`makeroom run` on the real control plane (issue 6), as the Helm chart's ServiceAccount.

Each test renders the chart with helm, applies its ServiceAccount and RBAC, and runs `makeroom run` as a
process that impersonates that ServiceAccount, so a permission the chart lacks fails the test. The
seeds run with kube-scheduler's preemption off, as the simulator runs evict and migrate. Every seed
under evict and migrate, with the real cluster-autoscaler, is in test_parity.py (the same way).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from makeroom_e2e import ControlPlane
from makeroom_e2e.makeroom_run import (
    Makeroom,
    installed_chart,
    leftovers,
    prepared_seed,
    render_chart,
    run_args,
)
from tests.conftest import cli_json

pytestmark = pytest.mark.e2e
TIME_SCALE = 0.1


def simulated(path: Path, strategy: str) -> dict[str, Any]:
    d = cli_json("simulate", path, "--strategy", strategy)
    return {
        "text_generator_nodes": [p["node"] for p in d["pods"] if p["workload"] == "text-generator"],
        "nodes_added": {g: v["nodes_added"] for g, v in d["node_groups"].items()},
        "iris": d["workloads"]["iris-classifier"],
    }


def tg_ready_on_gpu0(ls: Any) -> bool:
    pods = ls.ready_pods("text-generator")
    return len(pods) == 1 and pods[0].spec.node_name == "gpu-0"


def test_chart_rbac_is_least_privilege(tmp_path: Path) -> None:
    objects = render_chart("mr", "makeroom", {"priorityClasses": {"create": True}}, tmp_path)
    kinds = sorted(o["kind"] for o in objects)
    assert kinds.count("Deployment") == 1 and "Service" in kinds
    assert kinds.count("PriorityClass") == 4  # the APIs' three and makeroom's own
    rules = [r for o in objects if o["kind"] in ("ClusterRole", "Role") for r in o["rules"]]
    urls = [r for r in rules if "nonResourceURLs" in r]  # the metrics reader, for the admin to bind
    assert urls == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    rules = [r for r in rules if r not in urls]
    for r in rules:
        assert "*" not in r["verbs"] and "*" not in r["resources"]
        assert "secrets" not in r["resources"]
        assert "deletecollection" not in r["verbs"]
        if "delete" in r["verbs"]:  # only makeroom's own records and its Lease (by name)
            assert set(r["resources"]) <= {
                "relocations",
                "consolidations",
                "cooldowns",
                "keepings",
                "headrooms",
                "leases",
            }, r
    granted = {
        (g, res, v) for r in rules for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]
    }
    assert ("", "pods/eviction", "create") in granted and ("apps", "deployments/scale", "patch") in granted
    (cm_rule,) = [r for r in rules if "configmaps" in r["resources"]]
    assert cm_rule["resourceNames"] == ["cluster-autoscaler-status", "cluster-autoscaler-priority-expander"]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    spec = deployment["spec"]
    assert spec["replicas"] == 2 and "--leader-elect" in spec["template"]["spec"]["containers"][0]["args"]
    container = spec["template"]["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert spec["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    assert {
        container["livenessProbe"]["httpGet"]["path"],
        container["readinessProbe"]["httpGet"]["path"],
    } == {
        "/healthz",
        "/readyz",
    }


def test_two_replicas_only_the_leader_acts_and_the_other_takes_over(cp: ControlPlane, tmp_path: Path) -> None:
    scenario, groups = prepared_seed(1, tmp_path)
    scale = 0.5  # iris replicas take 10 s to start: time to kill the leader mid-relocation
    with installed_chart(cp) as inst:
        ls = cp.load_scenario(scenario, strategy="migrate", time_scale=scale)
        a = Makeroom(
            run_args(cp, inst, groups, strategy="migrate", identity="replica-a"), tmp_path / "a.log"
        ).start()
        cp.wait_for(lambda: bool(a.messages("became the leader")), 30, "replica-a leads")
        b = Makeroom(
            run_args(cp, inst, groups, strategy="migrate", identity="replica-b"), tmp_path / "b.log"
        ).start()
        try:
            cp.wait_for(lambda: bool(b.messages("watch cache synced")), 30, "replica-b synced (standing by)")
            cp.wait_for(lambda: bool(a.messages("relocation started")), 120, "replica-a starts a relocation")
            assert not b.messages("action"), "the standby acted"
            killed = time.monotonic()
            a.stop(signal.SIGKILL)
            cp.wait_for(lambda: bool(b.messages("became the leader")), 25, "replica-b takes over")
            took_over = time.monotonic() - killed
            cp.wait_for(
                lambda: tg_ready_on_gpu0(ls) and len(ls.ready_pods("iris-classifier")) == 10, 120, "finished"
            )
            cp.wait_for(
                lambda: not leftovers(cp, ls.namespace, {"iris-classifier": 10, "text-generator": 1}),
                30,
                "nothing left behind",
            )
        finally:
            ls.stop()
            b.stop()
            a.stop(signal.SIGKILL)
        print(f"takeover after {took_over:.1f}s")
        assert took_over <= 20.0
        assert b.messages("action"), "the new leader finished the relocation"
        from kubernetes import client

        coordination: Any = client.CoordinationV1Api(cp.api)
        holder = coordination.read_namespaced_lease("makeroom", inst.namespace).spec.holder_identity
        assert holder in ("replica-b", "")


def snapshot_objects(cp: ControlPlane, namespace: str) -> dict[str, Any]:
    """What makeroom could change: pods, nodes (not their heartbeat status), Deployments, Leases,
    Events in the namespace."""
    from kubernetes import client

    def strip(meta: Any) -> dict[str, Any]:
        return {"name": meta.name, "annotations": meta.annotations or {}, "labels": meta.labels or {}}

    pods = {
        p.metadata.name: (
            strip(p.metadata),
            p.spec.node_name,
            [t.key for t in p.spec.tolerations or []],
            p.status.nominated_node_name,
        )
        for p in cp.core.list_namespaced_pod(namespace).items
    }
    nodes = {
        n.metadata.name: (
            strip(n.metadata),
            [(t.key, t.value) for t in n.spec.taints or []],
            n.spec.unschedulable,
        )
        for n in cp.core.list_node().items
    }
    deployments = {
        d.metadata.name: (strip(d.metadata), d.spec.replicas)
        for d in cp.apps.list_namespaced_deployment(namespace).items
    }
    coordination: Any = client.CoordinationV1Api(cp.api)
    leases = sorted(
        x.metadata.name
        for x in coordination.list_lease_for_all_namespaces().items
        if "makeroom" in x.metadata.name
    )
    events = sorted(
        e.metadata.name
        for e in cp.core.list_event_for_all_namespaces().items
        if (e.source and e.source.component == "makeroom") or e.reporting_component == "makeroom"
    )
    return {"pods": pods, "nodes": nodes, "deployments": deployments, "leases": leases, "events": events}


def test_dry_run_changes_nothing_and_reports_the_plan(cp: ControlPlane, tmp_path: Path) -> None:
    scenario, groups = prepared_seed(1, tmp_path)
    with installed_chart(cp) as inst:
        ls = cp.load_scenario(scenario, strategy="migrate", time_scale=TIME_SCALE)
        try:
            ls.wait_events_applied()

            def pending_unschedulable() -> bool:
                pods = ls.workload_pods("text-generator")
                return any(
                    c.type == "PodScheduled" and c.reason == "Unschedulable"
                    for p in pods
                    for c in (p.status.conditions or [])
                )

            cp.wait_for(pending_unschedulable, 60, "text-generator unschedulable")
            before = snapshot_objects(cp, ls.namespace)
            mr = Makeroom(
                run_args(cp, inst, groups, strategy="migrate", identity="dry", extra=("--dry-run",)),
                tmp_path / "dry.log",
            ).start()
            try:
                cp.wait_for(
                    lambda: bool(mr.messages("relocation started")), 60, "the dry run plans a relocation"
                )
                cp.wait_for(lambda: len(mr.messages("dry run: would act")) >= 5, 30, "dry-run actions logged")
            finally:
                code = mr.stop()
            after = snapshot_objects(cp, ls.namespace)
        finally:
            ls.stop()
    assert code == 0, mr.tail()
    assert before == after, "the dry run changed the cluster"
    (plan_line,) = mr.messages("dry run: the plan makeroom would carry out")[:1]
    plan = plan_line["plan"]
    assert [p["node"] for p in plan["placements"]] == ["gpu-0"]
    assert len(plan["moves"]) == 3 and all(m["from"] == "gpu-0" and m["to"] == "cpu-0" for m in plan["moves"])
    would = {d["verb"] for d in mr.messages("dry run: would act")}
    assert {"annotate", "nominate", "scale"} <= would
    assert not tg_ready_on_gpu0(ls)


def test_snapshot_then_plan_equals_plan_on_the_live_cluster(cp: ControlPlane, tmp_path: Path) -> None:
    from tests.conftest import cli

    scenario, groups = prepared_seed(1, tmp_path)
    ls = cp.load_scenario(scenario, strategy="migrate", time_scale=TIME_SCALE)
    try:
        ls.wait_events_applied()
        cp.wait_for(lambda: bool(ls.workload_pods("text-generator")), 30, "text-generator pending")
        dump = tmp_path / "dump.yaml"
        result = cli("snapshot", "--write", dump, "--kubeconfig", cp.kubeconfig)
        assert result.exit_code == 0, result.output
        from_file = cli_json("plan", dump, "--groups", groups)
        live = cli_json("plan", "--kubeconfig", cp.kubeconfig, "--groups", groups)
    finally:
        ls.stop()
    for d in (from_file, live):
        d.get("stats", {}).pop("plan_ms", None)
    assert from_file == live
    assert [p["node"] for p in live["placements"]] == ["gpu-0"] and len(live["moves"]) == 3


def test_a_chart_install_stopped_halfway_does_not_fail_the_next_test(cp: ControlPlane) -> None:
    """What a test killed inside its install leaves at cluster scope (the chart's PriorityClass, RBAC,
    CRDs: they come first in helm's order) is cleaned before the next test, whose install would
    otherwise fail with AlreadyExists, as sixteen tests once did after one such test on a worker."""
    from kubernetes import utils  # type: ignore[import-untyped,unused-ignore]

    objects = render_chart("mr", "makeroom")
    kinds = {"PriorityClass", "ClusterRole", "CustomResourceDefinition"}
    stranded = [o for o in objects if o["kind"] in kinds]
    assert {o["kind"] for o in stranded} == kinds
    for obj in stranded:
        utils.create_from_dict(cp.api, obj)  # type: ignore[no-untyped-call,unused-ignore]
    cp.reset_between_tests()  # what the cp fixture does between two tests
    with installed_chart(cp) as inst:
        names = {(o["kind"], o["metadata"]["name"]) for o in inst.objects}
        assert {(o["kind"], o["metadata"]["name"]) for o in stranded} <= names
