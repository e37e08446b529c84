"""Problems found in user input, reported all at once with the file and the key path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

MAX_LINES = 50
"""Problems shown of one input: enough to fix a file, few enough to read."""


@dataclass(frozen=True, slots=True)
class Problem:
    path: str  # key path such as workloads[1].requests.cpu; "" for the whole file
    message: str

    def render(self, file: str) -> str:
        return f"{file}: {self.path}: {self.message}" if self.path else f"{file}: {self.message}"


class InputError(Exception):
    """Input that makeroom refuses before doing anything: the CLI exits with status 2."""

    def __init__(self, file: str, problems: Sequence[Problem]) -> None:
        self.file = file
        self.problems = list(problems)
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        """One line per problem; past ``MAX_LINES`` (a dump of 10,000 pods of one broken template),
        a last line says how many more there are."""
        lines = [p.render(self.file) for p in self.problems[:MAX_LINES]]
        if len(self.problems) > MAX_LINES:
            lines.append(f"{self.file}: ... and {len(self.problems) - MAX_LINES} more problems")
        return lines


def key_path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def from_validation_error(exc: ValidationError) -> list[Problem]:
    problems = []
    for err in exc.errors(include_url=False):
        loc = [p for p in err["loc"] if not (isinstance(p, str) and "[" in p)]
        kind = err["type"]
        msg = str(err["msg"])
        if kind == "missing":
            msg = "missing required key"
        elif kind == "extra_forbidden":
            msg = "unknown key"
        elif kind == "string_pattern_mismatch":
            msg = f"expected a lowercase name of a-z, 0-9 and '-', got {err.get('input')!r}"
        elif kind == "too_short":
            msg = "expected at least one entry"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        elif msg.startswith("Input should be"):
            msg = "expected" + msg[len("Input should be") :] + f", got {err.get('input')!r}"
        problems.append(Problem(key_path(loc), msg))
    return problems
