"""Imports each command module so that its commands are registered on the app."""

from makeroom.cli import simulate  # noqa: F401
