"""Imports each command module so that its commands are registered on the app."""

from makeroom.cli import simulate  # noqa: F401
from makeroom.cli import plan  # noqa: F401
