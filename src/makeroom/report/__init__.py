"""Timeline pictures of simulation runs: PNG, SVG, or one self-contained HTML page."""

from makeroom.report.render import render_comparison, render_demo, render_run

__all__ = ["render_comparison", "render_demo", "render_run"]
