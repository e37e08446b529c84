"""Benchmark of `makeroom run` on a real API server at Kubernetes' limits (docs/kube.md).

A control plane of etcd and kube-apiserver only (no scheduler, controller-manager or KWOK: nothing may
touch the objects) gets the 5,000-node, 150,000-pod cluster of `makeroom bench plan` created directly
(pods bound by spec.nodeName). `makeroom run --strategy evict` then starts against it; reported:
the time to list and sync its watch cache, its memory (VmRSS and VmHWM of the process), and for a few
trials the time from a pending GPU pod becoming unschedulable (its PodScheduled=False condition
written, as kube-scheduler would) to makeroom's first action for it (its Relocation record, a
resource in makeroom's namespace), as seen from outside and as makeroom's own histogram says.

    PYTHONPATH=e2e .venv/bin/python e2e/bench_kube.py [--nodes 5000] [--trials 3] [-o out.json]

Takes several minutes (creating 150,000 pods is most of it); not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from makeroom_e2e import Components, up
from makeroom_e2e.makeroom_run import makeroom_command, render_chart

from makeroom.bench.plan import Size, generate
from makeroom.kube.client import Api, ConnectOptions, KubeError, connect


def rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def proc_mib(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            out[line.split(":")[0]] = int(line.split()[1]) / 1024
    return out


def prepare(objects: list[dict[str, Any]]) -> tuple[list[int], list[dict[str, Any]]]:
    """spec.priority is the Priority admission plugin's to set: give pods a PriorityClass instead."""
    values = set()
    for o in objects:
        if o["kind"] == "Pod":
            p = o["spec"].pop("priority", 0)
            if p:
                values.add(p)
                o["spec"]["priorityClassName"] = f"bench-{p}"
            o.pop("status", None)
            for c in o["spec"]["containers"]:
                c.setdefault("image", "registry.invalid/none")
                req = c.get("resources", {}).get("requests", {})
                if "nvidia.com/gpu" in req:  # extended resources need limits too
                    c["resources"]["limits"] = {"nvidia.com/gpu": req["nvidia.com/gpu"]}
            for r in o["metadata"].get("ownerReferences") or ():
                r.setdefault("uid", "00000000-0000-0000-0000-000000000000")
    return sorted(values), objects


def create_all(api: Api, objects: list[dict[str, Any]], workers: int = 24) -> dict[str, float]:
    timings = {}
    paths: dict[str, Callable[[dict[str, Any]], str]] = {
        "Node": lambda o: "/api/v1/nodes",
        "Pod": lambda o: f"/api/v1/namespaces/{o['metadata']['namespace']}/pods",
        "PodDisruptionBudget": lambda o: (
            f"/apis/policy/v1/namespaces/{o['metadata']['namespace']}/poddisruptionbudgets"
        ),
        "ConfigMap": lambda o: f"/api/v1/namespaces/{o['metadata']['namespace']}/configmaps",
    }

    def create(o: dict[str, Any]) -> None:
        try:
            api.request("POST", paths[o["kind"]](o), body=o)
        except KubeError as exc:
            if exc.status != 409:
                raise
        if o["kind"] == "Node":
            name = o["metadata"]["name"]
            api.patch(f"/api/v1/nodes/{name}/status", {"status": o["status"]})
            # The TaintNodesByCondition admission plugin taints new nodes not-ready; with no
            # controller-manager to lift it, put back the taints the node is meant to have.
            api.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": o["spec"].get("taints")}})

    for kind in ("Node", "PodDisruptionBudget", "ConfigMap", "Pod"):
        batch = [o for o in objects if o["kind"] == kind]
        start = time.monotonic()
        with ThreadPoolExecutor(workers) as pool:
            for i, _ in enumerate(pool.map(create, batch, chunksize=64)):
                if i and i % 20000 == 0:
                    print(f"  {kind}: {i}/{len(batch)} ({time.monotonic() - start:.0f}s)", flush=True)
        timings[kind] = time.monotonic() - start
        print(f"created {len(batch)} {kind} in {timings[kind]:.1f}s", flush=True)
    return timings


