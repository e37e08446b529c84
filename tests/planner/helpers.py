"""The planner tests' old import path: the builders live in tests/builders, the CLI runner in
tests/conftest.py."""

from __future__ import annotations

from pathlib import Path

from tests.builders.scenario import EXAMPLES, example
from tests.builders.state import CPU_NODE, GPU_NODE, GPU_TAINT, GPU_TOLERATION, StateBuilder
from tests.conftest import cli as run
from tests.conftest import cli_json as run_json

Cluster = StateBuilder
SCENARIOS = Path(__file__).parent / "scenarios"

__all__ = [
    "CPU_NODE",
    "EXAMPLES",
    "GPU_NODE",
    "GPU_TAINT",
    "GPU_TOLERATION",
    "SCENARIOS",
    "Cluster",
    "StateBuilder",
    "example",
    "run",
    "run_json",
]
