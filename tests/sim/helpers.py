"""The sim tests' old import path: the builders live in tests/builders."""

from tests.builders.scenario import group, kinds, run, scenario, workload

__all__ = ["group", "kinds", "run", "scenario", "workload"]
