"""The node scores of the FGD protocol (Weng et al., "Beware of Fragmentation", USENIX ATC '23), on a
fixed cluster whose GPUs are counted per device, as a GPU-sharing device plugin hands them out.

Pure: arrays in, a node and its devices out. Every policy answers the same question, ``choose``: of the
nodes a task fits on, which one, and which of its GPUs. Costs are "lower is better"; ties go to the
lowest node index (the authors' simulator takes the first node of an order drawn per run: the caller
orders the nodes, fgd.shuffled). Scores are exact by default; ``scores="artifact"`` computes them as
the authors' plugins do, kube-scheduler integers 0-100 truncated, so that near-equal nodes tie
(SCORES).

Fragmentation (the paper's section 3): for a task shape m and a node n, the node's unallocated GPU
thousandths that m could never use are fragments: all of them when m cannot run on n (too little CPU,
or too few devices with m's share free), else those on the devices that hold less than m's share. The
node's fragmentation is the expectation over the workload's typical shapes (the most frequent ones
that make up 95% of the tasks, as the authors' simulator takes them), and FGD places a task where that
expectation grows least. As in the authors' simulator, a task without GPUs counts every unallocated
GPU of the node as fragment (none of them is of use to it), and fit looks at CPU and GPUs only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

WHOLE = 1000  # thousandths of a GPU in a device
ABSENT = -1  # the free thousandths of a device slot a node does not have: no share fits there
COVERAGE = 0.95  # the typical shapes make up this share of the tasks (the authors' default)
MAX_SCORE = 100  # kube-scheduler's framework.MaxNodeScore
SCORES = ("exact", "artifact")  # a policy's score resolution: exact, or the artifact's integers


@dataclass(frozen=True, slots=True)
class Shape:
    """What a task asks for: ``gpus`` devices of ``share`` thousandths each (0 and 0: CPU only)."""

    cpu: int  # milli-cores
    memory: int  # milli-bytes
    gpus: int = 0
    share: int = 0

    @property
    def gpu_milli(self) -> int:
        return self.gpus * self.share


def typical(shapes: Iterable[Shape], coverage: float = COVERAGE) -> tuple[tuple[Shape, float], ...]:
    """The most frequent (CPU, GPUs, share) shapes, most frequent first, until they make up
    ``coverage`` of the tasks, with their frequencies among themselves (summing to 1)."""
    counts = Counter(Shape(s.cpu, 0, s.gpus, s.share) for s in shapes)
    total = sum(counts.values())
    chosen: list[tuple[Shape, int]] = []
    covered = 0
    for shape, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].cpu, kv[0].gpus, kv[0].share)):
        if covered >= coverage * total:
            break
        chosen.append((shape, n))
        covered += n
    return tuple((shape, n / covered) for shape, n in chosen)


@dataclass(frozen=True)
class Typical:
    """The typical shapes as arrays: those with GPUs, and the weight of those without."""

    cpu: Ints
    gpus: Ints
    share: Ints
    p: Floats
    p_cpu_only: float

    @classmethod
    def of(cls, shapes: Sequence[tuple[Shape, float]]) -> Typical:
        gpu = [(s, p) for s, p in shapes if s.gpus]
        return cls(
            np.asarray([s.cpu for s, _ in gpu], dtype=np.int64),
            np.asarray([s.gpus for s, _ in gpu], dtype=np.int64),
            np.asarray([s.share for s, _ in gpu], dtype=np.int64),
            np.asarray([p for _, p in gpu], dtype=np.float64),
            sum(p for s, p in shapes if not s.gpus),
        )


def fragmentation(cpu: Ints, gpu: Ints, shapes: Typical) -> Floats:
    """Expected fragmented GPU thousandths of each node (rows of ``cpu``: free milli-cores, ``gpu``:
    free thousandths per device slot, ABSENT where there is no device)."""
    free = np.clip(gpu, 0, None).astype(np.float64)
    total = free.sum(axis=1)
    usable = gpu[:, None, :] >= shapes.share[None, :, None]  # node, shape, device
    runs = (np.count_nonzero(usable, axis=2) >= shapes.gpus[None, :]) & (cpu[:, None] >= shapes.cpu[None, :])
    held = np.matmul(usable.astype(np.float64), free[:, :, None])[:, :, 0]  # on devices that hold it
    lost = np.where(runs, total[:, None] - held, total[:, None])
    return np.asarray(shapes.p_cpu_only * total + lost @ shapes.p, dtype=np.float64)


@dataclass
class Cluster:
    """Free resources of a fixed cluster, per node and per GPU device."""

    cpu_cap: Ints
    memory_cap: Ints
    gpu_cap: Ints  # devices per node
    cpu: Ints
    memory: Ints
    gpu: Ints  # (nodes, device slots): free thousandths, ABSENT where a node has fewer devices

    @classmethod
    def of(cls, nodes: Sequence[tuple[int, int, int]]) -> Cluster:
        """Empty nodes of (milli-cores, milli-bytes, GPUs)."""
        cpu = np.asarray([n[0] for n in nodes], dtype=np.int64)
        memory = np.asarray([n[1] for n in nodes], dtype=np.int64)
        count = np.asarray([n[2] for n in nodes], dtype=np.int64)
        slots = max(1, int(count.max(initial=0)))
        gpu = np.where(np.arange(slots)[None, :] < count[:, None], WHOLE, ABSENT).astype(np.int64)
        return cls(cpu.copy(), memory.copy(), count, cpu, memory, gpu)

    @property
    def gpu_milli(self) -> int:
        return int(self.gpu_cap.sum()) * WHOLE

    def fits(self, shape: Shape) -> Mask:
        ok = (self.cpu >= shape.cpu) & (self.memory >= shape.memory)
        if shape.gpus:
            ok &= (self.gpu >= shape.share).sum(axis=1) >= shape.gpus
        return ok

    def fits_on(self, node: int, shape: Shape) -> bool:
        return bool(
            self.cpu[node] >= shape.cpu
            and self.memory[node] >= shape.memory
            and int((self.gpu[node] >= shape.share).sum()) >= shape.gpus
        )

    def take(self, node: int, shape: Shape, devices: tuple[int, ...]) -> None:
        assert len(devices) == shape.gpus and self.fits_on(node, shape)
        self.cpu[node] -= shape.cpu
        self.memory[node] -= shape.memory
        for d in devices:
            assert self.gpu[node, d] >= shape.share, (node, d)
            self.gpu[node, d] -= shape.share

    def give(self, node: int, shape: Shape, devices: tuple[int, ...]) -> None:
        self.cpu[node] += shape.cpu
        self.memory[node] += shape.memory
        for d in devices:
            self.gpu[node, d] += shape.share


def tightest(gpu: Ints, shape: Shape) -> Ints:
    """Per node, the ``shape.gpus`` devices with the least room that still hold the share (best fit,
    the authors' default GPU selection), lowest slot first among equals; -1 where too few."""
    rows = gpu.shape[0]
    if shape.gpus == 0:
        return np.zeros((rows, 0), dtype=np.int64)
    room = np.where(gpu >= shape.share, gpu, np.iinfo(np.int64).max)
    order = np.argsort(room, axis=1, kind="stable")[:, : shape.gpus]
    enough = np.take_along_axis(room, order, axis=1) < np.iinfo(np.int64).max
    return np.where(enough, order, -1)


class Policy:
    """Where a task goes: the cost of each node it fits on (lower is better), then its devices there."""

    name = ""

    def __init__(self, artifact: bool = False) -> None:
        self.artifact = artifact  # scores as the authors' plugins compute them: integers 0-100

    def costs(self, c: Cluster, shape: Shape, nodes: Ints) -> Floats:
        raise NotImplementedError

    def devices(self, c: Cluster, shape: Shape, node: int) -> tuple[int, ...]:
        """The tightest devices that hold the share (the authors' default GPU selection)."""
        return tuple(int(d) for d in tightest(c.gpu[[node]], shape)[0])

    def changed(self, node: int) -> None:
        """The node's free resources changed (a policy that caches per node forgets it)."""

    def choose(self, c: Cluster, shape: Shape) -> tuple[int, tuple[int, ...]] | None:
        nodes = np.flatnonzero(c.fits(shape))
        if len(nodes) == 0:
            return None
        node = int(nodes[int(np.argmin(self.costs(c, shape, nodes)))])  # the first of equals
        return node, self.devices(c, shape, node)


class LeastAllocated(Policy):
    """kube-scheduler's default profile: NodeResourcesFit's LeastAllocated (CPU and memory, weight 1
    each) plus NodeResourcesBalancedAllocation (one minus half the gap between the two fractions
    used), each out of 100, GPUs not scored. With ``artifact``, as kube-scheduler computes them: each
    resource's free share in whole points, their mean in whole points, the balance truncated."""

    name = "default"

    def costs(self, c: Cluster, shape: Shape, nodes: Ints) -> Floats:
        cpu_free, mem_free = c.cpu[nodes] - shape.cpu, c.memory[nodes] - shape.memory
        cpu_cap, mem_cap = c.cpu_cap[nodes], np.maximum(c.memory_cap[nodes], 1)
        cpu_used = 1 - cpu_free / cpu_cap
        mem_used = 1 - mem_free / mem_cap
        balanced = MAX_SCORE * (1 - np.abs(cpu_used - mem_used) / 2)
        if self.artifact:
            points = (cpu_free * MAX_SCORE // cpu_cap + mem_free * MAX_SCORE // mem_cap) // 2
            return np.asarray(-(points + np.trunc(balanced)), dtype=np.float64)
        least = MAX_SCORE / 2 * ((1 - cpu_used) + (1 - mem_used))
        return np.asarray(-(least + balanced), dtype=np.float64)


class BestFit(Policy):
    """The node left with the least room: CPU and GPU thousandths left after the task, each over the
    largest node's, weighted one half each (the paper's baseline; the artifact divides by 128 cores and
    8 GPUs, openb's largest node). With ``artifact``, the artifact's score: (1 - that) x 100 truncated,
    so nodes within a hundredth tie."""

    name = "best-fit"

    def costs(self, c: Cluster, shape: Shape, nodes: Ints) -> Floats:
        cpu_left = (c.cpu[nodes] - shape.cpu) / max(1, int(c.cpu_cap.max()))
        gpu_free = np.clip(c.gpu[nodes], 0, None).sum(axis=1)
        gpu_left = (gpu_free - shape.gpu_milli) / max(1, int(c.gpu_cap.max()) * WHOLE)
        cost = 0.5 * cpu_left + 0.5 * gpu_left
        if self.artifact:
            return np.asarray(-np.trunc((1 - cost) * MAX_SCORE), dtype=np.float64)
        return np.asarray(cost, dtype=np.float64)


class GpuPacking(Policy):
    """GPU packing (the paper's baseline): a GPU task goes first where it shares a GPU already in use
    (the fullest), then to free GPUs of a node already in use (the fewest taken), then to an idle node
    (the one with the fewest GPUs). A task without GPUs scores the same everywhere. With
    ``artifact``, a shared GPU's free share counts in whole tenths, as the artifact's score does."""

    name = "gpu-packing"

    def costs(self, c: Cluster, shape: Shape, nodes: Ints) -> Floats:
        if shape.gpus == 0:
            return np.zeros(len(nodes))
        gpu = c.gpu[nodes]
        if shape.share < WHOLE:  # one device, the tightest that holds the share
            tight = np.where(gpu >= shape.share, gpu, WHOLE + 1).min(axis=1)
            whole_used = (tight == WHOLE).astype(np.int64) * shape.gpus
        else:
            tight = np.full(len(nodes), WHOLE)
            whole_used = np.full(len(nodes), shape.gpus)
        idle = (gpu == WHOLE).sum(axis=1) == c.gpu_cap[nodes]
        tier = np.where(whole_used == 0, 0, np.where(idle, 2, 1))
        if self.artifact:
            tight = tight * 100 // WHOLE // 10 * (WHOLE // 10)  # 100 - (free %) / 10 points
        within = np.where(tier == 0, tight / WHOLE, np.where(tier == 1, whole_used, c.gpu_cap[nodes]))
        return np.asarray(tier * 1000.0 + within, dtype=np.float64)


class Fgd(Policy):
    """Fragmentation gradient descent: the node, and on it the device for a shared task, where the
    expected fragmentation grows least. A node's fragmentation, and each shape's best growth on it,
    are kept until the node changes: a task changes one node, so each arrival computes little.

    With ``artifact``, the artifact's score: sigmoid(-growth / 1000) x 100 truncated (growths within
    some 40 thousandths tie), and for a shared task the first device with the top score."""

    name = "fgd"

    def __init__(self, shapes: Sequence[tuple[Shape, float]], nodes: int, artifact: bool = False) -> None:
        super().__init__(artifact)
        self.shapes = Typical.of(shapes)
        self.frag: Floats | None = None
        self.nodes = nodes
        self.cache: dict[Shape, tuple[Floats, Ints]] = {}

    def changed(self, node: int) -> None:
        if self.frag is not None:
            self.frag[node] = np.nan
        for growth, _ in self.cache.values():
            growth[node] = np.nan

    def node_frag(self, c: Cluster) -> Floats:
        if self.frag is None:
            self.frag = fragmentation(c.cpu, c.gpu, self.shapes)
        stale = np.flatnonzero(np.isnan(self.frag))
        if len(stale):
            self.frag[stale] = fragmentation(c.cpu[stale], c.gpu[stale], self.shapes)
        return self.frag

    def devices(self, c: Cluster, shape: Shape, node: int) -> tuple[int, ...]:
        self.costs(c, shape, np.asarray([node]))
        return tuple(int(d) for d in self.cache[shape][1][node])

    def costs(self, c: Cluster, shape: Shape, nodes: Ints) -> Floats:
        if shape not in self.cache:
            growth = np.full(self.nodes, np.nan)
            picks = np.full((self.nodes, shape.gpus), -1, dtype=np.int64)
            self.cache[shape] = (growth, picks)
        growth, picks = self.cache[shape]
        stale = nodes[np.isnan(growth[nodes])]
        if len(stale):
            growth[stale], picks[stale] = self._growth(c, shape, stale, self.node_frag(c)[stale])
        return -score(growth[nodes]) if self.artifact else growth[nodes]

    def _growth(self, c: Cluster, shape: Shape, nodes: Ints, before: Floats) -> tuple[Floats, Ints]:
        """Per node, the least growth of its fragmentation the task can make, and on which devices."""
        cpu = c.cpu[nodes] - shape.cpu
        gpu = c.gpu[nodes]
        if shape.gpus != 1 or shape.share >= WHOLE:
            devices = tightest(gpu, shape)  # whole GPUs: every free one is alike
            taken = gpu.copy()
            if shape.gpus:
                np.put_along_axis(
                    taken, devices, np.take_along_axis(gpu, devices, axis=1) - shape.share, axis=1
                )
            return _rounded(fragmentation(cpu, taken, self.shapes) - before), devices
        best = np.full(len(nodes), np.inf)  # the fragmentation after, on the device picked
        pick = np.full(len(nodes), -1, dtype=np.int64)
        for d in range(gpu.shape[1]):
            can = gpu[:, d] >= shape.share
            if not can.any():
                continue
            taken = gpu[can].copy()
            taken[:, d] -= shape.share
            frag = fragmentation(cpu[can], taken, self.shapes)
            if self.artifact:  # the first device with the top integer score
                top = score(_rounded(best[can] - before[can]))
                better = (pick[can] < 0) | (score(_rounded(frag - before[can])) > top)
            else:
                better = frag < best[can]
            idx = np.flatnonzero(can)[better]
            best[idx] = frag[better]
            pick[idx] = d
        return _rounded(best - before), pick[:, None]


def _rounded(growth: Floats) -> Floats:
    # the sums are of whole thousandths times frequencies, and float noise from batches of different
    # sizes would otherwise break the ties between identical nodes
    return np.round(growth, 6)


def score(growth: Floats) -> Floats:
    """FGD's score in the artifact: sigmoid(-growth / 1000) x 100, truncated to an integer (an
    unbounded growth, no device at all, scores 0)."""
    with np.errstate(over="ignore"):
        return np.asarray(np.trunc(MAX_SCORE / (1 + np.exp(growth / WHOLE))), dtype=np.float64)


POLICIES = ("default", "best-fit", "gpu-packing", "fgd")


def policy(name: str, shapes: Sequence[tuple[Shape, float]], nodes: int, scores: str = "exact") -> Policy:
    """The policy ``name``; ``scores``: exact, or as the authors' artifact computes them (SCORES)."""
    if scores not in SCORES:
        raise ValueError(f"unknown score resolution {scores!r}")
    artifact = scores == "artifact"
    if name == "default":
        return LeastAllocated(artifact)
    if name == "best-fit":
        return BestFit(artifact)
    if name == "gpu-packing":
        return GpuPacking(artifact)
    if name == "fgd":
        return Fgd(shapes, nodes, artifact)
    raise ValueError(f"unknown policy {name!r}")
