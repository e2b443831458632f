"""`fae view` in headless Chromium: a click on a report cell reaches its runs, a click on a run its page; a
run page full of hostile strings runs no script but the explorer's own; screenshots at 1400 and 800 px."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from fae.report.commands import report_page
from fae.report.explorer.server import Explorer, port_of, serve
from fae.store.live import LogReader
from tests.report.browser import find_browser
from tests.report.cdp import Chromium
from tests.report.explorer_log import HOSTILE_RUN, build_explorer_log

pytestmark = pytest.mark.skipif(
    find_browser() is None, reason="no chromium on PATH (Debian package chromium; .ci/run installs it)"
)


def served(log: Path) -> Iterator[str]:
    server = serve(Explorer(LogReader(log), report_page(log), log.name))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port_of(server)}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def browser(tmp_path) -> Iterator[Chromium]:
    opened = Chromium(tmp_path / "profile")
    try:
        yield opened
    finally:
        opened.close()


def test_a_click_on_a_grid_cell_reaches_its_runs_and_a_click_on_a_run_its_page(demo_log, browser, tmp_path):
    target = Path(os.environ.get("FAE_TEST_OUTPUT") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    for base in served(demo_log):
        browser.open(base + "/")
        assert browser.value("document.querySelectorAll('table.data').length") > 5
        for width in (1400, 800):
            browser.screenshot(target / f"report-{width}.png", width)
        # a sort: the overview's runs column, clicked twice, puts its largest value first
        browser.value("document.querySelector('#table-overview th:nth-child(4)').click()")
        browser.value("document.querySelector('#table-overview th:nth-child(4)').click()")
        assert browser.value("document.querySelector('#table-overview th:nth-child(4)').ariaSort") == "descending"
        cell = browser.value("document.querySelector('table.grid tbody a').textContent")
        browser.click("table.grid tbody a")
        assert "/runs?configuration=" in browser.value("location.href")
        runs = browser.value("Array.from(document.querySelectorAll('tbody a')).map(a => a.textContent)")
        assert runs and cell.endswith(f"/{len(runs)}"), (cell, runs)
        browser.click("table.data tbody a")
        assert browser.value("location.pathname") == "/run/" + quote(runs[0], safe="")
        assert browser.value("document.querySelector('h1').textContent") == f"run {runs[0]}"
        assert browser.value("document.querySelectorAll('ol.timeline li').length") > 5
        assert browser.value("document.querySelector('#verdicts tbody tr') !== null")
        for width in (1400, 800):
            browser.screenshot(target / f"run-{width}.png", width)
    assert browser.console == [], f"console: {browser.console}"
    print(f"screenshots in {target}")


def test_a_hostile_run_page_runs_no_script_of_the_log(tmp_path, browser):
    log = build_explorer_log(tmp_path / "explorer.duckdb")
    for base in served(log):
        browser.open(base + "/run/" + quote(HOSTILE_RUN, safe=""))
        assert browser.value("typeof window.pwned") == "undefined", browser.value("String(window.pwned)")
        assert browser.dialogs == []
        assert browser.value("document.querySelectorAll('script').length") == 1
        assert browser.value("document.querySelectorAll('img, main b').length") == 0
        # the explorer's own script ran (the policy allows it): each table got its filter box
        assert browser.value("document.querySelectorAll('input.filter').length") >= 1
        assert "window.pwned=1" in browser.value("document.body.textContent")
