"""`fae report` writes one self-contained, deterministic page with every figure and the SQL behind it."""

from __future__ import annotations

import html
import re

from typer.testing import CliRunner

from fae.cli.main import app
from fae.report.explorer.markup import SCRIPT
from fae.report.html import render_report
from fae.report.scope import Scope, Table
from fae.report.study import Study
from fae.util.visible import visible
from tests.report.synthetic import build

FIGURES = (  # every figure but the cost front: the synthetic log's models have no list price
    "fig-success",
    "fig-success-light-writes",
    "fig-success-difficulty",
    "fig-success-family",
    "fig-pass-k",
    "fig-variance-share",
    "fig-variance",
    "fig-tool-errors-tool",
    "fig-tool-errors",
    "fig-failure-modes",
    "fig-calls",
    "fig-calls-excess",
    "fig-tokens",
    "fig-tokens-difficulty",
    "fig-tokens-outcome",
    "fig-tokens-calls",
    "fig-token-cv",
)
runner = CliRunner()


def test_the_report_is_self_contained_and_the_same_every_time(tmp_path):
    log = build(tmp_path / "synthetic.duckdb")
    pages = []
    for name in ("one.html", "two.html"):
        result = runner.invoke(app, ["report", "--log", str(log), "-o", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        pages.append((tmp_path / name).read_text(encoding="utf-8"))
    text = pages[0]
    assert pages[0] == pages[1], "two reports of one log differ"
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), "the page loads something remote"
    assert text.count("<script") == 1 and f"<script>{SCRIPT}</script>" in text, "a script besides the sorter"
    assert "@import" not in text
    assert 'id="summary"' in text and "Configuration × task" in text
    for figure in FIGURES:
        assert re.search(rf'id="{figure}".*?<svg\b', text, re.S), figure
    assert text.count("<summary>SQL") == len(FIGURES) + text.count('class="table"')
    assert "SELECT {KEYS}" not in text and "FROM run_results" in text  # the SQL as it runs


def test_a_report_that_cannot_be_written_is_one_line(tmp_path):
    log = build(tmp_path / "synthetic.duckdb")
    result = runner.invoke(app, ["report", "--log", str(log), "-o", str(tmp_path / "missing" / "r.html")])
    assert result.exit_code == 1 and "cannot write the report" in result.output, result.output


def test_every_value_on_the_page_is_escaped_text():
    """A value from the log is HTML-escaped and its hidden characters (a bidi override that would reorder
    the text around it, a control) are shown as escapes: in a cell, a column, a title, a note, the scope,
    the shared model and the log's name."""
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&amp;\u202eevil\x1b[2J"
    shown = html.escape(visible(hostile))
    table = Table("t", hostile, "SELECT 1", ["configuration", hostile], [(hostile, 1.0)], note=hostile)
    study = Study(Scope(experiment=hostile, phase=hostile), {"t": table}, shared_model=hostile)
    page = render_report(study, [], log_name=hostile).replace(f"<script>{SCRIPT}</script>", "")
    assert "<script" not in page and "<img" not in page and "\u202e" not in page and "\x1b" not in page
    # the cell, the column, the title twice (heading, contents), the note, the scope (experiment, phase), the
    # model, the log's name twice (title, header)
    assert page.count(shown) == 10, page
