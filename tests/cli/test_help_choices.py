"""Every choice a command's help lists is accepted, and every choice it accepts is listed (issue 25:
`plan -h` listed `-o wide`, which plan refuses; `run -h` left out `--log-level error`, which run takes).

Each case names the flag, the words the help may list (every value of that kind anywhere in makeroom,
so that a listed value the command refuses is caught), and the values the command accepts. A value is
tried on the command line with an input that fails later (a missing file, a bad --interval), so that
only the flag's own check can refuse it."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from makeroom.cli import commands  # noqa: F401  (registers every command on the app)
from makeroom.cli.app import app
from makeroom.cli.common import Output
from makeroom.controller import Strategy
from makeroom.kube.options import NominationMode
from makeroom.model import AutoscalerKind

FORMATS = [o.value for o in Output]
STRATEGIES = [s.value for s in Strategy]
AUTOSCALERS = [a.value for a in AutoscalerKind]
LEVELS = ["debug", "info", "warning", "warn", "error", "critical"]
NOMINATIONS = [m.value for m in NominationMode]
MISSING = "/nonexistent/scenario.yaml"
LATER = ["--interval", "bogus"]  # run: refused after every choice flag is checked

CASES = [
    # (command, flag, universe, accepted, the command line that tries a value V)
    (["simulate"], "-o", FORMATS, FORMATS, ["simulate", MISSING, "-o", "V"]),
    (["compare"], "-o", FORMATS, FORMATS, ["compare", MISSING, "-o", "V"]),
    (["demo"], "-o", FORMATS, FORMATS, ["demo", "-o", "V", "--report", "/nonexistent/x.html"]),
    (["plan"], "-o", FORMATS, ["table", "json", "yaml"], ["plan", MISSING, "-o", "V"]),
    (["bench", "sim"], "-o", FORMATS, ["table", "json", "yaml"], None),
    (["bench", "plan"], "-o", FORMATS, ["table", "json", "yaml"], None),
    (["snapshot"], "-o", FORMATS, ["yaml", "json"], None),
    (["simulate"], "--strategy", STRATEGIES, STRATEGIES, ["simulate", MISSING, "--strategy", "V"]),
    (["compare"], "--strategies", STRATEGIES, STRATEGIES, ["compare", MISSING, "--strategies", "V"]),
    (
        ["demo"],
        "--strategies",
        STRATEGIES,
        STRATEGIES,
        ["demo", "--strategies", "V", "--report", "/nonexistent/x.html"],
    ),
    (["simulate"], "--autoscaler", AUTOSCALERS, AUTOSCALERS, ["simulate", MISSING, "--autoscaler", "V"]),
    (["compare"], "--autoscalers", AUTOSCALERS, AUTOSCALERS, ["compare", MISSING, "--autoscalers", "V"]),
    (["run"], "--strategy", STRATEGIES, ["evict", "headroom", "migrate"], ["run", "--strategy", "V", *LATER]),
    (
        ["run"],
        "--log-level",
        LEVELS,
        ["debug", "info", "warning", "error"],
        ["run", "--log-level", "V", *LATER],
    ),
    (["run"], "--nomination", NOMINATIONS, NOMINATIONS, ["run", "--nomination", "V", *LATER]),
]


def help_of(command: list[str], flag: str) -> str:
    """The help paragraph of one flag, its lines joined."""
    text = CliRunner().invoke(app, [*command, "-h"], env={"COLUMNS": "200"}).stdout
    lines = text.splitlines()
    start = next(
        i
        for i, line in enumerate(lines)
        if re.match(rf"\s+(-\w, )?{re.escape(flag)}(, --[\w-]+)?( [A-Z<]\S*)?\s{{2,}}", line)
    )
    para = [lines[start]]
    for line in lines[start + 1 :]:
        if re.match(r"\s+-", line) or not line.strip():
            break
        para.append(line)
    return " ".join(x.strip() for x in para)


@pytest.mark.parametrize(
    ("command", "flag", "universe", "accepted", "line"),
    CASES,
    ids=[f"{' '.join(c[0])} {c[1]}" for c in CASES],
)
def test_the_help_lists_exactly_the_accepted_choices(
    command: list[str], flag: str, universe: list[str], accepted: list[str], line: list[str] | None
) -> None:
    words = set(re.findall(r"[a-z][a-z-]*", help_of(command, flag).split(flag, 1)[1]))
    assert sorted(set(universe) & words) == sorted(accepted), help_of(command, flag)
    if line is None:
        return
    for value in universe:
        result = CliRunner().invoke(app, [value if a == "V" else a for a in line])
        refused = result.exit_code == 2 and result.stderr.startswith(f"makeroom: {flag}:")
        assert refused is (value not in accepted), (value, result.stderr)
