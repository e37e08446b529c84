"""Reading the files makeroom is given (scenarios, dumps, groups files) into plain data, refusing what
no person or tool writes on purpose: a key written twice, a key that is a list or a mapping, nesting
deeper than ``limits.MAX_DEPTH``, aliases that expand into millions of nodes. Every failure is an
InputError that names the file (and the line where YAML says where)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

from makeroom.errors import InputError, Problem
from makeroom.model.limits import MAX_DEPTH

MAX_ALIASED = 100_000
"""Nodes that aliases may add to a YAML document (``*anchor`` copies what it names): a few shared
defaults are fine, an alias bomb is refused before it is expanded."""


class _Loader(yaml.SafeLoader):
    """Safe YAML with the refusals above."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliased = 0
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            node = super().compose_node(parent, index)
            if node is not None and node.end_mark is None:  # an alias inside what it names
                raise yaml.composer.ComposerError(None, None, "an alias refers to the node it is in", mark)
            self._aliased += self._size(node) if node is not None else 0
            if self._aliased > MAX_ALIASED:
                raise yaml.composer.ComposerError(
                    None, None, f"aliases expand to more than {MAX_ALIASED} nodes", mark
                )
            return node
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def _size(self, node: yaml.Node) -> int:
        """Nodes under ``node`` with aliases expanded (memoised, so shared parts count once each time
        they are named, without walking them again)."""
        found = self._sizes.get(id(node))
        if found is not None:
            return found
        size = 1
        if isinstance(node, yaml.SequenceNode):
            size += sum(self._size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            size += sum(self._size(k) + self._size(v) for k, v in node.value)
        self._sizes[id(node)] = size
        return size


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        mark = key_node.start_mark
        if not isinstance(key_node, yaml.ScalarNode):
            raise yaml.constructor.ConstructorError(
                None, None, f"expected a plain key, found a {key_node.id}", mark
            )
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} appears twice (line {mark.line + 1})", mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_text(path: Path, what: str = "a file") -> str:
    file = str(path)
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(file, [Problem("", "no such file")]) from None
    except IsADirectoryError:
        raise InputError(file, [Problem("", f"expected {what}, found a directory")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(file, [Problem("", f"cannot read: {exc}")]) from None


def parse_yaml(text: str, file: str) -> Any:
    """YAML text to data, or InputError naming ``file`` and the line."""
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise InputError(file, [Problem("", f"not valid YAML: {where}{exc.problem}")]) from None
    except yaml.YAMLError as exc:
        raise InputError(file, [Problem("", f"not valid YAML: {exc}")]) from None
    except RecursionError:  # pragma: no cover - the depth limit comes first
        raise InputError(
            file, [Problem("", f"not valid YAML: nested deeper than {MAX_DEPTH} levels")]
        ) from None


def read_yaml(path: Path) -> Any:
    """Parse a YAML file, turning every I/O or syntax failure into an InputError that names the file."""
    return parse_yaml(_read_text(path), str(path))


_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


def json_depth(text: str) -> int:
    """How deep the brackets of JSON text nest, outside strings, at the speed of C: no walk over the
    parsed objects, and for the usual file one pass that ignores strings (their brackets can only
    raise that count, so when it is low enough it is the answer)."""
    data = text.encode("utf-8")
    bound = _deepest(np.frombuffer(data.translate(None, _NOT_BRACKETS), dtype=np.uint8))
    if bound <= MAX_DEPTH:
        return bound
    raw = np.frombuffer(_ESCAPE.sub(b"", data), dtype=np.uint8)
    outside = np.bitwise_xor.accumulate(raw == ord('"'), dtype=np.uint8) == 0  # quotes toggle "inside"
    brackets = (raw == ord("[")) | (raw == ord("{")) | (raw == ord("]")) | (raw == ord("}"))
    return _deepest(raw[brackets & outside])


def _deepest(brackets: npt.NDArray[np.uint8]) -> int:
    if not len(brackets):
        return 0
    steps = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1)
    return int(np.cumsum(steps, dtype=np.int64).max())


def read_data(path: Path) -> Any:
    """JSON (``kubectl get -o json``, parsed fast) or YAML (scenarios and ``-o yaml`` dumps)."""
    text = _read_text(path)
    if text.lstrip().startswith("{"):
        file = str(path)
        if json_depth(text) > MAX_DEPTH:  # before json.loads recurses into it
            raise InputError(file, [Problem("", f"not valid JSON: nested deeper than {MAX_DEPTH} levels")])
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            return parse_yaml(text, file)  # not JSON after all: YAML says where it breaks
    return parse_yaml(text, str(path))
