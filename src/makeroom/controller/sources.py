"""A controller's configuration from the Helm chart's values: each knob at its ``helm`` key path
(``ControllerConfig``'s metadata, the one map between the two), the scope at ``scope.*`` and
``controller.namespaces``. What ``makeroom plan --values`` reads, so that it plans as the chart's
controller would. Pure: the caller reads the file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from makeroom.controller.config import (
    RELOCATING,
    ConsolidationConfig,
    ControllerConfig,
    Strategy,
    metadata_of,
)
from makeroom.controller.scope import Scope, SelectorError, Side
from makeroom.errors import InputError, Problem
from makeroom.model import limits

_MISSING = object()


def _at(values: Mapping[str, Any], path: str) -> Any:
    node: Any = values
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _knobs(config: type, values: Mapping[str, Any], problems: list[Problem]) -> dict[str, Any]:
    """The knobs of ``config`` that the values set, converted by their rules."""
    out: dict[str, Any] = {}
    for f in fields(config):
        helm, rule = f.metadata.get("helm"), f.metadata.get("rule")
        if helm is None:
            continue
        value = _at(values, helm)
        if value is _MISSING:
            continue
        if rule is not None:
            try:
                value = rule(value)
            except limits.InvalidValueError as exc:
                problems.append(Problem(helm, str(exc)))
                continue
        elif isinstance(f.default, bool) and not isinstance(value, bool):
            problems.append(Problem(helm, f"expected true or false, got {value!r}"))
            continue
        out[f.name] = value
    return out


def config_of_values(values: Any, file: str) -> ControllerConfig:
    """The controller's config as the chart's values set it; defaults for what they leave out."""
    if not isinstance(values, Mapping):
        raise InputError(file, [Problem("", "expected the chart's values: a mapping")])
    problems: list[Problem] = []
    knobs = _knobs(ControllerConfig, values, problems)
    consolidation = ConsolidationConfig(**_knobs(ConsolidationConfig, values, problems))
    strategy = knobs.pop("strategy", ControllerConfig().strategy)
    if strategy not in RELOCATING:
        problems.append(
            Problem("controller.strategy", f"expected {' or '.join(sorted(RELOCATING))}, got {strategy!r}")
        )
        strategy = ControllerConfig().strategy
    config = ControllerConfig(strategy=Strategy(strategy), consolidation=consolidation, **knobs)
    for problem in config.problems():
        helm = _helm_of(problem.path)
        problems.append(Problem(helm or problem.path, problem.message))
    if problems:
        raise InputError(file, problems)
    return config


def _helm_of(path: str) -> str | None:
    helm: str | None = metadata_of(path).get("helm")
    return helm


def scope_of_values(values: Mapping[str, Any], file: str) -> Scope:
    """The scope as the chart passes it: ``controller.namespaces`` on both sides, then each side's
    ``namespaces``, ``namespaceSelector`` and ``priorityClasses``."""
    both = _names(values, "controller.namespaces", file)
    sides = {}
    for side in ("roomFor", "move"):
        selector = _at(values, f"scope.{side}.namespaceSelector")
        if selector is not _MISSING and not isinstance(selector, str):
            raise InputError(file, [Problem(f"scope.{side}.namespaceSelector", "expected a label selector")])
        try:
            sides[side] = Side.of(
                [*both, *_names(values, f"scope.{side}.namespaces", file)],
                selector if isinstance(selector, str) else None,
                _names(values, f"scope.{side}.priorityClasses", file),
            )
        except SelectorError as exc:
            raise InputError(file, [Problem(f"scope.{side}.namespaceSelector", str(exc))]) from None
    return Scope(room_for=sides["roomFor"], move=sides["move"])


def _names(values: Mapping[str, Any], path: str, file: str) -> list[str]:
    found = _at(values, path)
    if found is _MISSING or found is None:
        return []
    if not isinstance(found, list) or not all(isinstance(n, str) for n in found):
        raise InputError(file, [Problem(path, "expected a list of names")])
    return list(found)
