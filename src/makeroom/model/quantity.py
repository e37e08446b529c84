"""Kubernetes quantities and durations.

Every quantity is held as an integer number of milli-units: ``400m`` CPU is 400, ``1Gi`` of memory is
1024**3 * 1000. One integer unit for every resource keeps arithmetic exact (no float drift when a
thousand pods are added and removed) and lets any resource name, extended ones included, share a vector.
The vectors are numpy int64, so a quantity has a ceiling (``MAX_QUANTITY``, 1Pi): far above any node
built, and low enough that the sums of a node's pods stay inside int64.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation, localcontext

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
MAX_QUANTITY = 2**50 * MILLI
"""The largest quantity, in milli-units: 1Pi (of bytes, cores or anything). Eight of them still fit in
an int64, so summing the pods of a node cannot wrap around."""
MAX_DURATION = 366 * 86400.0
"""The longest duration, in seconds: a year. Longer is no simulation anyone waits for, and a timer
that far away is one that never fires."""
_MAX_TEXT = 100  # characters of a quantity or a duration: longer is no number a person wrote


class InvalidValueError(ValueError):
    """A value that breaks one of makeroom's input rules; the message says what was expected and what
    was given, and the caller adds the file and the key path."""


class QuantityError(InvalidValueError):
    """A quantity or duration that does not follow the Kubernetes syntax, or is out of range."""


class QuantityRangeError(QuantityError):
    """A well-formed quantity beyond ``MAX_QUANTITY`` (or below its negative)."""


def _expected_quantity(value: object) -> QuantityError:
    return QuantityError(f"expected a quantity such as 400m, 2 or 1.5Gi, got {value!r}")


def _too_large(value: object) -> QuantityRangeError:
    return QuantityRangeError(f"expected a quantity of at most 1Pi, got {value!r}")


def parse_quantity(value: str | int | float) -> int:
    """Return the quantity in milli-units, rounded up as Kubernetes rounds sub-milli values.

    Raises QuantityError for anything that is not a Kubernetes quantity (``inf`` and ``nan`` included)
    and QuantityRangeError for one whose size is beyond ``MAX_QUANTITY``; never anything else."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _expected_quantity(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise _expected_quantity(value)
    text = str(value).strip()
    if len(text) > _MAX_TEXT:
        raise _expected_quantity(text[:20] + "...")
    match = _QUANTITY.match(text)
    if match is None:
        raise _expected_quantity(text)
    try:
        number = Decimal(match["num"])
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid decimals
        raise _expected_quantity(text) from exc
    if number.is_zero():
        return 0
    suffix = match["suffix"] or ""
    if match["exp"] is not None:
        exponent = int(match["exp"])
        scale = Decimal(1)
    else:
        exponent = 0
        scale = Decimal(_BINARY[suffix]) if suffix in _BINARY else _DECIMAL[suffix]
    # Decide the magnitude before computing (1e999999999 would overflow the decimal context).
    magnitude = number.adjusted() + exponent + scale.adjusted()
    if magnitude > 21:  # MAX_QUANTITY is about 1.1e15 units
        raise _too_large(text)
    if magnitude < -12:  # far below a milli-unit: rounds up to one, or to zero when negative
        return 1 if number > 0 else 0
    with localcontext() as ctx:
        ctx.prec = 60  # exact for every value that passed the magnitude check
        milli = (number.scaleb(exponent) * scale * MILLI).to_integral_value(rounding=ROUND_CEILING)
    result = int(milli)
    if abs(result) > MAX_QUANTITY:
        raise _too_large(text)
    return result


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


def _expected_duration(value: object) -> QuantityError:
    return QuantityError(f"expected a duration such as 30s, 5m or 1h30m, got {value!r}")


def parse_duration(value: str | int | float) -> float:
    """Seconds from a number or a Go-style duration (``30s``, ``5m``, ``1h30m``, ``500ms``): finite,
    zero or more, and at most ``MAX_DURATION``. Raises QuantityError, never anything else."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _expected_duration(value)
    if isinstance(value, int):
        if abs(value) > 2**64:  # float() of a huge int overflows
            raise QuantityError(f"expected a duration of at most {MAX_DURATION:g}s (366 days), got {value!r}")
        seconds = float(value)
    elif isinstance(value, float):
        seconds = value
    else:
        text = value.strip()
        if len(text) > _MAX_TEXT:
            raise _expected_duration(text[:20] + "...")
        try:
            seconds = float(text)
        except ValueError:
            parts = _DURATION_PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise _expected_duration(text) from None
            unit = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
            seconds = sum(float(n) * unit[u] for n, u in parts)
    if not math.isfinite(seconds):
        raise QuantityError(f"expected a finite duration, got {value!r}")
    if seconds < 0:
        raise QuantityError(f"expected a duration of zero or more, got {value!r}")
    if seconds > MAX_DURATION:
        raise QuantityError(f"expected a duration of at most {MAX_DURATION:g}s (366 days), got {value!r}")
    return seconds
