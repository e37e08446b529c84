"""What every command shares: turning refused input into exit status 2, and the console."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console

from makeroom.errors import InputError

T = TypeVar("T")

console = Console()
err_console = Console(stderr=True)

EXIT_INPUT = 2


def fail(lines: list[str]) -> NoReturn:
    for line in lines:
        err_console.print(line, markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_INPUT)


def guarded(action: Callable[[], T]) -> T:
    """Run ``action``; refused input becomes one line per problem on stderr and exit status 2."""
    try:
        return action()
    except InputError as exc:
        fail(exc.lines())


def usage_error(message: str) -> NoReturn:
    fail([f"makeroom: {message}"])


def say(text: str) -> None:
    """One plain line on the terminal: no markup, no highlighting, wrapped as the terminal wraps."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
