"""What the trace converters share: checked CSV rows, the YAML they write, names and durations."""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from pathlib import Path
from typing import Any, TypeVar

import yaml

from makeroom.errors import InputError, Problem
from makeroom.model import limits
from makeroom.model.quantity import MAX_DURATION

T = TypeVar("T")
Row = Mapping[str, str | None]
RowParser = Callable[[Row, str, list[Problem]], T | None]
MAX_PROBLEMS = 20


@dataclass(frozen=True, slots=True)
class Conversion:
    scenario: dict[str, Any]
    notes: tuple[str, ...] = field(default=())  # written as comment lines above the YAML

    def yaml(self) -> str:
        head = "".join(f"# {line}\n" if line else "#\n" for line in self.notes)
        body = yaml.safe_dump(self.scenario, sort_keys=False, default_flow_style=None, width=110)
        return head + body


def read_rows(path: Path, columns: Sequence[str], parse: RowParser[T]) -> list[T]:
    """Every row of a CSV file through ``parse``; all problems at once, as ``rows[17].cpu_request``."""
    file = str(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:  # a BOM is no part of the header
            return parse_rows(handle, file, columns, parse)
    except FileNotFoundError:
        raise InputError(file, [Problem("", "no such file")]) from None
    except IsADirectoryError:
        raise InputError(file, [Problem("", "expected a CSV file, found a directory")]) from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(file, [Problem("", f"cannot read: {exc}")]) from None


def parse_rows(lines: Iterable[str], file: str, columns: Sequence[str], parse: RowParser[T]) -> list[T]:
    reader = csv.DictReader(lines)
    header = reader.fieldnames or []
    if not header:
        raise InputError(file, [Problem("", f"empty file: expected a CSV header with {', '.join(columns)}")])
    missing = [c for c in columns if c not in header]
    if missing:
        raise InputError(file, [Problem("header", f"missing column {c}") for c in missing])
    problems: list[Problem] = []
    items = []
    for i, row in enumerate(reader):
        raw: dict[Any, Any] = row
        if None in raw or any(v is None for v in raw.values()):
            # A cut row would read its missing cells as empty: for a deletion time, "live forever".
            cut = sum(1 for k, v in raw.items() if k is not None and v is None)
            given = len(header) + len(raw.get(None) or ()) - cut
            problems.append(
                Problem(f"rows[{i}]", f"expected {len(header)} cells as in the header, got {given}")
            )
            continue
        item = parse(row, f"rows[{i}]", problems)
        if item is not None:
            items.append(item)
    if len(problems) > MAX_PROBLEMS:
        problems = [*problems[:MAX_PROBLEMS], Problem("", f"... and {len(problems) - MAX_PROBLEMS} more")]
    if problems:
        raise InputError(file, problems)
    return items


def cell(row: Row, column: str) -> str:
    return (row.get(column) or "").strip()


MAX_CELL = Decimal(10) ** 15
"""The largest number of a cell: no request (in cores, GiB or MiB) nor time (in seconds) comes near."""


def number(text: str, where: str, problems: list[Problem], high: Decimal = MAX_CELL) -> Decimal | None:
    """A finite number of zero or more, at most ``high``, or a problem at ``where``."""
    try:
        value = Decimal(text) if len(text) <= 40 else None
    except InvalidOperation:
        value = None
    if value is None or not value.is_finite() or value < 0:
        problems.append(Problem(where, f"expected a number of zero or more, got {text!r}"))
        return None
    if value > high:
        problems.append(Problem(where, f"expected a number of at most {high:f}, got {text!r}"))
        return None
    return value


def whole(text: str, where: str, problems: list[Problem], high: int) -> int | None:
    """A whole number from 0 to ``high`` (``2`` or ``2.0``), or a problem at ``where``."""
    value = number(text, where, problems, Decimal(high))
    if value is None:
        return None
    if value != value.to_integral_value():
        problems.append(Problem(where, f"expected a whole number, got {text!r}"))
        return None
    return int(value)


def milli(value: Decimal, unit: Decimal | int, where: str, problems: list[Problem]) -> int:
    """``value`` x ``unit`` (milli-units per unit of the cell), rounded up, within the quantity range
    of scenarios."""
    result = int((value * unit).to_integral_value(ROUND_CEILING))
    if result > limits.MAX_QUANTITY:
        problems.append(Problem(where, f"expected a request of at most 1Pi, got {value:f}"))
        return 0
    return result


def time_cell(text: str, where: str, empty: float, problems: list[Problem]) -> float:
    """Seconds from the trace start, at most a year; ``empty`` (an infinity) for an empty cell."""
    if not text:
        return empty
    value = number(text, where, problems, Decimal(int(MAX_DURATION)))
    return empty if value is None else float(value)


def natural(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that puts app_2 before app_10."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", text) if p)


def dns_name(text: str, fallback: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return name or fallback


def unique(name: str, taken: set[str]) -> str:
    n, candidate = 2, name
    while candidate in taken:
        candidate, n = f"{name}-{n}", n + 1
    return candidate


def duration(seconds: float) -> str:
    """``2h``, ``1h5m``, ``90s`` -> ``1m30s``: what the scenario loader reads back exactly."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return text or "0s"
