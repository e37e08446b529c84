"""The typer application that every command module registers on, with kubectl's manners: ``-h``,
``--version``, plain help that reads at 80 columns, and every error as ``makeroom: ...``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from makeroom.cli.common import PREFIX, ExitStatus, setup_console_logging

try:  # typer 0.2x carries its own copy of click, whose exceptions are not click's
    from typer._click import exceptions as click
except ImportError:  # pragma: no cover - older typer on click itself
    from click import exceptions as click  # type: ignore[no-redef]

ClickError = click.ClickException
"""click's error for bad arguments, as the installed typer raises it."""

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class Group(TyperGroup):
    """The root command: runs every command and reports click's usage errors in makeroom's style."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            status = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.NoArgsIsHelpError as exc:
            typer.echo(exc.ctx.get_help() if exc.ctx else "")
            sys.exit(ExitStatus.OK)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} -h')" if exc.ctx is not None else ""
            typer.echo(PREFIX + _sentence(exc.format_message()) + hint, err=True)
            sys.exit(ExitStatus.BAD_INPUT)
        except click.ClickException as exc:
            typer.echo(PREFIX + _sentence(exc.format_message()), err=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo(PREFIX + "aborted", err=True)
            sys.exit(ExitStatus.FAILED)
        sys.exit(status if isinstance(status, int) else ExitStatus.OK)


def _sentence(message: str) -> str:
    """click's ``No such option: --x.`` as ``no such option: --x``."""
    message = message.strip().rstrip(".")
    return message[:1].lower() + message[1:] if message[:2] != message[:2].upper() else message


app = typer.Typer(
    name="makeroom",
    cls=Group,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: readable at 80 columns, and no styling for NO_COLOR
    context_settings=CONTEXT,
)


def installed_version() -> str:
    try:
        return package_version("makeroom")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree that was never installed
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"makeroom {installed_version()}")
        raise typer.Exit(ExitStatus.OK)


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Relocate lower-priority replicas so higher-priority ones can schedule on autoscaled node groups.

    Exit status: 0 done, every pod placed; 1 a failure outside the input (a cluster call); 2 bad input
    (nothing run, nothing changed); 3 pods still pending (at the end of a simulation, or now for plan).
    """
    setup_console_logging()
