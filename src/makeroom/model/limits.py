"""The rules every number makeroom reads must follow: scenarios, dumps and the cluster's objects, trace
CSVs, groups files and command-line flags all check their values here, so one rule has one wording
and one range wherever it is met.

Each check takes the raw value (as YAML, JSON, a CSV cell or a flag gives it) and returns it
converted, or raises ``InvalidValueError`` whose message says what was expected and what was given; the
caller adds the file and the key path. Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import TypeGuard

from makeroom.model.quantity import (
    MAX_DURATION,
    MAX_QUANTITY,
    MILLI,
    InvalidValueError,
    QuantityError,
    QuantityRangeError,
    parse_duration,
    parse_quantity,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_DURATION",
    "MAX_FACTOR",
    "MAX_MOVES",
    "MAX_NODES",
    "MAX_PRICE",
    "MAX_PRIORITY",
    "MAX_QUANTITY",
    "MAX_REPLICAS",
    "MIN_INTERVAL",
    "MIN_PRIORITY",
    "InvalidValueError",
    "QuantityError",
    "QuantityRangeError",
    "count",
    "duration",
    "interval",
    "ip_address",
    "is_integer_resource",
    "moves",
    "number",
    "port",
    "price",
    "priority",
    "quantity",
    "ratio",
    "resource_quantity",
    "whole_units",
]

MIN_INTERVAL = 0.1
"""The shortest period of a loop (the controller's reconciliation, the autoscaler's scan), in seconds:
faster is no cluster's pace, and a period near zero makes a simulation that never ends."""
MAX_NODES = 5000
"""Nodes of one group (min, max, initial): Kubernetes' tested limit for a whole cluster."""
MAX_REPLICAS = 150_000
"""Replicas of one workload: Kubernetes' tested limit of pods in a whole cluster."""
MAX_MOVES = MAX_REPLICAS
"""Pods moved at once, or per consolidation window."""
MIN_PRIORITY, MAX_PRIORITY = -(2**31), 2**31 - 1
"""A pod priority is an int32, as PriorityClass.value."""
MAX_PRICE = 1e6
"""Price of one node per hour: more is a typo, and it would turn costs into infinities."""
MAX_DEPTH = 64
"""Nesting of a YAML or JSON document: a Kubernetes object nests about 12 deep; deeper is refused
before anything recurses into it (``scenario.files``)."""
MAX_FACTOR = 1000.0
"""Multipliers of the trace converters (replicas x F, nodes x F, max nodes x H)."""


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def count(value: object, *, low: int = 0, high: int, what: str = "a whole number") -> int:
    """A whole number in [low, high]: an int (never a bool, a float or a string)."""
    if not _is_int(value):
        raise InvalidValueError(f"expected {what} from {low} to {high}, got {value!r}")
    if not low <= value <= high:
        raise InvalidValueError(f"expected {what} from {low} to {high}, got {value}")
    return value


def priority(value: object) -> int:
    """A pod priority: an int32."""
    return count(value, low=MIN_PRIORITY, high=MAX_PRIORITY, what="an integer priority")


def number(
    value: object, *, low: float, high: float, low_open: bool = False, what: str = "a number"
) -> float:
    """A finite number in [low, high] (or (low, high] when ``low_open``); ints, floats and numeric
    strings (a flag's or a CSV cell's text) are taken, never a bool."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidValueError(f"expected {what}, got {value!r}")
    try:
        result = float(value)
    except (ValueError, OverflowError):
        raise InvalidValueError(f"expected {what}, got {value!r}") from None
    if not math.isfinite(result):
        raise InvalidValueError(f"expected a finite number, got {value!r}")
    bound = f"more than {low:g}" if low_open else f"{low:g} or more"
    if (result <= low if low_open else result < low) or result > high:
        raise InvalidValueError(f"expected {what} {bound} and at most {high:g}, got {value!r}")
    return result


def ratio(value: object) -> float:
    """A share, from 0 to 1."""
    return number(value, low=0.0, high=1.0, what="a share")


def price(value: object) -> float:
    """A price per hour: finite, zero or more, at most ``MAX_PRICE``."""
    return number(value, low=0.0, high=MAX_PRICE, what="a price per hour")


def duration(value: object, *, positive: bool = False) -> float:
    """Seconds from a number or ``30s``, ``5m``, ``1h30m``: finite, at most ``MAX_DURATION``, and more
    than zero when ``positive``."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"expected a duration such as 30s, 5m or 1h30m, got {value!r}")
    seconds = parse_duration(value)
    if positive and seconds <= 0:
        raise QuantityError(f"expected a duration of more than 0, got {value!r}")
    return seconds


def interval(value: object) -> float:
    """The period of a loop: a duration of at least ``MIN_INTERVAL``."""
    seconds = duration(value)
    if seconds < MIN_INTERVAL:
        raise QuantityError(f"expected a period of at least {MIN_INTERVAL:g}s, got {value!r}")
    return seconds


def is_integer_resource(name: str) -> bool:
    """Resources counted in whole units: ``pods``, and every extended resource (a name with a domain
    outside kubernetes.io, such as nvidia.com/gpu), which Kubernetes refuses as a fraction."""
    if name == "pods":
        return True
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def quantity(value: object) -> int:
    """A Kubernetes quantity in milli-units: zero or more, at most ``MAX_QUANTITY`` (1Pi)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"expected a quantity such as 400m, 2 or 1.5Gi, got {value!r}")
    milli = parse_quantity(value)
    if milli < 0:
        raise QuantityError(f"expected a quantity of zero or more, got {value!r}")
    return milli


def whole_units(name: str, milli: int, given: object) -> int:
    """``milli`` unchanged, or InvalidValueError when ``name`` counts whole units and it is a fraction."""
    if milli % MILLI and is_integer_resource(name):
        raise QuantityError(f"expected a whole number of {name}, got {given!r}")
    return milli


def resource_quantity(name: str, value: object) -> int:
    """The quantity of resource ``name``: ``quantity`` plus whole units where Kubernetes wants them."""
    return whole_units(name, quantity(value), value)


def port(value: object) -> int:
    """A TCP port, 0 to 65535 (0: none, or any free port where the caller says so)."""
    return count(value, low=0, high=65535, what="a port")


def ip_address(value: object) -> str:
    """An IPv4 or IPv6 address to bind to (0.0.0.0 or :: for every interface)."""
    try:
        return str(ipaddress.ip_address(str(value).strip("[]")))
    except ValueError:
        message = f"expected an IP address such as 0.0.0.0 or 127.0.0.1, got {value!r}"
        raise InvalidValueError(message) from None


def moves(value: object) -> int:
    """A number of pods to move: 1 or more."""
    return count(value, low=1, high=MAX_MOVES, what="a number of pods")


_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}$")


def label_key(value: object) -> str:
    """A label key as Kubernetes has it: an optional DNS prefix and '/', then a name of up to 63
    characters, alphanumeric at both ends ('-', '_', '.' inside)."""
    if isinstance(value, str) and _LABEL_KEY.match(value):
        return value
    raise InvalidValueError(f"expected a label key such as topology.kubernetes.io/zone, got {value!r}")


def label_value(value: object, *, empty: bool = True) -> str:
    """A label value: up to 63 characters, alphanumeric at both ends ('-', '_', '.' inside)."""
    if isinstance(value, str) and _LABEL_VALUE.match(value) and (empty or value):
        return value
    raise InvalidValueError(
        f"expected a label value of up to 63 letters, digits, '-', '_' or '.' (alphanumeric at both "
        f"ends), got {value!r}"
    )
