"""One unit style for every table, picture, page and plan: durations as ``1m52s``, money as ``$0.29``
and ``$0.17/h``, signed differences as ``+$0.05``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Decimal

MINUS = "\u2212"


def duration(seconds: float | None, never: str = "never") -> str:
    """``45s``, ``1m52s``, ``2h05m``, ``3d04h``; ``0.5s`` below ten seconds; ``never`` for None."""
    if seconds is None:
        return never
    if not math.isfinite(seconds):
        return "∞"
    if seconds < 0:
        return f"{MINUS}{duration(-seconds)}"
    if seconds < 10 and seconds != int(seconds):
        return f"{seconds:.1f}s"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def money(amount: float) -> str:
    """A total in dollars: cents when it is at least one cent, else enough digits to see it."""
    if amount < 0:
        return f"{MINUS}{money(-amount)}"
    if amount == 0:
        return "$0"
    if amount < 0.01:
        return f"${amount:.4f}".rstrip("0")
    return f"${amount:,.2f}"


def _places(amount: float) -> int:
    """The decimals ``money`` prints: cents, or four below a cent."""
    return 2 if abs(amount) >= 0.01 else 4


def shown(amount: float) -> Decimal:
    """The amount exactly as ``money`` prints it."""
    return Decimal(f"{amount:.{_places(amount)}f}")


def money_change(new: float, old: float) -> str:
    """``new`` against ``old`` as a signed difference of the two figures shown, so that the three
    numbers a reader sees agree: $0.29 against $0.23 is +$0.06, never +$0.05."""
    return money_diff(float(shown(new) - shown(old)))


def money_parts(parts: Sequence[float], total: float) -> list[str]:
    """Each part in dollars, rounded so that the figures add up to ``money(total)`` exactly (largest
    remainder: each is within one unit of the last digit of the exact part)."""
    exact = shown(total)
    unit = Decimal(1).scaleb(-_places(total))
    if exact == 0 or any(p < 0 for p in parts):
        return [money(p) for p in parts]
    scaled = [Decimal(repr(p)) / unit for p in parts]
    floors = [int(x) for x in scaled]
    left = int((exact / unit).to_integral_value(ROUND_HALF_EVEN)) - sum(floors)
    order = sorted(range(len(parts)), key=lambda i: (-(scaled[i] - floors[i]), i))
    for i in order[: max(left, 0)]:
        floors[i] += 1
    return [money(float(n * unit)) for n in floors]


def per_hour(amount: float) -> str:
    """A price: ``$0.17/h``."""
    return f"{money(amount)}/h"


def money_diff(amount: float) -> str:
    """A difference against a baseline: ``+$0.05``, ``-$0.12`` (with a minus sign), ``±$0``."""
    if abs(amount) < 0.00005:
        return "±$0"
    return f"+{money(amount)}" if amount > 0 else money(amount)


def count(n: int, one: str, many: str | None = None) -> str:
    """``1 pod``, ``3 pods``."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"
