"""What every command shares: the consoles, the output formats, the exit statuses, and turning refused
input into one ``makeroom: ...`` line per problem with exit status 2."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
import yaml
from rich.console import Console

from makeroom.errors import InputError, Problem
from makeroom.logfields import StderrHandler, extra_fields

T = TypeVar("T")

PREFIX = "makeroom: "


class ConsoleFormatter(logging.Formatter):
    """``makeroom: warning: relocation rolled back (pod=ns/a, reason=...)``: a log line a person reads,
    for every command but ``run`` (which logs JSON). Under ``simulate``, ``compare`` and ``bench`` these
    are the simulated controller's own warnings; its decisions are in the timeline too."""

    def format(self, record: logging.LogRecord) -> str:
        fields = ", ".join(f"{k}={v}" for k, v in extra_fields(record).items())
        text = f"{PREFIX}{record.levelname.lower()}: {record.getMessage()}"
        return f"{text} ({fields})" if fields else text


def setup_console_logging() -> None:
    """Warnings and errors as readable lines on stderr, unless something (a test runner, ``run``'s
    JSON logs) already handles them; without it Python prints a bare message with no fields."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = StderrHandler()
    handler.setFormatter(ConsoleFormatter())
    handler.setLevel(logging.WARNING)
    root.addHandler(handler)


class ExitStatus(IntEnum):
    """The exit statuses of every command (docs/cli.md)."""

    OK = 0
    """Done; every pod is placed (at the end of a run, or now for plan)."""
    FAILED = 1
    """Something outside the input went wrong: the cluster cannot be reached, an API call failed."""
    BAD_INPUT = 2
    """A file, a flag or an argument is refused; nothing was run and nothing was changed."""
    PENDING = 3
    """Pods are still pending: at the end of the run (simulate; compare and demo: under every
    strategy), or now (plan, which then says what would place them)."""


EXIT_INPUT = ExitStatus.BAD_INPUT


def no_color() -> bool:
    """NO_COLOR (no-color.org): set and not empty means no colour and no other styling either."""
    return bool(os.environ.get("NO_COLOR"))


def _console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, color_system=None if no_color() else "auto")


console = _console()
err_console = _console(stderr=True)


def error_line(line: str) -> str:
    """Every error line starts with ``makeroom: ``, whatever produced it."""
    return line if line.startswith(PREFIX) else PREFIX + line


def fail(lines: Sequence[str], status: int = EXIT_INPUT) -> NoReturn:
    for line in lines:
        err_console.print(error_line(line), markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(status)


def warn(line: str) -> None:
    """A warning on stderr in the errors' style; nothing stops."""
    err_console.print(f"{PREFIX}warning: {line}", markup=False, highlight=False, soft_wrap=True)


def guarded(action: Callable[[], T]) -> T:
    """Run ``action``; refused input becomes one line per problem on stderr and exit status 2."""
    try:
        return action()
    except InputError as exc:
        fail(exc.lines())


def usage_error(message: str) -> NoReturn:
    fail([message])


def check_writable(path: Path | None, suffixes: Sequence[str] = (), expected: str = "") -> None:
    """Refuse an output that cannot be written before the work it is to hold takes its time (a
    benchmark's hours, a simulation's minutes); ``suffixes``, when given, are the kinds of file the
    command writes (``expected`` says them)."""
    if path is None:
        return
    if suffixes and path.suffix.lower() not in suffixes:
        raise InputError(str(path), [Problem("", f"expected {expected}")])
    parent = path.parent
    if not parent.is_dir():
        raise InputError(str(path), [Problem("", f"expected an existing directory {parent}")])
    if path.is_dir():
        raise InputError(str(path), [Problem("", "expected a file name, found a directory")])
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise InputError(str(path), [Problem("", "cannot write here: permission denied")])


def write_json(path: Path, data: Any) -> None:
    """The JSON written whole or not at all (a command stopped while it writes leaves the file as it
    was); a file system that refuses it is reported as input, exit 2."""
    part = path.with_name(f".{path.name}.part")
    try:
        part.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(part, path)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise InputError(str(path), [Problem("", f"cannot write: {exc.strerror or exc}")]) from None


def say(text: str) -> None:
    """One plain line on the terminal: no markup, no highlighting, wrapped as the terminal wraps."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")


def print_yaml(data: Any) -> None:
    sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


class Output(StrEnum):
    """``-o``: how a command prints its result, as kubectl's ``-o`` does."""

    TABLE = "table"
    WIDE = "wide"  # a table with every row (every workload), however many
    JSON = "json"
    YAML = "yaml"

    @property
    def data(self) -> bool:
        """A machine-readable format: nothing else goes to stdout."""
        return self in (Output.JSON, Output.YAML)


def output_option(allowed: Sequence[Output] = tuple(Output)) -> Any:
    """``-o``, its help listing exactly the formats the command accepts (``output_format``'s)."""
    names = [f"{o.value} (every workload)" if o is Output.WIDE else o.value for o in allowed]
    listed = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
    return typer.Option("--output", "-o", metavar="FORMAT", help=f"{listed}.", show_default=False)


OutputOpt = Annotated[str, output_option()]
JsonOpt = Annotated[bool, typer.Option("--json", help="The same as -o json.")]


def output_format(value: str, json_flag: bool = False, allowed: Sequence[Output] = tuple(Output)) -> Output:
    """The chosen format; ``--json`` is kept as the alias of ``-o json``."""
    if json_flag:
        if value not in ("", Output.JSON.value):
            usage_error(f"--json and -o {value}: choose one")
        return Output.JSON
    if not value:
        return allowed[0]
    try:
        chosen = Output(value)
    except ValueError:
        chosen = None
    if chosen is None or chosen not in allowed:
        usage_error(f"-o: expected one of {', '.join(allowed)}, got {value!r}")
    return chosen


def emit(data: Any, fmt: Output) -> None:
    """The result as data: JSON exactly as ``--json`` always printed it, or the same as YAML."""
    if fmt is Output.YAML:
        print_yaml(data)
    else:
        print_json(data)


def old_output_file(value: str | None) -> Path | None:
    """The file ``-o`` names where it is used as it used to be (a value that is no format), or None."""
    if value is None or value == "" or value in {o.value for o in Output}:
        return None
    return Path(value)


def format_or_file(value: str | None, allowed: Sequence[Output], new_flag: str) -> tuple[Output, Path | None]:
    """``-o``'s value where it used to name a file: a format, or, for one more release, the file it
    used to be (with a deprecation warning naming the new flag)."""
    old_file = old_output_file(value)
    if old_file is not None:
        warn(
            f"-o/--output FILE is deprecated and will be removed in the next release: use {new_flag} {value}"
        )
        return allowed[0], old_file
    if not value:
        return allowed[0], None
    if value not in {o.value for o in allowed}:
        usage_error(f"-o: expected one of {', '.join(allowed)}, got {value!r}")
    return Output(value), None
