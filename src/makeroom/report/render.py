"""Public entry points: write the timeline of one run, of several strategies, or of several scenarios."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from makeroom.errors import InputError, Problem
from makeroom.sim.results import Result

if TYPE_CHECKING:
    from makeroom.report.figure import Palette, Section
    from makeroom.report.series import RunView

FORMATS = (".png", ".svg", ".html")
BAD_SUFFIX = "expected a report path ending in .png, .svg or .html"

# Nothing time- or version-dependent goes into the files.
_SVG_METADATA = {"Date": None, "Creator": "makeroom"}
_PNG_METADATA = {"Software": "makeroom"}


def render_run(result: Result, path: Path) -> Path:
    """Write the timeline of one run to ``path`` (.png, .svg or .html) and return the path."""
    return render_demo([[result]], path)


def render_comparison(results: Sequence[Result], path: Path) -> Path:
    """Write several runs of one scenario side by side, one column per run, y-axes shared per row."""
    return render_demo([results], path)


def render_demo(comparisons: Sequence[Sequence[Result]], path: Path) -> Path:
    """Write one block per scenario (each a comparison), stacked in one PNG/SVG or one HTML page."""
    path = Path(path)
    fmt = _format_of(path)
    blocks = [list(c) for c in comparisons]
    if not blocks or any(not c for c in blocks):
        raise ValueError("render needs at least one result in every comparison")
    # Imported here: matplotlib takes a while to load, and only drawing needs it.
    from makeroom.report import html
    from makeroom.report.figure import Palette, Section, style
    from makeroom.report.series import RunView

    with style():
        views = [[RunView.of(r) for r in c] for c in blocks]
        palette = Palette.of([v for c in views for v in c])  # one colour per name across scenarios
        sections = [Section.of(c, palette) for c in views]
        if fmt == ".png":
            content = _png(sections)
        elif fmt == ".svg":
            content = _svg(sections).encode("utf-8")
        else:
            single = len(sections) == 1
            body = "\n".join(
                html.section(
                    None if single else _title(s),
                    [_svg([part]) for part in _parts(v, palette)],
                    c,
                    prefix=f"s{i}-",
                )
                for i, (s, v, c) in enumerate(zip(sections, views, blocks, strict=True))
            )
            content = html.page(_page_title(sections), body).encode("utf-8")
    # Written only once it is whole: a failure leaves no half-written picture behind.
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


# Runs per figure on the page: two columns keep the text at its size on a laptop's screen; wider
# screens put the figures of a scenario side by side.
HTML_COLUMNS = 2


def _parts(views: Sequence[RunView], palette: Palette) -> list[Section]:
    """A scenario's runs as figures of HTML_COLUMNS runs each, sharing rows, y-axes and colours."""
    from makeroom.report.figure import Section

    return [
        Section.of(views[i : i + HTML_COLUMNS], palette, peers=views, title=False)
        for i in range(0, len(views), HTML_COLUMNS)
    ]


def _format_of(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise InputError(str(path), [Problem("", BAD_SUFFIX)])
    return suffix


def _png(sections: Sequence[Section]) -> bytes:
    from makeroom.report.figure import build_figure

    buf = io.BytesIO()
    build_figure(sections).savefig(buf, format="png", metadata=_PNG_METADATA)
    return buf.getvalue()


def _svg(sections: Sequence[Section]) -> str:
    from makeroom.report.figure import build_figure

    fig = build_figure(sections)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata=_SVG_METADATA)
    return buf.getvalue()


def _title(section: Section) -> str:
    return " · ".join(dict.fromkeys(r.scenario for r in section.runs))


def _page_title(sections: Sequence[Section]) -> str:
    if len(sections) == 1:
        return f"makeroom: {_title(sections[0])}"  # the page's only heading: the scenario
    return "makeroom: relocation timelines"
