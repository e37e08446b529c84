"""Kubernetes quantities and durations.

Every quantity is held as an integer number of milli-units: ``400m`` CPU is 400, ``1Gi`` of memory is
1024**3 * 1000. One integer unit for every resource keeps arithmetic exact (no float drift when a
thousand pods are added and removed) and lets any resource name, extended ones included, share a vector.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exp>[+-]?\d+))?$"
)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")

MILLI = 1000


class QuantityError(ValueError):
    """A quantity or duration that does not follow the Kubernetes syntax."""


def parse_quantity(value: str | int | float) -> int:
    """Return the quantity in milli-units, rounded up as Kubernetes rounds sub-milli values."""
    if isinstance(value, bool):
        raise QuantityError(f"expected a quantity such as 400m, 2 or 1.5Gi, got {value!r}")
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f"expected a quantity such as 400m, 2 or 1.5Gi, got {text!r}")
    try:
        number = Decimal(match["num"])
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid decimals
        raise QuantityError(f"not a number: {text!r}") from exc
    suffix = match["suffix"] or ""
    if match["exp"] is not None:
        scaled = number * (Decimal(10) ** int(match["exp"]))
    elif suffix in _BINARY:
        scaled = number * _BINARY[suffix]
    else:
        scaled = number * _DECIMAL[suffix]
    milli = (scaled * MILLI).to_integral_value(rounding=ROUND_CEILING)
    return int(milli)


def format_quantity(milli: int, resource: str = "") -> str:
    """Render milli-units the way a person reads them: ``400m``, ``3``, ``12Gi``."""
    if resource == "memory" or resource.endswith("storage"):
        whole = milli // MILLI
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if whole and whole % size == 0:
                return f"{whole // size}{suffix}"
        return str(whole)
    if milli % MILLI == 0:
        return str(milli // MILLI)
    return f"{milli}m"


def parse_duration(value: str | int | float) -> float:
    """Seconds from a number or a Go-style duration (``30s``, ``5m``, ``1h30m``, ``500ms``)."""
    if isinstance(value, bool):
        raise QuantityError(f"expected a duration such as 30s, 5m or 1h30m, got {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            parts = _DURATION_PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise QuantityError(f"expected a duration such as 30s, 5m or 1h30m, got {text!r}") from None
            unit = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
            seconds = sum(float(n) * unit[u] for n, u in parts)
    if seconds < 0:
        raise QuantityError(f"expected a duration of zero or more, got {value!r}")
    return seconds
