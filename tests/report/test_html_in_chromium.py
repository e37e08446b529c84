"""The HTML report as a person sees it: headless Chromium (Debian's ``chromium``) opens the demo page at a
laptop's width, takes a screenshot, and measures every piece of text and every box on the page.

``make test`` installs Chromium where it is missing (``make browser``). Run on its own, the test is
skipped without a browser, except in CI, where a missing browser is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from makeroom.controller.config import CURES
from makeroom.report import render_demo
from makeroom.scenario import load_scenario
from makeroom.sim.runs import simulate
from tests.builders.scenario import EXAMPLES

WIDTH, HEIGHT = 1440, 900
SMALLEST_SVG_TEXT_PX = 9.5  # matplotlib's smallest text (7.5 pt) at the figure's own size is 10 px
SMALLEST_HTML_TEXT_PX = 12.0

# Runs in the page once it is laid out: the measurements, written into the page for --dump-dom.
MEASURE = """
<script>
window.addEventListener("load", () => {
  const px = (el) => parseFloat(getComputedStyle(el).fontSize);
  const out = {innerWidth: window.innerWidth, scrollWidth: document.documentElement.scrollWidth,
               svgText: [], htmlText: [], overflow: []};
  for (const svg of document.querySelectorAll("figure svg")) {
    const box = svg.getBoundingClientRect();
    const scale = box.width / svg.viewBox.baseVal.width;
    if (box.right > window.innerWidth + 0.5) out.overflow.push("svg right " + box.right);
    for (const t of svg.querySelectorAll("text")) {
      if (t.textContent.trim()) out.svgText.push([px(t) * scale, t.textContent.trim()]);
    }
  }
  for (const el of document.querySelectorAll("p, li, td, th, summary, h1, h2, h3, caption")) {
    if (el.textContent.trim()) out.htmlText.push([px(el), el.tagName]);
    const box = el.getBoundingClientRect();
    if (box.right > window.innerWidth + 0.5 && !el.closest(".wide"))
      out.overflow.push(el.tagName + " right " + box.right);
  }
  const pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def run_chromium(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--hide-scrollbars",
            f"--window-size={WIDTH},{HEIGHT}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,  # seconds on an idle machine; minutes when two cores are shared by eight processes
        check=False,
    )


@pytest.fixture(scope="module")
def browser() -> str:
    found = chromium()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: `make test` installs it (make browser)")
        pytest.skip("chromium is not installed: `make browser` installs it")
    return found


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    comparisons = []
    for path in sorted(EXAMPLES.glob("seed-*.yaml")):
        scenario = load_scenario(path)
        comparisons.append([simulate(scenario, s) for s in CURES])
    return render_demo(comparisons, tmp_path_factory.mktemp("page") / "demo.html")


@pytest.fixture(scope="module")
def measured(browser: str, demo_page: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    probe = demo_page.with_name("measured.html")
    probe.write_text(demo_page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"))
    profile = tmp_path_factory.mktemp("profile")
    done = run_chromium(browser, profile, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="measured">(.*?)</pre>', done.stdout, re.DOTALL)
    assert found, f"no measurements from chromium: {done.stderr[-2000:]}"
    data: dict[str, Any] = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    return data


def test_screenshot_of_the_demo_page(browser: str, demo_page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "demo.png"
    # a virtual-time budget, as for the measurements: the shot is taken when the page's virtual time
    # runs out, not when headless Chromium decides it has loaded (once it never did, under load)
    args = ("--virtual-time-budget=10000", f"--screenshot={shot}")
    done = run_chromium(browser, tmp_path / "profile", *args, demo_page.as_uri())
    assert shot.exists(), done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (WIDTH, HEIGHT)
    assert len(data) > 20_000  # a page with figures and tables, not a blank one


def test_nothing_overflows_the_page(measured: dict[str, Any]) -> None:
    assert measured["scrollWidth"] <= measured["innerWidth"], measured["overflow"]
    assert measured["overflow"] == []


def test_figure_text_is_readable(measured: dict[str, Any]) -> None:
    sizes = measured["svgText"]
    assert len(sizes) > 200  # every figure's text was measured
    small = [(round(px, 1), text) for px, text in sizes if px < SMALLEST_SVG_TEXT_PX]
    assert small == []


def test_page_text_is_readable(measured: dict[str, Any]) -> None:
    sizes = measured["htmlText"]
    assert len(sizes) > 50
    small = [(px, tag) for px, tag in sizes if px < SMALLEST_HTML_TEXT_PX]
    assert small == []
