"""`fae report` opened in headless Chromium from file://: no console errors, no network, every figure laid out."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fae.cli.main import app
from fae.report import scope
from fae.report.explorer.markup import POLICY
from tests.report.browser import find_browser, render, screenshot
from tests.report.synthetic import build

pytestmark = pytest.mark.skipif(
    find_browser() is None, reason="no chromium on PATH (apt-get install chromium; .ci/run installs it)"
)

# Appended to a copy of the page only: measures each figure's drawing as the browser laid it out.
PROBE = """<script>
document.body.dataset.figures = Array.from(document.querySelectorAll('section.figure')).map(s => {
  const box = s.querySelector('svg') ? s.querySelector('svg').getBoundingClientRect() : {width: 0, height: 0};
  return s.id + ':' + Math.round(box.width) + 'x' + Math.round(box.height);
}).join(' ');
</script>"""
FIGURES = tuple(scope.FIGURES)  # every figure: this log's models are priced


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    work = tmp_path_factory.mktemp("report")
    log = build(work / "synthetic.duckdb")
    page = work / "report.html"
    result = CliRunner().invoke(app, ["report", "--log", str(log), "-o", str(page), "--price", "m-a=1/2"])
    assert result.exit_code == 0, result.output
    return page


def test_the_report_loads_in_chromium_without_errors_and_shows_every_figure(report, tmp_path):
    probed = tmp_path / "probed.html"
    page = report.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>")
    # the probe is this test's script, not the page's: the page's policy (which would refuse it) is lifted
    page = page.replace(f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">', "")
    probed.write_text(page, encoding="utf-8")
    page = render(probed, tmp_path)
    assert page.console == [], f"console messages: {page.console}"
    found = re.search(r'data-figures="([^"]*)"', page.dom)
    assert found, f"the probe did not run: {page.dom[:500]}"
    boxes = dict(item.split(":") for item in found.group(1).split())
    assert sorted(boxes) == sorted(FIGURES)
    for figure, size in boxes.items():
        width, height = map(int, size.split("x"))
        assert width > 300 and height > 150, f"{figure} is laid out at {size}"
    # the test output dir: FAE_TEST_OUTPUT when set (CI keeps it), else the test's own tmp dir
    target = Path(os.environ.get("FAE_TEST_OUTPUT") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    shot = screenshot(report, tmp_path, target / "report.png", 7000)
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 50_000


def test_the_check_catches_a_page_with_a_script_error(tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text("<html><body><p>x</p><script>throw new Error('figure code broke')</script></body></html>")
    page = render(broken, tmp_path)
    assert any("figure code broke" in line for line in page.console), page.console