def pending_gpu_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": "llm", "pod-template-hash": "5f7d8c9b6"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "llm-5f7d8c9b6",
                    "uid": "x",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "priorityClassName": "bench-1000",
            "nodeSelector": {"karpenter.sh/nodepool": "gpu-a10"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "main",
                    "image": "x",
                    "resources": {
                        "requests": {"cpu": "5", "memory": "20Gi", "nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
    }


def start_makeroom(workdir: Path, kubeconfig: Path, t: int) -> tuple[subprocess.Popen[bytes], int, Path]:
    port = 18080 + (os.getpid() + t) % 1000
    log_path = workdir / f"makeroom-{t}.log"
    command = [*makeroom_command(), "run", "--kubeconfig", str(kubeconfig), "--no-leader-elect"]
    command += ["--strategy", "evict", "--metrics-port", str(port), "--metrics-host", "127.0.0.1"]
    command += ["--no-metrics-auth"]  # read by this bench on loopback
    proc = subprocess.Popen(command, stdout=log_path.open("wb"), stderr=subprocess.STDOUT)
    return proc, port, log_path


def wait_log(proc: subprocess.Popen[bytes], log_path: Path, text: str, timeout: float) -> None:
    start = time.monotonic()
    while text not in log_path.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() - start > timeout:
            raise RuntimeError(f"no {text!r}:\n" + log_path.read_text(errors="replace")[-3000:])
        time.sleep(0.2)


def metric(port: int, name: str) -> str:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return "\n".join(line for line in text.splitlines() if line.startswith(name))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods-per-node", type=int, default=30)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("-o", "--output", type=Path, default=None)
    args = ap.parse_args()
    logging.getLogger("makeroom.kube").setLevel(logging.ERROR)  # polling for the record: 404 until it is
    size = Size(f"{args.nodes} nodes", args.nodes, args.pods_per_node, pending=0)
    classes, objects = prepare(generate(size))
    n_pods = sum(o["kind"] == "Pod" for o in objects)
    print(f"generated {args.nodes} nodes, {n_pods} pods", flush=True)
    result: dict[str, Any] = {"nodes": args.nodes, "pods": n_pods, "cpus": os.cpu_count()}
    cp = up(components=Components(controller_manager=False, scheduler=False, kwok=False, autoscaler=False))
    mr: subprocess.Popen[bytes] | None = None
    try:
        api, _ = connect(ConnectOptions(kubeconfig=str(cp.kubeconfig), qps=0, burst=1))
        for v in classes:
            api.request(
                "POST",
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                body={
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": f"bench-{v}"},
                    "value": v,
                },
            )
        for crd in render_chart("bench", "default"):  # the chart's CRDs: makeroom's records
            if crd["kind"] == "CustomResourceDefinition":
                api.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd)
        result["create_seconds"] = create_all(api, objects)
        del objects
        trials: list[dict[str, Any]] = []
        for t in range(args.trials):
            # One makeroom process per trial, so that each measures a cold pod on a quiet controller.
            mr, port, log_path = start_makeroom(cp.workdir, cp.kubeconfig, t)
            trial: dict[str, Any] = {}
            started = time.monotonic()
            wait_log(mr, log_path, "watch cache synced", 900)
            trial["cache_sync_seconds"] = time.monotonic() - started
            deadline = time.monotonic() + 300
            while float(metric(port, "makeroom_cache_build_seconds").split()[-1]) == 0.0:
                if time.monotonic() > deadline or mr.poll() is not None:
                    raise RuntimeError("no state built:\n" + log_path.read_text(errors="replace")[-3000:])
                time.sleep(0.2)
            trial["snapshot_build_seconds"] = float(metric(port, "makeroom_cache_build_seconds").split()[-1])
            trial["memory_after_sync_mib"] = proc_mib(mr.pid)
            name = f"llm-pending-{t}"
            api.request("POST", "/api/v1/namespaces/default/pods", body=pending_gpu_pod(name))
            time.sleep(3.0)  # let the creation reach makeroom's cache first: the trial times the condition
            condition = {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/5000 nodes are available: Insufficient cpu.",
                "lastTransitionTime": rfc3339(),
            }
            t0 = time.monotonic()
            api.patch(
                f"/api/v1/namespaces/default/pods/{name}/status", {"status": {"conditions": [condition]}}
            )
            seen = None
            record = f"/apis/makeroom.io/v1alpha1/namespaces/default/relocations/default.{name}"
            while time.monotonic() - t0 < 60:
                try:
                    api.get(record)
                except KubeError:
                    time.sleep(0.02)
                    continue
                seen = time.monotonic() - t0
                break
            trial["unschedulable_to_first_action_seconds"] = seen
            hist = metric(port, "makeroom_relocation_first_action_seconds")
            s_ = re.search(r"_sum (\S+)", hist)
            trial["makeroom_own_measure_seconds"] = float(s_.group(1)) if s_ else None
            trial["plan_latency"] = (
                metric(port, "makeroom_controller_reconcile_seconds_sum").split()[-1]
                + " s over "
                + metric(port, "makeroom_controller_reconcile_seconds_count").split()[-1]
                + " reconciliations"
            )
            trial["memory_end_mib"] = proc_mib(mr.pid)
            print(f"trial {t}: {json.dumps(trial)}", flush=True)
            trials.append(trial)
            api.request("DELETE", f"/api/v1/namespaces/default/pods/{name}", query={"gracePeriodSeconds": 0})
            mr.send_signal(signal.SIGTERM)
            mr.wait(60)
            keep = (args.output or Path("bench-kube.json")).with_suffix(f".makeroom-{t}.log")
            keep.write_bytes(log_path.read_bytes())
        mr = None
        result["trials"] = trials
        result["goals"] = {"memory_mib": 1536, "latency_s": 2.0}
    finally:
        if mr is not None and mr.poll() is None:
            mr.send_signal(signal.SIGTERM)
            mr.wait(30)
        cp.down()
    text = json.dumps(result, indent=1)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
