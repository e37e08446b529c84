"""Property-based tests on small generated clusters (hypothesis, derandomized, so every run checks the
same instances: 300 with one pending pod, 100 with three):

- every plan, of every search (the default, the per-pod heuristic, the per-pod exact search, the
  exact joint search), with one or several pending pods, is feasible: no node or new node over
  capacity, no group over its max, no victim of equal or higher priority, no protected victim, every
  victim with a destination it may use (never a new node of a group its pending pod could use), and
  its optimality is reported truthfully (its objective, a bound no better than it);
- with one pending pod, the per-pod heuristic's plan is as good as the per-pod exact one on the
  objective of issue 13 (pods placed, new-node cost and count, moves, moved pods' priorities), and
  both equal the exact joint search's optimum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from makeroom.model import DO_NOT_MOVE, OwnerKind, PodSpec, Resources
from makeroom.model.fit import static_fit
from makeroom.model.objects import MOVED_AT
from makeroom.model.state import ClusterState
from makeroom.planner import Policy, Proof, plan
from tests.builders.state import CPU_NODE, GPU_NODE, GPU_TAINT, GPU_TOLERATION
from tests.builders.state import StateBuilder as Cluster
from tests.planner.feasibility import check_feasible, objective

SETTINGS = settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class PodIdea:
    workload: int  # index into the instance's workload shapes
    node: int  # index into its nodes


@dataclass(frozen=True)
class Shape:
    cpu_quarters: int
    mem_gi: int
    gpu: int
    priority: int
    gpu_only: bool  # node selector: the gpu group
    tolerates: bool
    owner: OwnerKind
    protected: str  # "", "do-not-move", "local", "cooldown"


@dataclass(frozen=True)
class Instance:
    cpu_max: int
    gpu_max: int
    gpu_tainted: bool
    cpu_nodes: int
    gpu_nodes: int
    upcoming_cpu: bool
    shapes: tuple[Shape, ...]
    pods: tuple[PodIdea, ...]
    pending: tuple[Shape, ...]
    cpu_price: float
    gpu_price: float


shapes = st.builds(
    Shape,
    cpu_quarters=st.integers(2, 8),
    mem_gi=st.integers(0, 5),
    gpu=st.sampled_from([0, 0, 0, 0, 0, 1]),
    priority=st.sampled_from([0, 10, 100, 100, 500]),
    gpu_only=st.booleans(),
    tolerates=st.sampled_from([True, True, False]),
    owner=st.sampled_from([OwnerKind.REPLICA_SET] * 8 + [OwnerKind.DAEMON_SET, OwnerKind.NONE]),
    protected=st.sampled_from([""] * 9 + ["do-not-move", "local", "cooldown"]),
)
pending_shapes = st.builds(
    Shape,
    cpu_quarters=st.integers(4, 12),
    mem_gi=st.integers(1, 10),
    gpu=st.sampled_from([0, 1, 1]),
    priority=st.sampled_from([100, 1000, 1000, 1000, 5000]),
    gpu_only=st.booleans(),
    tolerates=st.just(True),
    owner=st.just(OwnerKind.REPLICA_SET),
    protected=st.just(""),
)


@st.composite
def instances(draw: st.DrawFn, pending: int = 1) -> Instance:
    cpu_max = draw(st.integers(1, 3))
    gpu_max = draw(st.integers(1, 3))
    cpu_nodes = draw(st.integers(1, cpu_max))
    gpu_nodes = draw(st.sampled_from([gpu_max, gpu_max, 1]))
    nodes = cpu_nodes + gpu_nodes
    kinds = draw(st.lists(shapes, min_size=1, max_size=3))
    pods = [
        PodIdea(k, n)
        for n in range(nodes)
        for k in draw(st.lists(st.integers(0, len(kinds) - 1), min_size=1, max_size=6))
    ]
    upcoming = draw(st.booleans()) and cpu_nodes < cpu_max
    return Instance(
        cpu_max,
        gpu_max,
        draw(st.booleans()),
        cpu_nodes,
        gpu_nodes,
        upcoming,
        tuple(kinds),
        tuple(pods),
        tuple(draw(st.lists(pending_shapes, min_size=pending, max_size=pending))),
        draw(st.sampled_from([0.0, 0.17, 0.6])),
        draw(st.sampled_from([0.0, 0.53, 0.9])),
    )


cpu_only_shapes = st.builds(
    Shape,
    cpu_quarters=st.integers(1, 8),
    mem_gi=st.integers(0, 4),
    gpu=st.just(0),
    priority=st.sampled_from([0, 10, 100, 100, 500]),
    gpu_only=st.just(False),
    tolerates=st.just(True),
    owner=st.sampled_from([OwnerKind.REPLICA_SET] * 8 + [OwnerKind.DAEMON_SET]),
    protected=st.sampled_from([""] * 9 + ["do-not-move", "cooldown"]),
)
gpu_pending = st.builds(
    Shape,
    cpu_quarters=st.integers(6, 14),
    mem_gi=st.integers(2, 12),
    gpu=st.just(1),
    priority=st.sampled_from([1000, 1000, 200]),
    gpu_only=st.just(True),
    tolerates=st.just(True),
    owner=st.just(OwnerKind.REPLICA_SET),
    protected=st.just(""),
)


@st.composite
def squeezes(draw: st.DrawFn, pending: int = 1) -> Instance:
    """Issue 1966's shape: CPU-only replicas on GPU nodes, a GPU replica pending, CPU nodes with
    some room, groups at or below their max."""
    cpu_max = draw(st.integers(1, 3))
    gpu_max = draw(st.integers(1, 3))
    cpu_nodes = draw(st.integers(1, cpu_max))
    gpu_nodes = draw(st.sampled_from([gpu_max, gpu_max, max(1, gpu_max - 1)]))
    kinds = draw(st.lists(cpu_only_shapes, min_size=1, max_size=3))
    pods = [
        PodIdea(k, n)
        for n in range(cpu_nodes + gpu_nodes)
        for k in draw(
            st.lists(
                st.integers(0, len(kinds) - 1),
                min_size=4 if n >= cpu_nodes else 0,
                max_size=9 if n >= cpu_nodes else 5,
            )
        )
    ]
    return Instance(
        cpu_max,
        gpu_max,
        draw(st.booleans()),
        cpu_nodes,
        gpu_nodes,
        draw(st.booleans()) and cpu_nodes < cpu_max,
        tuple(kinds),
        tuple(pods),
        tuple(draw(st.lists(gpu_pending, min_size=pending, max_size=pending))),
        draw(st.sampled_from([0.0, 0.17, 0.6])),
        draw(st.sampled_from([0.0, 0.53, 0.9])),
    )


def mixed(pending: int) -> st.SearchStrategy[Instance]:
    return st.one_of(instances(pending), squeezes(pending))


def _spec(shape: Shape) -> PodSpec:
    req = {"cpu": f"{shape.cpu_quarters * 250}m", "memory": f"{shape.mem_gi}Gi"}
    if shape.gpu:
        req["nvidia.com/gpu"] = str(shape.gpu)
    return PodSpec(
        Resources.parse(req),
        shape.priority,
        node_selector=(("makeroom.io/group", "gpu"),) if shape.gpu_only or shape.gpu else (),
        tolerations=(GPU_TOLERATION,) if shape.tolerates else (),
        local_storage=shape.protected == "local",
    )


NOW = 10_000.0


def build(inst: Instance) -> ClusterState:
    c = Cluster(
        [
            Cluster.group("cpu", CPU_NODE, inst.cpu_max, inst.cpu_price),
            Cluster.group(
                "gpu", GPU_NODE, inst.gpu_max, inst.gpu_price, (GPU_TAINT,) if inst.gpu_tainted else ()
            ),
        ]
    )
    names = [c.node("cpu") for _ in range(inst.cpu_nodes)] + [c.node("gpu") for _ in range(inst.gpu_nodes)]
    if inst.upcoming_cpu:
        c.node("cpu", ready=False)
    specs = [_spec(s) for s in inst.shapes]
    state = c.state
    for idea in inst.pods:
        shape, spec = inst.shapes[idea.workload], specs[idea.workload]
        node = state.nodes[names[idea.node]]
        slot = state.slot_of[node.name]
        if static_fit(spec, node) is not None:
            continue
        if not np.all(state.alloc[slot] - state.used[slot] >= state.requests_of(spec)):
            continue
        annotations = {}
        if shape.protected == "do-not-move":
            annotations[DO_NOT_MOVE] = "true"
        elif shape.protected == "cooldown":
            annotations[MOVED_AT] = str(NOW - 60)
        c.pod(f"w{idea.workload}", {}, node=node.name, owner=shape.owner, annotations=annotations, spec=spec)
    for i, shape in enumerate(inst.pending):
        c.pod(f"pending{i}", {}, spec=_spec(shape))
    return state


POLICY = Policy(now=NOW)
PER_POD = Policy(now=NOW, joint=False)
PER_POD_EXACT = Policy(now=NOW, exact=True, joint=False)
EXACT = Policy(now=NOW, exact=True)


@SETTINGS
@given(mixed(pending=1))
def test_heuristic_is_feasible_and_as_good_as_exact(inst: Instance) -> None:
    state = build(inst)
    fast = plan(state, PER_POD)
    per_pod = plan(state, PER_POD_EXACT)
    joint = plan(state, EXACT)
    default = plan(state, POLICY)
    for policy, result in ((PER_POD, fast), (PER_POD_EXACT, per_pod), (EXACT, joint), (POLICY, default)):
        check_feasible(state, result, policy)
    assert joint.optimality is not None and joint.optimality.proof is Proof.OPTIMAL
    best = objective(state, joint)
    assert objective(state, per_pod) == best, (per_pod.to_json(), joint.to_json())
    assert objective(state, fast) == best, (fast.to_json(), joint.to_json())
    assert objective(state, default) == best, (default.to_json(), joint.to_json())


@settings(SETTINGS, max_examples=100)  # several pods at once: the joint oracle's 300 clusters do more
@given(mixed(pending=3))
def test_plans_for_several_pending_pods_are_feasible(inst: Instance) -> None:
    state = build(inst)
    joint = plan(state, EXACT)
    check_feasible(state, joint, EXACT)
    best = objective(state, joint)
    for policy in (POLICY, PER_POD, PER_POD_EXACT, Policy(now=NOW, max_moves_in_flight=2)):
        result = plan(state, policy)
        check_feasible(state, result, policy)
        if policy.max_moves_in_flight is not None:
            assert len(result.moves) <= policy.max_moves_in_flight
        else:
            assert objective(state, result) >= best, "a search beats the exact joint optimum"
