"""Timeline pictures: files are written and valid, numbers in the HTML match the result, bytes repeat."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import makeroom.examples
from makeroom.controller import Strategy
from makeroom.errors import InputError
from makeroom.report import render_comparison, render_demo, render_run
from makeroom.report.events import aggregate, row_order
from makeroom.report.figure import Section, build_figure, style
from makeroom.report.series import DRAW_BINS, RunView, keep_indices
from makeroom.report.units import duration, money
from makeroom.scenario import load_scenario
from makeroom.sim import Options, Result, Simulation
from makeroom.sim.recorder import Sample, TimelineEvent
from makeroom.sim.results import GroupResult, WorkloadResult

EXAMPLES = Path(makeroom.examples.__file__).parent
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(seed: str, strategy: str) -> Result:
    return Simulation(load_scenario(EXAMPLES / f"{seed}.yaml"), Options(Strategy(strategy))).run()


@pytest.fixture(scope="module")
def seed2() -> list[Result]:
    return [run("seed-2-wait-for-cpu-node", s) for s in ("none", "preemption")]


@pytest.fixture(scope="module")
def seed3() -> list[Result]:
    return [run("seed-3-no-needless-gpu-node", s) for s in ("none", "preemption")]


@pytest.fixture(scope="module")
def comparison_page(seed2: list[Result], tmp_path_factory: pytest.TempPathFactory) -> str:
    out = render_comparison(seed2, tmp_path_factory.mktemp("report") / "cmp.html")
    return out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def demo_page(seed2: list[Result], seed3: list[Result], tmp_path_factory: pytest.TempPathFactory) -> str:
    out = render_demo([seed2, seed3], tmp_path_factory.mktemp("report") / "demo.html")
    return out.read_text(encoding="utf-8")


class Tables(HTMLParser):
    """Rows of every <table> of a page, keyed by the <h3> (strategy) above them and the caption."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[tuple[str, str], list[list[str]]] = {}
        self.heading = ""
        self.caption = ""
        self.row: list[str] | None = None
        self.text: list[str] | None = None
        self.svgs = 0
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "svg":
            self.svgs += 1
        elif tag == "tr":
            self.row = []
        elif tag in ("td", "th", "caption", "h3"):
            self.text = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.row is not None and self.text is not None:
            self.row.append("".join(self.text).strip())
        elif tag == "caption" and self.text is not None:
            self.caption = "".join(self.text).strip()
        elif tag == "h3" and self.text is not None:
            self.heading = "".join(self.text).strip()
        elif tag == "tr" and self.row is not None:
            self.tables.setdefault((self.heading, self.caption), []).append(self.row)
            self.row = None
        if tag in ("td", "th", "caption", "h3"):
            self.text = None

    def handle_data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(data)


def parse(page: str) -> Tables:
    parser = Tables()
    parser.feed(page)
    return parser


def fmt(x: Any) -> str:
    """The table's number format: '—' for null, integers plainly, floats with %g."""
    if x is None:
        return "—"
    return str(x) if isinstance(x, int) else f"{x:g}"


# --- files and formats -------------------------------------------------------------------------------


def test_png_is_written_and_returned(tmp_path: Path, seed2: list[Result]) -> None:
    out = render_run(seed2[1], tmp_path / "run.png")
    assert out == tmp_path / "run.png"
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_comparison_png_and_missing_parent_dir(tmp_path: Path, seed2: list[Result]) -> None:
    out = render_comparison(seed2, tmp_path / "deeper" / "cmp.PNG")
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_svg_parses_and_names_scenario_and_strategies(tmp_path: Path, seed2: list[Result]) -> None:
    out = render_comparison(seed2, tmp_path / "cmp.svg")
    root = ET.parse(out).getroot()
    assert root.tag.endswith("svg")
    text = " ".join(t for t in root.itertext())
    assert seed2[0].data["scenario"] in text
    for r in seed2:
        assert r.data["strategy"] in text


def test_html_is_one_self_contained_page(comparison_page: str) -> None:
    page = comparison_page
    parsed = parse(page)
    assert parsed.svgs == 1
    assert not parsed.tags & {"script", "link", "img", "iframe"}
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page
    assert 'href="http' not in page and "src=" not in page


