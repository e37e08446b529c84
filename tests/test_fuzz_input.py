"""Fuzzing the loaders through the command line, in process: mutated scenarios (`simulate`), dumps
(`plan`) and trace CSVs (`trace dlrm`, then `simulate` on what it wrote). Each run ends either in exit
status 2 with nothing on stdout and one line per problem naming the file and a key path, or in a
valid run whose JSON is strict (no NaN, no Infinity). Never a traceback, never a hang (an alarm turns
one into a failure). Derandomized and bounded, so that the fast suite stays fast and the same."""

from __future__ import annotations

import copy
import json
import math
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import Result

from makeroom.scenario.schema import ScenarioSpec
from tests.conftest import cli, seed
from tests.trace.test_dlrm import HEADER, ROWS

FUZZ = settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
HANG_SECONDS = 60

_deep: Any = "bottom"
for _ in range(80):
    _deep = [_deep]
HOSTILE: list[Any] = [
    math.inf,
    -math.inf,
    math.nan,
    1e308,
    -1,
    0,
    0.5,
    10**30,
    2**63,
    -(2**31) - 1,
    "10Pi",
    "1e30",
    "1e999999999",
    "9999999Ei",
    "0.5",
    "-5m",
    "1e-9",
    "abc",
    "",
    None,
    True,
    [],
    {},
    ["a", "b"],
    {"x": 1},
    _deep,
]
KEY_PATH = re.compile(r"^[A-Za-z_][\w\-]*(\[\d+\]|\.[\w.\-/%]+|\[\w+\])*$")


@contextmanager
def no_hang(seconds: int = HANG_SECONDS) -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"no answer within {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def paths(node: Any, here: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a parsed document, in a fixed order."""
    yield here
    if isinstance(node, dict):
        for k in node:
            yield from paths(node[k], (*here, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, (*here, i))


def mutate(doc: Any, data: st.DataObject) -> Any:
    """One to three changes: a value replaced by a hostile one, a key removed, an unknown key added."""
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        places = [p for p in paths(doc) if p]
        if not places:
            break
        where = data.draw(st.sampled_from(places), label="where")
        parent = doc
        for part in where[:-1]:
            parent = parent[part]
        op = data.draw(st.sampled_from(["replace", "replace", "remove", "add"]), label="op")
        if op == "replace":  # a copy: a later change may reach into it, and HOSTILE must stay as it is
            parent[where[-1]] = copy.deepcopy(data.draw(st.sampled_from(HOSTILE), label="value"))
        elif op == "remove":
            del parent[where[-1]]
        elif isinstance(parent, dict):
            parent["unknown_key"] = copy.deepcopy(data.draw(st.sampled_from(HOSTILE), label="value"))
    return doc


def strict_json(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"{constant} in the JSON output")

    return json.loads(text, parse_constant=refuse)


def check(result: Result, file: Path, known_keys: set[str], whole_file: tuple[str, ...]) -> None:
    assert "Traceback" not in result.output
    assert result.exit_code in (0, 2, 3), result.output  # 3: a valid run that ends with pods pending
    if result.exit_code != 2:
        strict_json(result.stdout)
        return
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines, "exit 2 without a word"
    for line in lines:
        assert line.startswith(f"makeroom: {file}: "), line
        rest = line[len(f"makeroom: {file}: ") :]
        if rest.startswith(whole_file):
            continue
        path, sep, message = rest.partition(": ")
        assert sep and message, line
        assert KEY_PATH.match(path), line
        assert re.split(r"[.\[]", path)[0] in known_keys, line


def run_in(tmp_path: Path, name: str, text: str, *args: str) -> tuple[Path, Result]:
    file = tmp_path / name
    file.write_text(text)
    with no_hang():
        return file, cli(*args[:1], file, *args[1:])


SCENARIO = yaml.safe_load(seed(1).read_text())
SCENARIO_KEYS = set(ScenarioSpec.model_fields)


@FUZZ
@given(data=st.data())
def test_mutated_scenarios(tmp_path_factory: Any, data: st.DataObject) -> None:
    doc = mutate(json.loads(json.dumps(SCENARIO)), data)
    text = yaml.safe_dump(doc, sort_keys=False)
    tmp = tmp_path_factory.mktemp("scenario")
    file, result = run_in(tmp, "scenario.yaml", text, "simulate", "--json", "--strategy", "migrate")
    check(
        result,
        file,
        SCENARIO_KEYS | set(doc if isinstance(doc, dict) else ()),
        ("not valid YAML", "expected a YAML mapping"),
    )


DUMP = yaml.safe_load((Path(__file__).parent / "snapshot" / "data" / "small-dump.yaml").read_text())


@FUZZ
@given(data=st.data())
def test_mutated_dumps(tmp_path_factory: Any, data: st.DataObject) -> None:
    doc = mutate(json.loads(json.dumps(DUMP)), data)
    tmp = tmp_path_factory.mktemp("dump")
    file, result = run_in(tmp, "dump.json", json.dumps(doc), "plan", "--json")
    whole = ("not valid", "expected a YAML mapping", "node group", "node ")
    check(
        result, file, {"items", "version", "kind", "apiVersion", "metadata", "spec", "status", "data"}, whole
    )


CELLS = ["inf", "nan", "-1", "1e30", "0.5", "", "abc", "1e999999999", "9" * 400, "1e-9", "3600"]


def mutate_csv(data: st.DataObject) -> str:
    rows = [r.split(",") for r in ROWS]
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        op = data.draw(st.sampled_from(["cell", "cell", "cut", "extra", "bom", "blank"]), label="op")
        i = data.draw(st.integers(0, len(rows) - 1), label="row")
        if op == "cell" and rows[i]:
            rows[i][data.draw(st.integers(0, len(rows[i]) - 1), label="column")] = data.draw(
                st.sampled_from(CELLS), label="value"
            )
        elif op == "cut" and rows[i]:
            rows[i] = rows[i][: data.draw(st.integers(1, max(1, len(rows[i]) - 1)), label="keep")]
        elif op == "extra":
            rows[i].append("x")
        elif op == "blank":
            rows.insert(i, [])
    text = "\n".join([HEADER, *(",".join(r) for r in rows)]) + "\n"
    return ("\ufeff" + text) if data.draw(st.booleans(), label="bom") else text


@FUZZ
@given(data=st.data())
def test_mutated_trace_csvs(tmp_path_factory: Any, data: st.DataObject) -> None:
    tmp = tmp_path_factory.mktemp("csv")
    out = tmp / "out.yaml"
    file = tmp / "trace.csv"
    file.write_text(mutate_csv(data))
    with no_hang():
        result = cli("trace", "dlrm", file, "--write", out, "--hours", "1")
    assert "Traceback" not in result.output
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 2:
        lines = result.stderr.strip().splitlines()
        assert lines and all(
            line.startswith(tuple(f"makeroom: {p}" for p in (f"{file}: ", "--cpu-node: ", "--gpu-node: ")))
            for line in lines
        ), lines
        assert not out.exists()
        return
    with no_hang():
        run = cli("simulate", out, "--json", "--strategy", "migrate")
    assert run.exit_code in (0, 3), run.output  # what the converter wrote always runs
    strict_json(run.stdout)
