"""The cluster-autoscaler's expanders as makeroom models them (issue 22, item 2): the price
expander's score (expander/price/price.go, preferred.go) and the priority expander's priorities from
its ConfigMap (expander/priority/priority.go)."""

from __future__ import annotations

import pytest

from makeroom.errors import Problem
from makeroom.model.expander import (
    GPU_UNFITNESS,
    group_priorities,
    pod_price,
    preferred_cpu,
    price_score,
)
from makeroom.model.resources import Resources
from makeroom.snapshot.groups import read_priority_expander

REPLICA = pod_price(Resources.parse({"cpu": "2", "memory": "4Gi"}))


def test_a_gpu_group_loses_to_a_cpu_group_even_when_cheaper() -> None:
    cpu = price_score(0.34, 1, REPLICA, 8.0, False, 5)
    gpu = price_score(0.05, 1, REPLICA, 8.0, True, 5)
    assert cpu < gpu
    assert gpu == pytest.approx(GPU_UNFITNESS * price_score(0.05, 1, REPLICA, 2.0, False, 5))


def test_the_cheaper_of_two_cpu_groups_of_one_size_wins_and_the_preferred_size_counts() -> None:
    assert price_score(0.30, 1, REPLICA, 8.0, False, 50) < price_score(0.40, 1, REPLICA, 8.0, False, 50)
    # 50 nodes: 8 CPUs preferred; a 64-CPU node at the same price per CPU scores worse
    assert preferred_cpu(50) == 8.0 and preferred_cpu(2) == 1.0 and preferred_cpu(1000) == 32.0
    assert price_score(0.34, 1, REPLICA, 8.0, False, 50) < price_score(2.72, 1, REPLICA, 64.0, False, 50)
    # more nodes of an ill-fitting size weigh its unfitness less
    # (pods priced as their nodes: money spent exactly as well, the unfitness alone differs)
    one = price_score(0.34, 1, 0.34, 32.0, False, 5)
    many = price_score(0.34, 20, 0.34 * 20, 32.0, False, 5)
    assert one == pytest.approx(16.0) and 1.0 < many < one


def test_pod_prices_follow_their_requests() -> None:
    small, gpu = pod_price(Resources.parse({"cpu": "1"})), pod_price(Resources.parse({"nvidia.com/gpu": "1"}))
    assert small == pytest.approx(0.033174) and gpu == pytest.approx(0.35)


def test_priorities_are_found_anywhere_in_the_name_highest_wins() -> None:
    groups = ["eks-cpu-abc", "eks-gpu-a10", "spot-gpu", "other"]
    rules = {10: [".*gpu.*"], 50: ["^eks-gpu"], 1: ["cpu"], -5: ["other"]}
    assert group_priorities(rules, groups) == {"eks-cpu-abc": 1, "eks-gpu-a10": 50, "spot-gpu": 10}


def test_the_configmap_is_read_or_refused_at_its_key_path() -> None:
    problems: list[Problem] = []
    cm = {"data": {"priorities": "10:\n  - .*cpu.*\n50:\n  - gpu\n"}}
    assert read_priority_expander(cm, "items[4]", problems) == {10: [".*cpu.*"], 50: ["gpu"]}
    assert problems == []
    for text, path in (("nope", "items[4].data.priorities"), ('10: ["("]', "items[4].data.priorities.10")):
        found: list[Problem] = []
        read_priority_expander({"data": {"priorities": text}}, "items[4]", found)
        assert [p.path for p in found] == [path]


def test_a_dump_with_the_priority_configmap_gives_the_state_its_priorities() -> None:
    from makeroom.bench.midsize import midsize
    from makeroom.errors import InputError
    from makeroom.snapshot import state_from_objects
    from makeroom.snapshot.export import autoscaler_status_object, objects_of_state

    state = midsize(0).state
    objects = [*objects_of_state(state), autoscaler_status_object(state)]
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cluster-autoscaler-priority-expander", "namespace": "kube-system"},
        "data": {"priorities": "100:\n  - ^gpu-b$\n10:\n  - cpu\n"},
    }
    assert state_from_objects(objects, source="dump").expander_priorities is None  # the groups' order
    read = state_from_objects([*objects, cm], source="dump")
    assert read.expander_priorities == {"gpu-b": 100, "cpu": 10}
    broken = {**cm, "data": {"priorities": "high: [cpu]"}}
    with pytest.raises(InputError) as err:
        state_from_objects([*objects, broken], source="dump")
    assert "dump: items[" in str(err.value) and "data.priorities.high" in str(err.value)
    # the cluster's own (the controller's cache): said, and gone on without; the autoscaler refuses
    # the whole configuration and filters nothing, so no group is sure to win
    skipped: list[Problem] = []
    assert state_from_objects([*objects, broken], source="c", skipped=skipped).expander_priorities == {}
    assert [p.path.endswith("data.priorities.high") for p in skipped] == [True]
