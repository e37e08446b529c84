"""The headroom pass (planner/keep_room.py), pure: what it counts, whom it moves, where to."""

from __future__ import annotations

from makeroom.model import DisruptionBudget, Expander, OwnerKind, Resources, Workload
from makeroom.planner.keep_room import KeepPolicy, Wanted, default_targets, keep_room
from tests.builders.state import CPU_NODE, StateBuilder

GPU = {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "1"}
MODEL = {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "1"}
API = {"cpu": "1", "memory": "2Gi"}


def cluster(
    api_on_gpu: int = 3, api_on_cpu: int = 2, gpu_nodes: int = 1, cpu_price: float = 0.17
) -> StateBuilder:
    c = StateBuilder(
        [
            StateBuilder.group("cpu", CPU_NODE, max=3, price=cpu_price),
            StateBuilder.group("gpu", GPU, max=2, price=1.2),
        ]
    )
    cpu = c.node("cpu")
    gpus = [c.node("gpu") for _ in range(gpu_nodes)]
    api = c.fill("api", API, 100, cpu, api_on_cpu)
    for g in gpus:
        api += c.fill("api", API, 100, g, api_on_gpu)
    model = c.pod("model", MODEL, 1000)  # pending: the shape only
    c.state.remove_pod(model)
    c.state.workloads["api"] = Workload("api", api[0].spec, len(api), pdb=DisruptionBudget(max_unavailable=1))
    c.state.workloads["model"] = Workload("model", model.spec, 0)
    return c


def want(count: int = 1) -> Wanted:
    return Wanted("gpu.model", "gpu", count, workload="model")


def test_it_counts_the_room_and_moves_the_fewest_cpu_pods_to_cpu_room() -> None:
    c = cluster()
    kept = keep_room(c.state, want(), KeepPolicy())
    assert (kept.count.free, kept.count.possible, kept.count.whom) == (0, 1, "model")
    assert kept.move is not None
    assert [(s.pod.node, s.to_node) for s in kept.move.shifts] == [("gpu-0", "cpu-0")]  # one is enough
    assert kept.move.scale_ups == {}


def test_room_already_there_moves_nothing() -> None:
    c = cluster(api_on_gpu=2)
    kept = keep_room(c.state, want(), KeepPolicy())
    assert kept.count.free == 1 and kept.move is None and kept.why_not == ""
    assert kept.count.holding == ("gpu-0",)


def test_a_cpu_pod_never_goes_to_a_gpu_node_even_with_room_there() -> None:
    c = cluster(api_on_gpu=3, api_on_cpu=4, gpu_nodes=2)  # CPU node full; the other GPU node has room
    kept = keep_room(c.state, want(2), KeepPolicy())
    assert kept.move is None
    assert "max_price_per_hour 0" in kept.why_not


def test_a_new_cpu_node_only_within_the_price() -> None:
    c = cluster(api_on_cpu=4)
    # the price expander surely grows the CPU group for an API pod (test_keep_room_expander.py)
    price = Expander.PRICE
    assert keep_room(c.state, want(), KeepPolicy(max_price_per_hour=0.16, expander=price)).move is None
    kept = keep_room(c.state, want(), KeepPolicy(max_price_per_hour=0.17, expander=price))
    assert kept.move is not None and kept.move.scale_ups == {"cpu": 1}
    assert kept.move.price_per_hour == 0.17


def test_gpu_pods_and_cooling_workloads_stay() -> None:
    c = cluster()
    other = c.pod("trainer", {"cpu": "1", "nvidia.com/gpu": "1"}, 10, "gpu-0")  # a GPU pod takes the GPU
    c.state.workloads["trainer"] = Workload("trainer", other.spec, 1)
    kept = keep_room(c.state, want(), KeepPolicy())
    assert kept.count.possible == 0  # CPU-only pods leaving would not free a GPU
    assert kept.move is None
    c.state.remove_pod(other)
    assert keep_room(c.state, want(), KeepPolicy(cooling=frozenset({"api"}))).move is None


def test_a_pod_no_surge_can_replace_is_not_moved() -> None:
    c = cluster()
    w = c.state.workloads["api"]
    c.state.workloads["api"] = Workload("api", w.spec, w.replicas, pdb=w.pdb, replicas_owner="hpa/api")
    kept = keep_room(c.state, want(), KeepPolicy())
    assert kept.move is None and "may move" in kept.why_not


def test_the_move_budget_and_a_target_beyond_the_group() -> None:
    c = cluster(gpu_nodes=2)
    assert "1 left this hour" in keep_room(c.state, want(2), KeepPolicy(budget=1)).why_not
    kept = keep_room(c.state, want(9), KeepPolicy())
    assert kept.count.possible == 2
    assert kept.move is not None and kept.move.gain == 2  # as much as the group can ever hold


def test_requests_and_default_targets() -> None:
    c = cluster(api_on_gpu=2)
    by_requests = Wanted("gpu.requests", "gpu", 1, requests=Resources.parse(MODEL))
    assert keep_room(c.state, by_requests, KeepPolicy()).count.free == 1
    assert default_targets(c.state) == [Wanted("gpu.model", "gpu", 1, workload="model")]
    nobody = keep_room(c.state, Wanted("gpu.x", "gpu", 1, priority_class="nobody"), KeepPolicy())
    assert nobody.move is None and nobody.why_not == "no GPU workload matches"


def test_daemon_set_pods_stay() -> None:
    c = cluster(api_on_gpu=0)
    c.pod("agent", {"cpu": "3"}, 0, "gpu-0", owner=OwnerKind.DAEMON_SET)
    kept = keep_room(c.state, want(), KeepPolicy())
    assert kept.count.free == 0 and kept.move is None


def test_of_two_nodes_where_one_move_frees_the_room_the_smaller_pod_moves() -> None:
    """gpu-0 and gpu-1 each hold a 3-core pod, gpu-0's with four times the memory; either leaving
    keeps room for the model: the smaller moves, it takes less of the CPU nodes while the room is
    kept (gpu-0 came first by name before)."""
    c = StateBuilder(
        [
            StateBuilder.group("cpu", CPU_NODE, max=3, price=0.17),
            StateBuilder.group("gpu", GPU, max=2, price=1.2),
        ]
    )
    c.node("cpu")
    gpu0, gpu1 = c.node("gpu"), c.node("gpu")
    model = {"cpu": "6", "memory": "8Gi", "nvidia.com/gpu": "1"}
    (big,) = c.fill("big", {"cpu": "3", "memory": "8Gi"}, 100, gpu0, 1)
    (small,) = c.fill("small", {"cpu": "3", "memory": "2Gi"}, 100, gpu1, 1)
    shape = c.pod("model", model, 1000)
    c.state.remove_pod(shape)
    c.state.workloads["model"] = Workload("model", shape.spec, 0)
    for w, p in (("big", big), ("small", small)):
        c.state.workloads[w] = Workload(w, p.spec, 1)
    kept = keep_room(c.state, want(), KeepPolicy())
    assert kept.move is not None
    assert [s.pod.workload for s in kept.move.shifts] == ["small"]
