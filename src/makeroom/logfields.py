"""What every log line of makeroom shares, whatever its format (JSON for ``run``, a readable line for
the other commands): the fields a call adds with ``extra={...}``, and a handler on today's stderr."""

from __future__ import annotations

import logging
import sys
from typing import Any

_STANDARD = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime", "taskName"}
)


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra={...}`` of the call that made ``record``."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg,unused-ignore]
    """Writes to whatever sys.stderr is at the time (a test runner, or a progress bar that prints the
    lines above itself, may swap it)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass
