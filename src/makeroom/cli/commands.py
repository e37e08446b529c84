"""Imports each command module so that its commands are registered on the app."""

from makeroom.cli import (
    bench,  # noqa: F401
    bench_fgd,  # noqa: F401
    bench_fleet,  # noqa: F401
    bench_plan,  # noqa: F401
    cleanup,  # noqa: F401
    plan,  # noqa: F401
    run,  # noqa: F401
    simulate,  # noqa: F401
    trace,  # noqa: F401
)