def test_html_has_one_side_by_side_table_with_the_numbers_of_each_run(
    comparison_page: str, seed2: list[Result]
) -> None:
    assert comparison_page.count('<table class="comparison">') == 1
    rows = parse(comparison_page).tables[("Side by side (20m00s simulated)", "")]
    header, body = rows[0], {r[0]: r[1:] for r in rows[1:]}
    assert [h.removesuffix(" (best)") for h in header[1:]] == [str(r.strategy) for r in seed2]
    for name in ("text-generator", "iris-classifier"):
        label = next(k for k in body if k.startswith(f"{name} (priority"))
        assert body[label] == [duration(r.workloads[name].time_to_ready_s) for r in seed2]
    assert body["pods removed (all workloads)"] == [f"{r.evictions:,}" for r in seed2]
    assert body["cost over the simulated 20m00s"] == [money(r.cost) for r in seed2]
    # "evicted" counts Evictions only: preemption's victims have their own row, and the rows add up
    iris = [r.workloads["iris-classifier"] for r in seed2]
    kinds = [k for k in body if k.startswith("pods ") and k != "pods removed (all workloads)"]
    assert "pods evicted" in kinds and "pods preempted" in kinds
    assert [sum(int(body[k][i]) for k in kinds if k != "pods pending at end") for i in range(len(seed2))] == [
        w.evicted for w in iris
    ]
    assert body["pods pending at end"] == [str(len(r.pending_at_end)) for r in seed2]


def test_html_tells_what_happened_and_the_verdict(comparison_page: str) -> None:
    # the goals that explain the standings come first, then who won, then the standings as a table
    start = comparison_page.index('<div class="verdict"><p>verdict (goals in order: ')
    verdict = comparison_page[start : comparison_page.index("</div>", start)]
    assert verdict.index("verdict (goals") < verdict.index('<p class="best">best: preemption')
    assert verdict.index("best: preemption") < verdict.index('<table class="standings">')
    assert (
        verdict.count("<tr") == 1 + len({"none", "preemption"})
        and "<th>unavailable replica·s</th>" in verdict
    )
    assert (
        "What happened under none" in comparison_page and "What happened under preemption" in comparison_page
    )
    assert "FailedScheduling" in comparison_page and "NotTriggerScaleUp" in comparison_page


def test_demo_html_has_a_section_per_scenario(
    demo_page: str, seed2: list[Result], seed3: list[Result]
) -> None:
    page = demo_page
    assert page.count("<section>") == 2
    assert parse(page).svgs == 2
    for r in (seed2[0], seed3[0]):
        assert f"<h2>{r.data['scenario']}</h2>" in page


def test_demo_html_figures_are_valid_svg_with_ids_unique_on_the_page(demo_page: str) -> None:
    import re

    page = demo_page
    svgs = re.findall(r"<svg\b.*?</svg>", page, flags=re.DOTALL)
    assert len(svgs) == 2
    for svg in svgs:
        assert ET.fromstring(svg).tag.endswith("svg")
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    refs = re.findall(r'(?:url\(#|href="#)([^"\)]+)', page)
    assert refs and set(refs) <= set(ids)


def test_demo_png_stacks_scenarios(tmp_path: Path, seed2: list[Result], seed3: list[Result]) -> None:
    assert render_demo([seed2, seed3], tmp_path / "demo.png").read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize("name", ["out.pdf", "out.txt", "out", "out.svg.gz"])
def test_other_suffixes_are_refused(tmp_path: Path, seed2: list[Result], name: str) -> None:
    with pytest.raises(InputError) as caught:
        render_run(seed2[0], tmp_path / name)
    assert caught.value.file == str(tmp_path / name)
    expected = "expected a report path ending in .png, .svg or .html"
    assert [p.message for p in caught.value.problems] == [expected]
    assert not (tmp_path / name).exists()


# --- determinism -------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".svg", ".html"])
def test_same_input_same_bytes(tmp_path: Path, seed3: list[Result], suffix: str) -> None:
    a = render_comparison(seed3, tmp_path / f"a{suffix}").read_bytes()
    b = render_comparison(seed3, tmp_path / f"b{suffix}").read_bytes()
    assert a == b
    assert b"<dc:date>" not in a


RENDER_IN_A_FRESH_PROCESS = """
import sys
from pathlib import Path
from makeroom.scenario import load_scenario
from makeroom.sim import Options, Simulation
from makeroom.report import render_demo
scenario, out = Path(sys.argv[1]), Path(sys.argv[2])
runs = [Simulation(load_scenario(scenario), Options(s)).run() for s in ("none", "preemption")]
render_demo([runs], out)
"""


