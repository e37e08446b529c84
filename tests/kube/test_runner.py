"""The loop of `makeroom run` on the in-memory API server: it acts as the leader, not as a standby,
and a dry run writes nothing."""

from __future__ import annotations

import logging
import time

import pytest

from makeroom.controller import ConsolidationConfig, ControllerConfig, Strategy
from makeroom.controller.reasons import UNPRICED
from makeroom.controller.steps import RetryKey
from makeroom.kube.client import Api, RateLimiter
from makeroom.kube.dryrun import DryRunCluster
from makeroom.kube.runner import Runner, RunOptions
from makeroom.snapshot import GroupConfig, GroupSpec
from tests.builders.kube import NS, namespace, node, pod, pod_path
from tests.kube.fake import FakeApiServer

GROUPS = GroupConfig((GroupSpec("cpu", 1, 1), GroupSpec("gpu", 1, 1)))


def cluster() -> FakeApiServer:
    """seed-1 in small: a GPU node whose CPU two low-priority pods hold, room for them on the CPU node,
    and a pending GPU pod."""
    server = FakeApiServer()
    server.put(*namespace())
    server.put("/api/v1/nodes/cpu-0", node("cpu-0", "cpu"))
    gpu = node("gpu-0", "gpu")
    gpu["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    server.put("/api/v1/nodes/gpu-0", gpu)
    for i in range(2):
        server.put(pod_path(f"w{i}"), pod(f"w{i}", "gpu-0", cpu="2"))
    p = pod("p", None, cpu="3", priority=100)
    p["metadata"]["labels"] = {"app": "big", "pod-template-hash": "h2"}
    p["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "big-h2", "controller": True}]
    p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    server.put(pod_path("p"), p)
    server.put(
        f"/apis/apps/v1/namespaces/{NS}/deployments/web",
        {"kind": "Deployment", "metadata": {"name": "web", "namespace": NS}, "spec": {"replicas": 2}},
    )
    return server


def runner(server: FakeApiServer, **kw: object) -> Runner:
    api = Api(server, RateLimiter(0, 1), sleep=lambda s: None)
    opts = RunOptions(
        config=ControllerConfig(strategy=Strategy.EVICT, consolidation=ConsolidationConfig(enabled=False)),
        groups=GROUPS,
        metrics_port=None,
        leader_elect=False,
        **kw,  # type: ignore[arg-type]
    )
    r = Runner(api, opts)
    for inf in r.cache.informers.values():
        inf.relist()
    return r


def writes(server: FakeApiServer) -> list[tuple[str, str]]:
    return [(m, p) for m, p, _ in server.calls if m != "GET"]


def test_the_leader_starts_a_relocation() -> None:
    server = cluster()
    r = runner(server)
    r.once()
    (record,) = [o for path, o in server.objects.items() if "/relocations/" in path]
    assert record["metadata"]["namespace"] == "default"  # makeroom's own namespace, not the pod's
    assert record["spec"]["pod"] == f"{NS}/p" and record["spec"]["node"] == "gpu-0"
    pending = server.objects[pod_path("p")]["metadata"]["annotations"]
    assert not any(k.startswith("makeroom.io/") for k in pending)
    assert r.metrics.in_flight._value.get() == 1
    assert r.metrics.relocations.labels(outcome="started")._value.get() == 1
    assert any(p.endswith("/eviction") for _, p in writes(server))


def test_a_standby_changes_nothing() -> None:
    server = cluster()
    r = runner(server)
    r.may_act = lambda: False  # type: ignore[method-assign]
    r.kube.may_act = r.may_act
    r.once()
    assert writes(server) == []
    assert r.controller is None


def test_a_dry_run_writes_nothing_and_reports_the_plan() -> None:
    server = cluster()
    r = runner(server, dry_run=True)
    r.once()
    assert writes(server) == []
    assert isinstance(r.port, DryRunCluster)
    assert {w.verb for w in r.port.would} >= {"annotate", "nominate", "evict"}
    assert r.last_plan is not None and [p.node for p in r.last_plan.placements] == ["gpu-0"]


def count(r: Runner, text: str) -> float:
    """A sample's value from the /metrics text of the runner's registry."""
    for line in r.metrics.render().decode().splitlines():
        if line.startswith(text + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{text} not exported")


def test_metrics_count_each_move_once_and_time_planning_apart_from_the_loop() -> None:
    server = cluster()
    r = runner(server)
    r.once()
    for inf in r.cache.informers.values():  # what the watch would have brought in the meantime
        inf.relist()
    r.once()  # the relocation goes on: its victims are already marked, nothing is counted twice
    marks = [
        path
        for method, path, body in server.calls
        if method == "PATCH"
        and isinstance(body, dict)
        and ((body.get("metadata") or {}).get("annotations") or {}).get("makeroom.io/victim-of")
    ]
    assert marks and count(r, "makeroom_controller_moves_total") == len(marks) == len(set(marks))
    evictions = sum(1 for m, p, _ in server.calls if m == "POST" and p.endswith("/eviction"))
    assert count(r, "makeroom_controller_evictions_total") == evictions
    assert count(r, 'makeroom_api_actions_total{verb="evict"}') == evictions
    assert count(r, 'makeroom_controller_plan_seconds_count{kind="relocation"}') == 1
    assert count(r, "makeroom_controller_reconcile_seconds_count") == 2
    plan = count(r, 'makeroom_controller_plan_seconds_sum{kind="relocation"}')
    assert 0 < plan <= count(r, "makeroom_controller_reconcile_seconds_sum")


def test_a_dry_run_plans_with_the_policy_of_the_real_run() -> None:
    """A pod in its backoff after a roll-back is not planned for by the real run: the dry run's log of
    the plan leaves it out too (it used to build a policy of its own)."""
    server = cluster()
    r = runner(server, dry_run=True)
    r.once()
    assert r.controller is not None and r.last_plan is not None and r.last_plan.placements
    r.controller.steps.back_off(RetryKey.pod(f"{NS}/p"), r.kube.now())
    r.once()
    assert r.last_plan.placements == ()


def unpriced_events(server: FakeApiServer) -> list[dict[str, object]]:
    return [
        body
        for method, path, body in server.calls
        if method == "POST" and path.endswith("/events") and body["reason"] == "ConsolidationUnpriced"
    ]


def test_consolidation_without_prices_is_said_once_in_the_log_an_event_and_a_gauge(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = cluster()
    r = runner(server, pod="makeroom-7f9c")
    r.opts.config = ControllerConfig(strategy=Strategy.EVICT)  # consolidation on, as by default
    with caplog.at_level(logging.WARNING, logger="makeroom"):
        r.once()
        r.once()
    assert [m.getMessage() for m in caplog.records].count(UNPRICED) == 1
    (event,) = unpriced_events(server)
    assert event["type"] == "Warning" and event["message"] == UNPRICED
    assert event["involvedObject"] == {
        "kind": "Pod",
        "name": "makeroom-7f9c",
        "apiVersion": "v1",
        "namespace": "default",
    }
    assert count(r, "makeroom_consolidation_unpriced") == 1


def test_priced_groups_or_consolidation_off_say_nothing() -> None:
    priced = GroupConfig((GroupSpec("cpu", 1, 1, 0.2), GroupSpec("gpu", 1, 1, 1.0)))
    for config, groups in [
        (ControllerConfig(strategy=Strategy.EVICT), priced),
        (ControllerConfig(strategy=Strategy.EVICT, consolidation=ConsolidationConfig(enabled=False)), GROUPS),
    ]:
        server = cluster()
        r = runner(server, pod="makeroom-7f9c")
        r.opts.config, r.cache.groups = config, groups
        r.once()
        assert not unpriced_events(server)
        assert count(r, "makeroom_consolidation_unpriced") == 0


def test_a_long_round_that_makes_api_calls_is_alive_and_a_silent_one_is_not() -> None:
    """Issue 20: a round slowed by thousands of calls (a tenant's marks, the rate limit) read as a stall,
    and the kubelet restarted makeroom in a loop; now a stall is a loop that neither starts a round nor
    gets an answer (or an error) from the API server."""
    r = runner(cluster())
    long_ago = time.monotonic() - 3600
    r.heartbeat = r.progress = long_ago
    assert not r.healthy()
    r.kube.deployment_of(f"{NS}/w0")  # any API call, answered or not, is progress
    assert r.healthy()


def test_run_imports_or_tools_before_its_first_round(monkeypatch: pytest.MonkeyPatch) -> None:
    """Paid in the round of the first pod that waits, OR-Tools' import (seconds under load) let
    Karpenter launch the node seed 3's relocation makes needless: run takes it before any round."""
    import makeroom.kube.runner as runner_module

    seen: list[str] = []
    r = runner(cluster())

    def imported() -> bool:
        seen.append("import")
        return True

    def round_once() -> None:
        seen.append("round")
        r.stop.set()

    monkeypatch.setattr(runner_module, "exact_available", imported)
    monkeypatch.setattr(r, "once", round_once)
    assert r.run() == 0
    assert seen[:2] == ["import", "round"]
