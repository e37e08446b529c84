"""Every command but ``run`` prints makeroom's warnings as readable lines with their fields, not as
Python's bare last-resort message."""

from __future__ import annotations

import logging

import pytest

from makeroom.cli.common import ConsoleFormatter, setup_console_logging


def record(msg: str, **extra: object) -> logging.LogRecord:
    r = logging.LogRecord("makeroom.controller.steps", logging.WARNING, __file__, 1, msg, None, None)
    r.__dict__.update(extra)
    return r


def test_a_warning_reads_as_one_line_with_its_fields() -> None:
    line = ConsoleFormatter().format(record("relocation rolled back", pod="ns/a", reason="stalled"))
    assert line == "makeroom: warning: relocation rolled back (pod=ns/a, reason=stalled)"
    assert ConsoleFormatter().format(record("no fields")) == "makeroom: warning: no fields"


def test_the_handler_is_added_once_and_only_where_none_is(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    setup_console_logging()
    setup_console_logging()
    assert len(root.handlers) == 1
    logging.getLogger("makeroom.controller.steps").warning(
        "make-before-break fell back to eviction", extra={"pod": "ns/api-1", "why": "no-replacement"}
    )
    logging.getLogger("makeroom.controller.steps").info("not shown")
    err = capsys.readouterr().err
    assert err == (
        "makeroom: warning: make-before-break fell back to eviction (pod=ns/api-1, why=no-replacement)\n"
    )

    taken = [logging.NullHandler()]
    monkeypatch.setattr(root, "handlers", taken)
    setup_console_logging()
    assert root.handlers == taken  # run's JSON handler, or a test runner's, is left alone