def test_same_bytes_across_processes_and_hash_seeds(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    scenario = EXAMPLES / "seed-3-no-needless-gpu-node.yaml"
    outputs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"demo-{hash_seed}.html"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run(
            [sys.executable, "-c", RENDER_IN_A_FRESH_PROCESS, str(scenario), str(out)], env=env, check=True
        )
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


def test_rendering_leaves_global_matplotlib_settings_alone(tmp_path: Path, seed2: list[Result]) -> None:
    import matplotlib as mpl

    before = dict(mpl.rcParams)
    render_run(seed2[0], tmp_path / "run.svg")
    assert dict(mpl.rcParams) == before


# --- layout ------------------------------------------------------------------------------------------


def test_comparison_has_a_column_per_run_and_shares_y_per_row(seed3: list[Result]) -> None:
    with style():
        section = Section.of([RunView.of(r) for r in seed3])
        fig = build_figure([section])
    axes = fig.axes
    assert len(axes) == len(section.rows) * len(seed3)
    for i in range(len(section.rows)):
        row = axes[i * len(seed3) : (i + 1) * len(seed3)]
        assert len({ax.get_ylim() for ax in row}) == 1
    assert len({ax.get_xlim() for ax in axes}) == 1


def test_workloads_are_ordered_by_priority_then_given_rows(seed2: list[Result]) -> None:
    section = Section.of([RunView.of(r) for r in seed2])
    by_priority = sorted(seed2[0].data["workloads"].items(), key=lambda kv: -kv[1]["priority"])
    assert section.workloads == [name for name, _ in by_priority]
    assert [r.workload for r in section.rows if r.kind == "workload"] == section.workloads


def test_a_run_without_samples_still_renders(tmp_path: Path, seed2: list[Result]) -> None:
    bare = replace(seed2[1], samples=())
    assert render_run(bare, tmp_path / "bare.png").read_bytes()[:8] == PNG_MAGIC


# --- events ------------------------------------------------------------------------------------------


def test_events_are_filtered_grouped_and_counted() -> None:
    events = [
        TimelineEvent(60.0, "pod_created", {"pod": "web-1", "workload": "web"}),
        TimelineEvent(60.0, "preempted", {"pod": "web-1", "workload": "web", "node": "n"}),
        TimelineEvent(60.0, "preempted", {"pod": "web-2", "workload": "web", "node": "n"}),
        TimelineEvent(70.0, "scale_up", {"group": "cpu", "nodes": 3, "pods": []}),
        TimelineEvent(80.0, "moved", {"pod": "web-3"}),
        TimelineEvent(90.0, "brand_new_kind"),
        TimelineEvent(95.0, "no_scale_up", {"pods": 2}),
        TimelineEvent(96.0, "pod_ready", {"pod": "web-3"}),
    ]
    marks = aggregate(events, 600.0, ["web"])
    got = [(m.kind, m.key, m.count) for m in marks]
    assert got == [
        ("preempted", "web", 2),
        ("scale_up", "cpu", 3),
        ("moved", "web", 1),
        ("brand_new_kind", None, 1),
        ("no_scale_up", None, 1),  # the autoscaler's refusal is drawn: it explains a wait
    ]
    order = ["scale_up", "no_scale_up", "preempted", "moved", "brand_new_kind"]
    assert row_order(m.kind for m in marks) == order


def test_unknown_and_relocation_kinds_get_rows(tmp_path: Path, seed2: list[Result]) -> None:
    extra = (
        TimelineEvent(400.0, "relocation_started", {"workload": "iris-classifier"}),
        TimelineEvent(500.0, "something_else"),
    )
    result = replace(seed2[1], events=(*seed2[1].events, *extra))
    view = RunView.of(result)
    kinds = Section.of([view]).kinds
    assert "relocation_started" in kinds and "something_else" in kinds
    assert "pod_created" not in kinds
    render_run(result, tmp_path / "extra.svg")


# --- thinning ----------------------------------------------------------------------------------------


def test_thinning_is_exact_when_few_values_change() -> None:
    a = np.array([1, 1, 1, 2, 2, 3, 3, 3], dtype=np.int64)
    b = np.array([0, 0, 5, 5, 5, 5, 5, 5], dtype=np.int64)
    assert keep_indices([a, b], len(a)).tolist() == [0, 2, 3, 5, 7]


def test_thinning_bounds_points_and_keeps_extremes() -> None:
    rng = np.random.default_rng(7)
    n = 100_000
    a = np.cumsum(rng.choice([-1, 0, 1], size=n)).astype(np.int64)
    b = rng.integers(0, 50, size=n).astype(np.int64)
    keep = keep_indices([a, b], n)
    assert keep[0] == 0 and keep[-1] == n - 1
    assert np.all(np.diff(keep) > 0)
    assert len(keep) <= 2 * DRAW_BINS * (1 + 2)  # first, last, and min and max of each column per bin
    for col in (a, b):
        assert col[keep].max() == col.max() and col[keep].min() == col.min()


def _big_result(n: int) -> Result:
    rng = np.random.default_rng(3)
    ready = np.clip(40 + np.cumsum(rng.choice([-1, 0, 1], size=n)), 0, 60)
    nodes = np.clip(3 + np.cumsum(rng.choice([-1, 0, 1], size=n, p=[0.01, 0.98, 0.01])), 1, 10)
    samples = tuple(
        Sample(
            float(i),
            {"cpu": int(nodes[i]) + 1},
            {"cpu": int(nodes[i])},
            {"web": int(ready[i])},
            {"web": 60},
            int(60 - ready[i]),
        )
        for i in range(n)
    )
    events = tuple(TimelineEvent(float(i), "evicted", {"workload": "web"}) for i in range(0, n, 7))
    return Result(
        scenario="big",
        strategy=Strategy.EVICT,
        seed=0,
        duration_s=float(n - 1),
        workloads={
            "web": WorkloadResult(
                priority=1,
                desired=60,
                ready_at_end=int(ready[-1]),
                time_to_ready_s=None,
                min_ready=None,
                unavailable_replica_seconds=1.5,
                evicted=len(events),
            )
        },
        node_groups={
            "cpu": GroupResult(
                nodes_at_end=int(nodes[-1]),
                peak_nodes=11,
                nodes_added=9,
                nodes_removed=8,
                node_hours=1.0,
                cost=0.5,
            )
        },
        evictions=len(events),
        cost=0.5,
        pods=(),
        events=events,
        samples=samples,
    )


def test_a_long_run_is_drawn_with_a_bounded_number_of_points(tmp_path: Path) -> None:
    result = _big_result(100_000)
    with style():
        fig = build_figure([Section.of([RunView.of(result)])])
    sizes = [np.size(line.get_xdata()) for ax in fig.axes for line in ax.get_lines()]
    assert max(sizes) <= 2 * 2 * DRAW_BINS * (1 + 2 * 2)
    assert render_run(result, tmp_path / "big.png").read_bytes()[:8] == PNG_MAGIC


def test_events_take_the_colour_of_their_pods_workload_or_nodes_group() -> None:
    events = [
        TimelineEvent(1.0, "cordon", {"node": "cpu-3"}),
        TimelineEvent(2.0, "evicted", {"pod": "iris-classifier-12", "node": "cpu-3"}),
        TimelineEvent(3.0, "cordon", {"node": "elsewhere"}),
    ]
    marks = aggregate(events, 60.0, {"iris-classifier"}, {"cpu"})
    assert [m.key for m in marks] == ["cpu", "iris-classifier", None]


def test_a_demo_keeps_one_colour_per_name_across_scenarios(seed2: list[Result]) -> None:
    from makeroom.report.figure import Palette

    only_iris = replace(
        seed2[0], workloads={"iris-classifier": seed2[0].workloads["iris-classifier"]}, samples=()
    )
    views = [[RunView.of(r) for r in seed2], [RunView.of(only_iris)]]
    palette = Palette.of([v for c in views for v in c])
    first, second = (Section.of(c, palette) for c in views)
    assert first.palette["iris-classifier"] == second.palette["iris-classifier"]
    assert first.palette["iris-classifier"] != first.palette["text-generator"]
    assert first.palette["cpu"] not in {first.palette[w] for w in first.workloads}


def test_nothing_to_draw_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one result"):
        render_comparison([], tmp_path / "empty.png")


def test_many_workloads_share_one_panel(tmp_path: Path) -> None:
    names = [f"w{i}" for i in range(13)]
    samples = tuple(
        Sample(float(t), {"cpu": 1}, {"cpu": 1}, dict.fromkeys(names, t), dict.fromkeys(names, 2), 0)
        for t in range(3)
    )
    result = Result(
        scenario="wide",
        strategy=Strategy.NONE,
        seed=0,
        duration_s=2.0,
        workloads={n: WorkloadResult(i, 2, 2, 0.0, 2, 0.0, 0) for i, n in enumerate(names)},
        node_groups={},
        evictions=0,
        cost=0.0,
        pods=(),
        events=(),
        samples=samples,
    )
    section = Section.of([RunView.of(result)])
    assert [r.kind for r in section.rows] == ["nodes", "workloads", "pending"]
    assert section.workloads == names[::-1]
    assert render_run(result, tmp_path / "wide.svg").stat().st_size > 0
