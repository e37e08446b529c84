"""The FGD protocol (bench fgd) on tiny clusters: the paper's fragmentation by hand, fit, makeroom's
relocations and the curves."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from makeroom.bench.fgd import Run, Workload, arrivals, bench, merge, run, shuffled
from makeroom.bench.fgd_room import Room
from makeroom.bench.fgd_score import (
    POLICIES,
    Cluster,
    Fgd,
    Shape,
    Typical,
    fragmentation,
    policy,
    score,
    typical,
)
from tests.conftest import cli

GIB = 2**30 * 1000  # milli-bytes
A = Shape(1000, GIB, 1, 500)  # half a GPU
B = Shape(2000, GIB)  # no GPU
C = Shape(1000, GIB, 2, 1000)  # two whole GPUs
SHAPES = ((A, 0.5), (B, 0.25), (C, 0.25))


def test_fragmentation_is_the_papers_definition_by_hand() -> None:
    # node 0: 8 cores free, GPUs 1000 and 300 free. A runs there, and only the 300 is of no use to
    # it; B uses no GPU (all 1300 are fragments to it); C needs two whole GPUs (all 1300).
    # node 1: half a core free: nothing with a core runs, all 1300 are fragments for every shape.
    cpu = np.asarray([8000, 500])
    gpu = np.asarray([[1000, 300], [1000, 300]])
    got = fragmentation(cpu, gpu, Typical.of(SHAPES))
    assert got.tolist() == pytest.approx([0.5 * 300 + 0.25 * 1300 + 0.25 * 1300, 1300.0])


def test_fgd_puts_a_shared_task_where_fragmentation_grows_least() -> None:
    c = Cluster.of([(8000, 8 * GIB, 2)])
    c.take(0, Shape(0, 0, 1, 400), (1,))  # free: 1000 and 600
    # on GPU 1 (600 -> 100): A 0.5 x 100, B and C 0.25 x 1100 each = 600;
    # on GPU 0 (1000 -> 500, 600): A runs on both, B and C 0.25 x 1100 each = 550: FGD takes GPU 0,
    # where best fit (the tightest GPU) takes GPU 1.
    assert Fgd(SHAPES, 1).choose(c, A) == (0, (0,))
    assert policy("best-fit", SHAPES, 1).choose(c, A) == (0, (1,))


def test_typical_shapes_cover_the_share_asked_most_frequent_first() -> None:
    shapes = [A] * 6 + [B] * 3 + [C]
    got = typical(shapes, coverage=0.9)
    assert [s for s, _ in got] == [Shape(A.cpu, 0, 1, 500), Shape(B.cpu, 0)]
    assert [p for _, p in got] == pytest.approx([6 / 9, 3 / 9])


def _workload(seed: int) -> Workload:
    rng = random.Random(seed)
    nodes = tuple(
        rng.choice([(16000, 64 * GIB, 0), (32000, 128 * GIB, 2), (24000, 96 * GIB, 4)]) for _ in range(8)
    )
    kinds = [Shape(4000, 8 * GIB), Shape(2000, 4 * GIB, 1, 300), Shape(6000, 8 * GIB, 1, 700),
             Shape(8000, 16 * GIB, 1, 1000), Shape(8000, 16 * GIB, 2, 1000)]  # fmt: skip
    tasks = tuple((rng.choice(kinds), rng.choice([0, 1000])) for _ in range(40))
    return Workload("test", nodes, tasks)


def _check_fit(r: Run, w: Workload) -> None:
    cpu = np.zeros(len(w.nodes), dtype=np.int64)
    gpu = np.zeros_like(r.c.gpu)
    for node, devices, shape, _ in r.where.values():
        cpu[node] += shape.cpu
        for d in devices:
            assert d < w.nodes[node][2], "a device the node does not have"
            gpu[node, d] += shape.share
    assert np.all(cpu <= [n[0] for n in w.nodes])
    assert np.all(gpu <= 1000)


@pytest.mark.parametrize("name", POLICIES)
def test_each_policy_places_a_task_only_where_it_fits(name: str) -> None:
    w = _workload(7)
    shapes = typical(s for s, _ in w.tasks)
    for makeroom in (False, True):
        r = Run(w, policy(name, shapes, len(w.nodes)), shapes, Room(w.nodes) if makeroom else None)
        for i, (shape, prio) in enumerate(w.tasks):
            r.arrive(i, shape, prio)
            _check_fit(r, w)
        if makeroom:
            assert r.room is not None  # its record of who is where agrees
            assert {(n, t) for n, on in r.room.on.items() for t in on} == {
                (n, t) for t, (n, *_) in r.where.items()
            }


def test_makeroom_moves_a_cpu_task_off_the_gpu_node_a_gpu_task_needs() -> None:
    # one GPU node whose cores a best-effort CPU task holds, one CPU node with room for it
    w = Workload(
        "t",
        ((8000, 64 * GIB, 2), (8000, 64 * GIB, 0)),
        ((Shape(6000, GIB), 0), (Shape(4000, GIB, 1, 1000), 1000)),
    )
    without = run(w, [0, 1], "gpu-packing", False, typical(s for s, _ in w.tasks))
    with_ = run(w, [0, 1], "gpu-packing", True, typical(s for s, _ in w.tasks))
    assert without["gpu_placed"] == 0
    assert with_["gpu_placed"] == 1 and with_["moves"] == 1 and with_["unplaced_tasks"] == 0


@pytest.mark.parametrize("seed", [1, 2])
def test_makeroom_never_unplaces_a_task_and_the_curves_are_monotone(seed: int) -> None:
    # Per arrival, makeroom only adds: a plan moves tasks, it never leaves one unplaced, and the task
    # it was made for is then placed. (Over a whole run, placing one task may change where later
    # ones go: on openb some seeds end with less GPU demand placed; docs/benchmarks.md.)
    w = _workload(seed)
    shapes = typical(s for s, _ in w.tasks)
    order = arrivals(w, seed, ratio=1.3)
    assert sum(w.tasks[t][0].gpu_milli for t in order) <= 1.3 * w.gpu_milli
    for name in POLICIES:
        r = Run(w, policy(name, shapes, len(w.nodes)), shapes, Room(w.nodes))
        placed: set[int] = set()
        for i, t in enumerate(order):
            got = r.arrive(i, *w.tasks[t])
            assert placed <= set(r.where)
            assert got == (i in r.where)
            placed = set(r.where)
        for makeroom in (False, True):
            curve = run(w, order, name, makeroom, shapes)["curve"]["unallocated_gpus"]
            assert all(b <= a for a, b in itertools.pairwise(curve))
            assert curve[0] == w.gpu_milli / 1000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policies", "fgd,random"], "--policies: expected some of default, best-fit, gpu-packing, fgd"),
        (["--seeds", "42-x"], "--seeds: expected a range such as 42-51"),
        (["--ratio", "0"], "--ratio: expected more than 0"),
        (["--picture", "curves.pdf"], "--picture: expected a file name ending in .png or .html"),
    ],
)
def test_bench_fgd_refuses_bad_options_before_reading_the_trace(args: list[str], message: str) -> None:
    result = cli("bench", "fgd", "no-such-dir", *args)
    assert result.exit_code == 2
    assert message in result.output


def test_bench_fgd_names_a_missing_trace() -> None:
    result = cli("bench", "fgd", "no-such-dir", "--seeds", "42")
    assert result.exit_code == 2
    assert "no-such-dir" in result.output and "expected a directory" in result.output


def test_results_of_split_runs_merge_into_the_whole() -> None:
    w = _workload(4)
    whole = bench(w, ["default", "fgd"], [1, 2])
    parts = [bench(w, ["default"], [1, 2]), bench(w, ["fgd"], [1]), bench(w, ["fgd"], [2])]
    merged = merge(parts)
    for got in (merged, whole):
        for runs in got["runs"].values():
            for r in runs:
                r.pop("wall_s"), r.pop("plan_s")
        for cmp in got["policies"].values():
            for variant in ("with", "without"):
                cmp[variant].pop("wall_s"), cmp[variant].pop("plan_s")
    assert merged == whole


def test_fgd_ties_between_identical_nodes_go_to_the_lowest_index() -> None:
    # the first node is taken and given back: its growth is computed again, alone, and must still tie
    c = Cluster.of([(8000, 8 * GIB, 2)] * 3)
    fgd = Fgd(SHAPES, 3)
    assert fgd.choose(c, A) == (0, (0,))
    c.take(0, A, (0,))
    fgd.changed(0)
    c.give(0, A, (0,))
    fgd.changed(0)
    assert fgd.choose(c, A) == (0, (0,))


def test_the_artifacts_fgd_score_is_the_sigmoid_of_the_growth_truncated() -> None:
    # 100 / (1 + e^(g/1000)), cut to an integer: 50.97, 50, 50.12, 49.99, 49.03, 48.98
    got = score(np.asarray([-39.0, 0.0, -5.0, 0.5, 39.0, 41.0, np.inf]))
    assert got.tolist() == [50, 50, 50, 49, 49, 48, 0]


# Two typical shapes on one GPU each: half a GPU, and a fifth of one. A task of a hundredth of a GPU
# on a free device grows the fragmentation by 0; on a device with 210 free it shrinks it by 5 (before:
# the 210 are of no use to the half, 0.5 x 210; after: 0.5 x 200, the fifth still fits).
HALF_FIFTH = ((Shape(1000, 0, 1, 500), 0.5), (Shape(1000, 0, 1, 200), 0.5))
SLIVER = Shape(1000, GIB, 1, 10)


def test_fgd_with_the_artifacts_scores_ties_growths_within_a_point_to_the_lowest_index() -> None:
    c = Cluster.of([(8000, 8 * GIB, 1), (8000, 8 * GIB, 1)])
    c.take(1, Shape(0, 0, 1, 790), (0,))
    assert Fgd(HALF_FIFTH, 2).choose(c, SLIVER) == (1, (0,))  # -5 is less than 0
    assert Fgd(HALF_FIFTH, 2, artifact=True).choose(c, SLIVER) == (0, (0,))  # both score 50


def test_fgd_with_the_artifacts_scores_takes_the_first_device_of_the_top_score() -> None:
    c = Cluster.of([(8000, 8 * GIB, 2)])
    c.take(0, Shape(0, 0, 1, 790), (1,))  # free: 1000 and 210
    assert Fgd(HALF_FIFTH, 1).choose(c, SLIVER) == (0, (1,))
    assert Fgd(HALF_FIFTH, 1, artifact=True).choose(c, SLIVER) == (0, (0,))


def test_fgd_with_the_artifacts_scores_still_picks_a_device_that_scores_zero() -> None:
    # a task that leaves nothing of use: the growth is large, the score 0, and it still goes somewhere
    c = Cluster.of([(8000, 8 * GIB, 8)])
    shapes = ((Shape(1000, 0, 8, 1000), 1.0),)
    assert Fgd(shapes, 1, artifact=True).choose(c, Shape(1000, GIB, 1, 10)) == (0, (0,))


@pytest.mark.parametrize(
    ("name", "loads", "task"),
    [
        # best-fit: 0.5 x 7,000 / 8,000 + 0.5 x 1,000 / 2,000 left, against 6,900 cores: 31.3 and 31.9
        ("best-fit", (None, Shape(100, 0)), Shape(1000, GIB, 1, 1000)),
        # GPU packing: a shared GPU with 150 or 120 free, both 1 whole tenth
        ("gpu-packing", (Shape(0, 0, 1, 850), Shape(0, 0, 1, 880)), Shape(1000, GIB, 1, 100)),
        # kube-scheduler's default: half a percent of CPU and memory used, 87.0 + 100 points against
        # 87.5 + 100, both 87 + 100 in whole points
        ("default", (Shape(40, 8 * GIB // 200), None), Shape(1000, GIB)),
    ],
)
def test_the_artifacts_integer_scores_tie_near_equal_nodes_to_the_lowest_index(
    name: str, loads: tuple[Shape | None, Shape | None], task: Shape
) -> None:
    # node 1 is the better by a fraction of a point: exact scores take it, the artifact's tie
    c = Cluster.of([(8000, 8 * GIB, 2), (8000, 8 * GIB, 2)])
    for node, load in enumerate(loads):
        if load is not None:
            c.take(node, load, (0,) * load.gpus)
    exact = policy(name, SHAPES, 2).choose(c, task)
    assert exact is not None and exact[0] == 1
    assert policy(name, SHAPES, 2, "artifact").choose(c, task) == (0, exact[1])


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--scores", "round", "--scores: expected one of exact, artifact, got 'round'"),
        ("--node-order", "random", "--node-order: expected one of trace, shuffled, got 'random'"),
    ],
)
def test_bench_fgd_refuses_an_unknown_setting(option: str, value: str, message: str) -> None:
    result = cli("bench", "fgd", "no-such-dir", option, value)
    assert result.exit_code == 2
    assert message in result.output


@pytest.mark.parametrize(("key", "value"), [("scores", "artifact"), ("node_order", "shuffled")])
def test_results_of_other_settings_do_not_merge(key: str, value: str) -> None:
    w = _workload(4)
    settings = {"scores": "exact", "node_order": "trace", key: value}
    other = bench(w, ["default"], [2], scores=settings["scores"], node_order=settings["node_order"])
    assert other[key] == value
    with pytest.raises(ValueError, match=f"results differ in {key}"):
        merge([bench(w, ["default"], [1]), other])


def test_the_shuffled_node_order_is_a_permutation_drawn_per_seed() -> None:
    w = _workload(5)
    orders = {seed: shuffled(w, seed).nodes for seed in range(6)}
    assert all(sorted(nodes) == sorted(w.nodes) for nodes in orders.values())
    assert orders[3] == shuffled(w, 3).nodes  # the same seed, the same order
    assert len(set(orders.values())) > 1
    assert shuffled(w, 3).tasks == w.tasks


def test_with_the_shuffled_order_a_tie_goes_to_the_first_node_drawn() -> None:
    # two nodes alike but for memory, which only the default profile reads: the other policies tie
    # them, so the task lands on whichever comes first in the order drawn for the seed
    small, large = (8000, 8 * GIB, 2), (8000, 9 * GIB, 2)
    w = Workload("t", (small, large), ((Shape(1000, GIB, 1, 500), 0),))
    firsts = set()
    for seed in range(8):
        nodes = shuffled(w, seed).nodes
        for name in ("best-fit", "gpu-packing", "fgd"):
            out = bench(w, [name], [seed], scores="artifact", node_order="shuffled")
            assert out["node_order"] == "shuffled" and out["scores"] == "artifact"
            r = Run(Workload("t", nodes, w.tasks), policy(name, SHAPES, 2, "artifact"), SHAPES)
            assert r.arrive(0, *w.tasks[0]) and r.where[0][0] == 0
        firsts.add(nodes[0])
    assert firsts == {small, large}
