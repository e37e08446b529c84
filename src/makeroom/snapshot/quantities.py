"""Quantity parsing with a cache: a cluster repeats the same few request strings many times."""

from __future__ import annotations

from functools import lru_cache

from makeroom.model import QuantityError, parse_quantity


@lru_cache(maxsize=4096)
def _cached(value: str) -> int:
    return parse_quantity(value)


def quantity(value: object) -> int:
    """Milli-units of a Kubernetes quantity (a string or a number); QuantityError if it is not one."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"expected a quantity such as 400m, 2 or 1.5Gi, got {value!r}")
    milli = _cached(str(value))
    if milli < 0:
        raise QuantityError(f"expected a quantity of zero or more, got {value!r}")
    return milli
