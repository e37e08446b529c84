"""The typer application that every command module registers on."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="makeroom",
    help="Relocate lower-priority replicas so higher-priority ones can schedule.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
