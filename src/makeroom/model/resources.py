"""Resource vectors over any resource name."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import numpy as np
import numpy.typing as npt

from makeroom.model.quantity import format_quantity, parse_quantity

Vector = npt.NDArray[np.int64]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
GPU_SHARE = "alibaba.com/gpu-milli"
"""Thousandths of a GPU, as the Alibaba GPU-sharing trace counts them (``makeroom trace gpu``): a shared
GPU in whole units, since Kubernetes refuses a fraction of an extended resource."""
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "aws.amazon.com/neuron", "google.com/tpu", GPU_SHARE)
DEFAULT_MAX_PODS = 110


class Resources(Mapping[str, int]):
    """An immutable map of resource name to milli-units; a missing name is zero."""

    __slots__ = ("_gpu", "_hash", "_items")

    def __init__(self, items: Mapping[str, int] | None = None) -> None:
        self._items: dict[str, int] = {k: int(v) for k, v in (items or {}).items() if v}
        self._hash: int | None = None  # immutable: hashed once (specs are dictionary keys everywhere)
        self._gpu: bool | None = None  # asked of every pod each headroom round: answered once

    @classmethod
    def parse(cls, quantities: Mapping[str, str | int | float]) -> Resources:
        return cls({name: parse_quantity(q) for name, q in quantities.items()})

    def __getitem__(self, name: str) -> int:
        return self._items.get(name, 0)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(sorted(self._items.items())))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._items == other._items
        return NotImplemented

    def __add__(self, other: Resources) -> Resources:
        out = dict(self._items)
        for k, v in other._items.items():
            out[k] = out.get(k, 0) + v
        return Resources(out)

    def __sub__(self, other: Resources) -> Resources:
        out = dict(self._items)
        for k, v in other._items.items():
            out[k] = out.get(k, 0) - v
        return Resources(out)

    def scaled(self, factor: int) -> Resources:
        return Resources({k: v * factor for k, v in self._items.items()})

    def fits_in(self, room: Resources) -> bool:
        """True when every requested amount is covered by ``room``."""
        return all(v <= room[k] for k, v in self._items.items())

    def is_negative(self) -> bool:
        return any(v < 0 for v in self._items.values())

    def requests_gpu(self) -> bool:
        if self._gpu is None:
            self._gpu = any(self[g] > 0 for g in GPU_RESOURCES)
        return self._gpu

    def vector(self, index: ResourceIndex) -> Vector:
        return index.vector(self)

    def __repr__(self) -> str:
        return "Resources(" + ", ".join(f"{k}={format_quantity(v, k)}" for k, v in self.items()) + ")"

    def human(self) -> str:
        return ", ".join(f"{k}: {format_quantity(v, k)}" for k, v in self.items())


class ResourceIndex:
    """A fixed order of resource names, so that resources become numpy vectors for bulk fit checks."""

    __slots__ = ("_pos", "names")

    def __init__(self, names: Iterable[str]) -> None:
        ordered = [CPU, MEMORY, PODS]
        ordered += sorted(set(names) - set(ordered))
        self.names: tuple[str, ...] = tuple(ordered)
        self._pos = {n: i for i, n in enumerate(self.names)}

    def __len__(self) -> int:
        return len(self.names)

    def position(self, name: str) -> int:
        return self._pos[name]

    def vector(self, resources: Mapping[str, int]) -> Vector:
        v = np.zeros(len(self.names), dtype=np.int64)
        for name, amount in resources.items():
            v[self._pos[name]] = amount
        return v

    def resources(self, vector: Vector) -> Resources:
        return Resources({n: int(vector[i]) for i, n in enumerate(self.names)})

    def gpu_positions(self) -> list[int]:
        return [self._pos[g] for g in GPU_RESOURCES if g in self._pos]
