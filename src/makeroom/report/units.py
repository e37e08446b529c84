"""One unit style for every table, picture, page and plan: durations as ``1m52s``, money as ``$0.29``
and ``$0.17/h``, signed differences as ``+$0.05``."""

from __future__ import annotations

import math

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
