"""Quantity parsing with a cache: a cluster repeats the same few request strings many times."""

from __future__ import annotations

from functools import lru_cache

from makeroom.model import limits


@lru_cache(maxsize=4096)
def _cached(name: str, value: str) -> int:
    return limits.resource_quantity(name, value)


def quantity(value: object, name: str = "") -> int:
    """Milli-units of a Kubernetes quantity of resource ``name`` (a string or a number), by the shared
    rules (``limits.resource_quantity``); InvalidValueError if it breaks one, QuantityRangeError when only
    its size does."""
    if isinstance(value, str):
        return _cached(name, value)
    return limits.resource_quantity(name, value)
