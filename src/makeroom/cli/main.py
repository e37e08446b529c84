"""Entry point of the ``makeroom`` command."""

from __future__ import annotations

from makeroom.cli import commands  # noqa: F401 - registers every command on the app
from makeroom.cli.app import app


def main() -> None:
    app(prog_name="makeroom")


if __name__ == "__main__":  # pragma: no cover
    main()
