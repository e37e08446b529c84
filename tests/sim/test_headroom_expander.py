"""The keeper follows the autoscaler's expander as consolidation does (docs/headroom.md, "What a round
does"): in the simulator, with least-waste, a CPU-only pod moved off a GPU node to wait for a new CPU
node got a new GPU node instead (the GPU node's shape wasted less), so the keeper bought a GPU node for
a CPU pod and put it back on a GPU node. Now it counts on no new node the expander might not give."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from makeroom.controller import Strategy
from makeroom.scenario import parse_scenario
from makeroom.sim.runs import build
from tests.builders.scenario import kinds

BURST_AT = 600.0

SCENARIO = """
version: 1
name: headroom-expander
duration: 20m
node_groups:
  - name: cpu
    capacity: {cpu: "16", memory: 64Gi, pods: 110}
    min: 1
    max: 3
    initial: 1
    price_per_hour: 0.5
    provision_time: 3m
  - name: gpu
    capacity: {cpu: "8", memory: 32Gi, pods: 110, nvidia.com/gpu: 1}
    min: 1
    max: 3
    initial: 1
    price_per_hour: 1.2
    provision_time: 4m
workloads:
  - {name: batch, replicas: 1, priority: 100, requests: {cpu: "16", memory: 60Gi}, placement: {cpu: 1}}
  - name: api
    replicas: 3
    priority: 100
    requests: {cpu: "1", memory: 2Gi}
    pdb: {max_unavailable: 1}
    startup_time: 20s
    termination_grace: 30s
    placement: {gpu-0: 3}
  - name: text-model
    replicas: 0
    priority: 1000
    requests: {cpu: "6", memory: 24Gi, nvidia.com/gpu: 1}
    startup_time: 90s
events:
  - {at: 10m, scale: {workload: text-model, replicas: 1}}
controller:
  strategy: headroom
  headroom:
    targets: [{group: gpu, count: 1, for: {workload: text-model}}]
    max_price_per_hour: 0.5
"""


def run(expander: str) -> tuple[Any, Any]:
    data = yaml.safe_load(SCENARIO)
    data["autoscaler"] = {"expander": expander}
    sim = build(parse_scenario(data, "headroom-expander.yaml"), Strategy.HEADROOM)
    return sim, sim.run()


def gpu_nodes_for_cpu_pods(result: Any) -> list[str]:
    """The API pods scheduled onto a GPU node during the run (the initial placement is no event)."""
    return [
        e["pod"]
        for e in kinds(result, "pod_scheduled")
        if str(e["pod"]).startswith("api-") and str(e["node"]).startswith("gpu-")
    ]


@pytest.mark.parametrize("expander", ["least-waste", "random"])
def test_the_keeper_buys_no_gpu_node_for_a_cpu_pod(expander: str) -> None:
    sim, result = run(expander)
    before_burst = [e for e in kinds(result, "scale_up") if e["t"] < BURST_AT]
    assert before_burst == [], "a node bought before any GPU replica came"
    assert gpu_nodes_for_cpu_pods(result) == []
    assert kinds(result, "keeping_room_started") == []
    record = sim.world.custom[("kept-room", "gpu.workload-text-model")]
    assert record["state"] == "short"
    assert f"{expander} expander might grow another group" in record["why"]  # `kubectl get headroom` says why
    assert result.data["workloads"]["api"]["min_ready"] == 3


def test_with_the_price_expander_the_keeper_waits_for_a_new_cpu_node() -> None:
    _, result = run("price")
    assert [(e["t"] < BURST_AT, e["group"]) for e in kinds(result, "scale_up")] == [(True, "cpu")]
    assert gpu_nodes_for_cpu_pods(result) == []
    text_model = result.data["workloads"]["text-model"]
    assert text_model["ready_at_end"] == 1 and text_model["time_to_ready_s"] <= 1.1 * 90
