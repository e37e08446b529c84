"""Property-based tests on small generated clusters (hypothesis, derandomized, so every run checks the
same instances):

- every plan, heuristic or exact, with one or several pending pods, is feasible: no node or new node
  over capacity, no group over its max, no victim of equal or higher priority, no protected victim,
  every victim with a destination it may use (never a new node of a group its pending pod could use);
- with one pending pod, the default heuristic's plan is as good as the exact one on the objective
  (new-node cost, new nodes, victims, highest and summed victim priority, workloads touched).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from makeroom.model import DO_NOT_MOVE, OwnerKind, PodSpec, Resources
from makeroom.model.fit import label_fit, static_fit
from makeroom.model.objects import MOVED_AT
from makeroom.model.state import ClusterState
from makeroom.planner import Plan, Policy, not_movable, plan
from tests.builders.state import CPU_NODE, GPU_NODE, GPU_TAINT, GPU_TOLERATION
from tests.builders.state import StateBuilder as Cluster

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


def check_feasible(state: ClusterState, result: Plan, policy: Policy) -> None:
    """Apply the plan on paper and check every rule the spec and design.md state."""
    used = state.used.copy()
    groups = state.groups
    new_used: dict[tuple[str, int], np.ndarray] = {}
    moved = Counter(m.pod.key for m in result.moves)
    assert all(n == 1 for n in moved.values()), "a pod moves twice"
    pending_keys = {p.key for p in state.pending()}
    for m in result.moves:
        v = m.pod
        assert v.key not in pending_keys
        assert v.priority < m.for_pod.priority, f"{v.name} has priority >= {m.for_pod.name}'s"
        assert not_movable(v, policy) is None, f"{v.name} is protected"
        assert v.node == m.from_node
        r = state.requests_of(v.spec)
        used[state.slot_of[m.from_node]] -= r
        if m.to_node is not None:
            assert m.to_node != m.from_node
            node = state.nodes[m.to_node]
            if node.ready:
                assert static_fit(v.spec, node) is None
            else:
                assert label_fit(v.spec, node.labels, node.taints) is None
            used[state.slot_of[m.to_node]] += r
        else:
            g = groups[m.to_new_node_group or ""]
            assert label_fit(v.spec, g.node_labels(), g.taints) is None
            pspec = m.for_pod.spec
            p_could = label_fit(pspec, g.node_labels(), g.taints) is None and PodSpec.effective(
                pspec.requests
            ).fits_in(g.capacity)
            assert not p_could, f"{v.name} takes a new node of {g.name}, which {m.for_pod.name} could use"
            assert m.new_node_index is not None
            key = (g.name, m.new_node_index)
            new_used[key] = new_used.get(key, np.zeros_like(r)) + r
    for p in result.placements:
        r = state.requests_of(p.pod.spec)
        if p.node is not None:
            node = state.nodes[p.node]
            assert label_fit(p.pod.spec, node.labels, node.taints) is None
            used[state.slot_of[p.node]] += r
        else:
            assert p.new_node_group is not None and p.new_node_index is not None
            key = (p.new_node_group, p.new_node_index)
            new_used[key] = new_used.get(key, np.zeros_like(r)) + r
    over = np.any(used > state.alloc, axis=1) & state.alive
    before = np.any(state.used > state.alloc, axis=1)
    assert not np.any(over & ~before), "a node ends over its allocatable"
    for (group, _), vec in new_used.items():
        cap = state.index.vector(groups[group].capacity)
        assert np.all(vec <= cap), f"a new {group} node is over capacity"
    for group, n in result.scale_ups.items():
        assert len(state.nodes_of(group)) + n <= groups[group].max, f"{group} over its max"
    assert sum(result.scale_ups.values()) == len({k for k in new_used})
    placed = {p.pod.key for p in result.placements} | {u.pod.key for u in result.unplaceable}
    assert placed == pending_keys


def objective(state: ClusterState, result: Plan) -> tuple[float, ...]:
    prios = [m.pod.priority for m in result.moves]
    cost = sum(state.groups[g].price_per_hour * n for g, n in result.scale_ups.items())
    return (
        len(result.unplaceable),
        round(cost, 9),
        sum(result.scale_ups.values()),
        len(prios),
        max(prios, default=0),
        sum(prios),
        len({m.workload for m in result.moves}),
    )


POLICY = Policy(now=NOW)
EXACT = Policy(now=NOW, exact=True)


@SETTINGS
@given(mixed(pending=1))
def test_heuristic_is_feasible_and_as_good_as_exact(inst: Instance) -> None:
    state = build(inst)
    fast = plan(state, POLICY)
    exact = plan(state, EXACT)
    check_feasible(state, fast, POLICY)
    check_feasible(state, exact, EXACT)
    assert objective(state, fast) == objective(state, exact), (fast.to_json(), exact.to_json())


@SETTINGS
@given(mixed(pending=3))
def test_plans_for_several_pending_pods_are_feasible(inst: Instance) -> None:
    state = build(inst)
    for policy in (POLICY, EXACT, Policy(now=NOW, max_moves_in_flight=2)):
        result = plan(state, policy)
        check_feasible(state, result, policy)
        if policy.max_moves_in_flight is not None:
            assert len(result.moves) <= policy.max_moves_in_flight
