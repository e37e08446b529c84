"""The chart's values.schema.json says what the flags say (issue 21): its enums are the CLI's, and it
describes every value of values.yaml (so that a typo is refused, never one of the chart's own keys)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from makeroom.cli.run import LOG_LEVELS
from makeroom.controller import RELOCATING
from makeroom.kube.options import NominationMode

CHART = Path(__file__).parents[1] / "deploy" / "helm" / "makeroom"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())


def node(path: str) -> dict[str, Any]:
    out = SCHEMA
    for key in path.split("."):
        out = out["properties"][key]
    return dict(out)


def test_the_schema_enums_are_the_flags_choices() -> None:
    assert set(node("controller.strategy")["enum"]) == set(RELOCATING)
    assert set(node("controller.nomination")["enum"]) == {m.value for m in NominationMode}
    assert set(node("controller.logLevel")["enum"]) == set(LOG_LEVELS)


def test_every_value_of_values_yaml_is_described() -> None:
    def walk(values: dict[str, Any], schema: dict[str, Any], where: str) -> list[str]:
        missing = []
        for key, value in values.items():
            sub = schema.get("properties", {}).get(key)
            if sub is None:
                if schema.get("additionalProperties") is False:
                    missing.append(f"{where}{key}")
                continue
            if isinstance(value, dict) and value and "properties" in sub:
                missing += walk(value, sub, f"{where}{key}.")
        return missing

    assert walk(VALUES, SCHEMA, "") == []


def test_the_schema_takes_the_durations_makeroom_takes() -> None:
    import re

    from makeroom.model import limits

    pattern = re.compile(node("controller.interval")["pattern"])
    for text in ("2s", "15m", "1h30m", "250ms", "0.5", "90", "3d", "soon", "5 m", ""):
        try:
            limits.duration(text)
            takes = True
        except limits.InvalidValueError:
            takes = False
        assert bool(pattern.search(text)) == takes, text
