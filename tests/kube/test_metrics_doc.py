"""The metrics are named as controller projects name them, their help text names their labels, and the
table of docs/kube.md lists exactly them."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase

from makeroom.controller import TickReport
from makeroom.kube.metrics import Metrics

DOC = Path(__file__).parents[2] / "docs" / "kube.md"
NAME = re.compile(r"^makeroom_(controller|relocation|consolidation|api|cache)_[a-z_]+$")


def families() -> dict[str, tuple[str, set[str], str]]:
    """name -> (type, labels, help), names as exported (counters with _total)."""
    out = {}
    for metric in vars(Metrics()).values():
        if isinstance(metric, MetricWrapperBase):
            (family,) = metric.describe()
            name = family.name + ("_total" if family.type == "counter" else "")
            out[name] = (family.type, set(metric._labelnames), family.documentation)
    return out


def documented() -> dict[str, tuple[str, set[str]]]:
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`makeroom_"):
            labels = set(re.findall(r"`([a-z_]+)`:", cells[2])) or set(re.findall(r"`([a-z_]+)`", cells[2]))
            rows[cells[0].strip("`")] = (cells[1], labels)
    return rows


def test_names_follow_subsystem_and_unit_conventions() -> None:
    for name, (kind, _, _) in families().items():
        assert NAME.match(name), name
        assert name.endswith("_total") == (kind == "counter"), name
        if kind == "histogram":
            assert name.endswith("_seconds"), name


def test_help_text_names_every_label() -> None:
    for name, (_, labels, text) in families().items():
        for label in labels:
            assert f"({label}" in text, f"{name}: help does not name its label {label}"


def test_the_doc_table_lists_exactly_the_metrics() -> None:
    exported = {name: (kind, labels) for name, (kind, labels, _) in families().items()}
    assert documented() == exported


def test_a_report_is_counted_once_with_consolidations_and_plan_times() -> None:
    metrics = Metrics()
    report = TickReport(
        started=["a"],
        consolidating=["gpu-0"],
        consolidation_stopped=["gpu-1"],
        moves=3,
        evictions=2,
        relocation_plan_seconds=0.25,
    )
    metrics.count(report)
    text = metrics.render().decode()
    for sample in (
        'makeroom_relocation_outcomes_total{outcome="started"} 1.0',
        'makeroom_relocation_outcomes_total{outcome="done"} 0.0',
        'makeroom_consolidation_outcomes_total{outcome="started"} 1.0',
        'makeroom_consolidation_outcomes_total{outcome="stopped"} 1.0',
        "makeroom_controller_moves_total 3.0",
        "makeroom_controller_evictions_total 2.0",
        'makeroom_controller_plan_seconds_sum{kind="relocation"} 0.25',
        'makeroom_controller_plan_seconds_count{kind="consolidation"} 0.0',
    ):
        assert sample in text, sample
