"""Tables that fit the terminal: never a cell cut with an ellipsis where its words fit whole.

A table prints as it is when its natural width fits. Otherwise its wrapping columns (and every
header) are narrowed down to their longest word, the space left going back to them in proportion to
what they lost; values in a ``no_wrap`` column are never wrapped. When even that is too wide, the
columns after the first are split into several tables that each fit, every one repeating the first
column (the row's name), so that a wide terminal shows one table and a narrow one shows two or three.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, replace

from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table


@dataclass(frozen=True, slots=True)
class _Need:
    least: int
    """The narrowest the column can be without cutting a word (or a no_wrap value)."""
    natural: int
    """Its width on one line per cell."""


def _need(console: Console, column: Column) -> _Need:
    options = console.options.update_width(10_000)
    head = Measurement.get(console, options, column.header)
    least, natural = head.minimum, head.maximum
    for cell in column.cells:
        found = Measurement.get(console, options, cell)
        least = max(least, found.maximum if column.no_wrap else found.minimum)
        natural = max(natural, found.maximum)
    if column.min_width is not None:
        least, natural = max(least, column.min_width), max(natural, column.min_width)
    return _Need(least, natural)


def _overhead(table: Table, columns: int) -> int:
    """Borders and padding of a table of so many columns."""
    left, right = table.padding[3], table.padding[1]
    edges = 2 if table.box is not None and table.show_edge else 0
    between = columns - 1 if table.box is not None else 0
    padding = columns * (left + right) - (0 if table.pad_edge else left + right)
    return padding + edges + between


def _widths(needs: Sequence[_Need], room: int) -> list[int]:
    """Each column at its least, then the room left shared in proportion to what each gave up."""
    widths = [n.least for n in needs]
    spare = room - sum(widths)
    short = [n.natural - n.least for n in needs]
    total = sum(short)
    if total <= 0 or spare <= 0:
        return widths
    given = [min(s, spare * s // total) for s in short]
    widths = [w + g for w, g in zip(widths, given, strict=True)]
    spare -= sum(given)
    for i in sorted(range(len(needs)), key=lambda i: -(short[i] - given[i])):
        if spare <= 0:
            break
        if widths[i] < needs[i].natural:
            widths[i] += 1
            spare -= 1
    return widths


def _with_columns(table: Table, keep: Sequence[int], widths: Sequence[int] | None, part: int) -> Table:
    out = copy.copy(table)
    out.columns = []
    for j, i in enumerate(keep):
        col = table.columns[i]
        width = None if widths is None else widths[j]
        out.columns.append(
            replace(col, width=width, no_wrap=False if width is not None else col.no_wrap, _index=j)
        )
        out.columns[-1]._cells = list(col._cells)
    out.rows = list(table.rows)
    if part > 0 and table.title:
        out.title = f"{table.title} (continued)"
    return out


def fit(table: Table, width: int) -> list[Table]:
    """The table as one or more tables that fit ``width`` columns (see the module's docstring)."""
    console = Console(width=width, color_system=None)
    needs = [_need(console, c) for c in table.columns]
    n = len(needs)
    if n == 0 or sum(x.natural for x in needs) + _overhead(table, n) <= width:
        return [table]
    if sum(x.least for x in needs) + _overhead(table, n) <= width or n <= 2:
        return [_with_columns(table, range(n), _widths(needs, width - _overhead(table, n)), 0)]
    parts: list[list[int]] = []
    for i in range(1, n):
        if parts:
            trial = [0, *parts[-1], i]
            if sum(needs[j].least for j in trial) + _overhead(table, len(trial)) <= width:
                parts[-1].append(i)
                continue
        parts.append([i])
    out = []
    for k, part in enumerate(parts):
        keep = [0, *part]
        room = width - _overhead(table, len(keep))
        piece = _with_columns(table, keep, _widths([needs[j] for j in keep], room), k)
        if k < len(parts) - 1:
            piece.caption = None
        out.append(piece)
    return out


def print_table(console: Console, table: Table) -> None:
    """Print the table fitted to the console's width."""
    for piece in fit(table, console.width):
        console.print(piece)
