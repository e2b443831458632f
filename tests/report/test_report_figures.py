"""The report's distribution figures from SQL aggregates, and its figures drawn in child processes."""

from __future__ import annotations

import io
import json
import math
import re
import subprocess
import sys
from dataclasses import replace

import duckdb
import matplotlib
import numpy as np
import pytest
from matplotlib import cbook

from fae.errors import FaeError
from fae.report import figures
from fae.report.distributions import GRID, Spread, distribution
from fae.report.drawing import Drawing
from fae.report.figures import _steady, _violin_stats
from fae.report.plotting import STYLE, legend, mark_zeros, new_figure, svg
from fae.report.plotting import tick as _tick
from fae.report.scope import FIGURE_TABLES, Scope, run_sql
from fae.report.study import Study, compute_study
from fae.store.log import EventLog
from tests.report.synthetic import build


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    return build(tmp_path_factory.mktemp("figures") / "synthetic.duckdb")


class Frame:
    """A DuckDB database whose ``run_results`` is a plain table of made-up runs (many more than the log's)."""

    def __init__(self, values: dict[str, np.ndarray]):
        self.con = duckdb.connect()
        self.con.execute(
            "CREATE TABLE run_results (experiment VARCHAR, phase VARCHAR, configuration VARCHAR, total_tokens DOUBLE)"
        )
        for configuration, found in values.items():
            self.con.execute(
                "INSERT INTO run_results SELECT 'e', 'eval', ?, unnest(?)", [configuration, [float(v) for v in found]]
            )

    def query(self, sql, params=None):
        result = self.con.execute(sql, params or [])
        return [d[0] for d in result.description], result.fetchall()


def test_boxes_are_matplotlibs_own_statistics_of_every_value(log):
    # one run far out, so a whisker stops short of the extremes (Tukey's 1.5 IQR rule)
    column = "CASE WHEN run_id = 'A.T1.v1.r2' THEN 5000 ELSE total_tokens END"
    with EventLog(log, read_only=True) as opened:
        found = distribution(
            opened,
            Study(Scope()),
            column,
            ("difficulty", "difficulty"),
            "fig-x",
            "x",
            "tokens",
            False,
            "difficulty IS NOT NULL",
        )
        _, rows = opened.query(
            f"SELECT configuration, CAST(difficulty AS VARCHAR), list({column}) FROM run_results "
            "WHERE difficulty IS NOT NULL GROUP BY ALL"
        )
    assert found is not None and len(found.spreads) == len(rows) == 4
    values = {(configuration, split): data for configuration, split, data in rows}
    for spread in found.spreads:
        (expected,) = cbook.boxplot_stats(values[(spread.key[2], spread.split)])
        got = (spread.q1, spread.median, spread.q3, spread.whisker_low, spread.whisker_high)
        assert got == tuple(float(expected[k]) for k in ("q1", "med", "q3", "whislo", "whishi")), spread
    outlier = next(s for s in found.spreads if s.key[2] == "A" and s.split == "1")
    assert outlier.high == 5000 and outlier.whisker_high < 5000


def test_a_violin_of_many_runs_is_drawn_from_a_fixed_quantile_grid_close_to_every_value():
    rng = np.random.default_rng(5)
    values = {"few": rng.normal(5000, 800, GRID), "many": np.round(rng.lognormal(8, 0.4, 6 * GRID))}
    found = distribution(Frame(values), Study(Scope()), "total_tokens", None, "fig-tokens", "t", "tokens", True)
    assert found is not None
    spreads = {s.key[2]: s for s in found.spreads}
    assert spreads["few"].points == tuple(sorted(values["few"]))  # every value, as before
    assert len(spreads["many"].points) == GRID
    for name, data in values.items():
        (exact,) = cbook.violin_stats([data], ("GaussianKDE", "scott"))
        drawn = _violin_stats(spreads[name])
        assert np.allclose(drawn["coords"], exact["coords"]) and drawn["median"] == exact["median"]
        error = np.abs(drawn["vals"] - exact["vals"]).max() / exact["vals"].max()
        assert error < (1e-12 if name == "few" else 0.01), (name, error)
    again = distribution(Frame(values), Study(Scope()), "total_tokens", None, "fig-tokens", "t", "tokens", True)
    assert again == found  # a fixed grid, no sampling


def test_a_child_that_fails_to_draw_is_one_error_with_its_reason():
    failed = "^drawing the report's figures failed: KeyError: 'success'$"
    with Drawing(1) as drawing, pytest.raises(FaeError, match=failed):
        drawing.draw(Study(Scope()), {})  # no tables at all


def test_children_not_needed_are_stopped():
    drawing = Drawing(2)
    drawing.close()
    assert all(child.returncode is not None for child in drawing.children)


def test_stats_leaves_matplotlib_and_the_agents_unloaded_and_so_does_the_reports_parent(log):
    script = f"""
import json, sys
from typer.testing import CliRunner
from fae.cli.main import app
result = CliRunner().invoke(app, ["stats", "--log", {str(log)!r}])
assert result.exit_code == 0, result.output
import fae.report.commands, fae.report.drawing, fae.report.html  # the report's parent side
print(json.dumps(sorted(m for m in ("matplotlib", "fae.api", "langchain_core", "mitmproxy") if m in sys.modules)))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_a_figure_is_cropped_to_the_same_box_as_bbox_inches_tight():
    # rotated two-line labels reach left of the axes and a legend sits outside them, right: both must fit
    with matplotlib.rc_context(STYLE):  # the report's style: its ids are seeded, so both SVGs can be equal
        fig, ax = new_figure(7.0)
        labels = [f"experiment-{i}/phase-{i}\nlangchain:memory-spec+specs-{i}" for i in range(6)]
        ax.bar(range(6), [10, 250, 40, 3000, 0, 99], 0.6, yerr=[5] * 6, label="a very long legend entry " * 3)
        _tick(ax, labels)
        ax.set_ylabel("tokens")
        legend(ax)
        mark_zeros(ax)  # svg() marks the zero bar first: the same drawing both ways
        tight = io.StringIO()
        fig.savefig(tight, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
        cropped = svg(fig)
    assert cropped == re.sub(r"^.*?(<svg\b)", r"\1", tight.getvalue(), count=1, flags=re.S)


def test_the_figures_tables_reach_the_drawing_before_the_others_are_computed(log):
    computed: list[str] = []

    class Watched:
        def __init__(self, inner):
            self.inner = inner

        def query(self, sql, params=None):
            computed.append(sql)
            return self.inner.query(sql, params)

    sent: list[tuple[list[str], int]] = []
    with EventLog(log, read_only=True) as opened:
        found = compute_study(
            Watched(opened), first=FIGURE_TABLES, ready=lambda early: sent.append((list(early.tables), len(computed)))
        )
        whole = compute_study(opened)
    assert sent == [(["overview", *FIGURE_TABLES], sent[0][1])]
    assert sent[0][1] < len(computed)  # the rest came after
    assert list(found.tables) == list(whole.tables) and found.shared_model == whole.shared_model
    assert all(found[name].rows == whole[name].rows for name in whole.tables)


def test_a_last_bit_of_difference_in_a_parallel_sum_does_not_reach_the_figures():
    # DuckDB's parallel aggregates can differ in the last bit between two runs over one large log (seen at
    # 100k runs: the token CV figure's SVG ids, which hash exact coordinates, changed from run to run)
    rng = np.random.default_rng(3)
    values = [float(v) for v in rng.lognormal(0, 4, 2000)] + [0.1 + 0.2, 1 / 3, 2.675, 1e-300]
    spread = Spread(("e", "p", "c"), "", 3, 1 / 3, 0.5, 2 / 3, 0.1, 0.9, 0.0, 1.0, 0.5, 1 / 12, (0.1, 1 / 7))
    for value in values:
        nudged = math.nextafter(value, math.inf)
        assert _steady(("c", 3, nudged)) == _steady(("c", 3, value)) == ("c", 3, float(f"{value:.12g}"))
    bumped = replace(spread, variance=math.nextafter(1 / 12, 0), points=(0.1, math.nextafter(1 / 7, 1)))
    assert bumped != spread and _steady(bumped) == _steady(spread)


def test_a_last_bit_of_difference_in_a_parallel_sum_does_not_reach_the_tables():
    # seen in the suite: token_cv's same-prompt CV came out ...4139 in one compute_study and ...41395 in the next
    class Answers:
        def __init__(self, value):
            self.value = value

        def query(self, sql, params=None):
            return ["configuration", "cv", "runs"], [("A", self.value, 3), ("B", None, 0)]

    value = 0.4614608613464139
    nudged = math.nextafter(value, math.inf)
    first, second = (run_sql(Answers(v), "t", "T", "SELECT 1") for v in (value, nudged))
    assert first.rows == second.rows == [("A", float(f"{value:.12g}"), 3), ("B", None, 0)]


def test_the_failure_mode_figure_draws_the_agents_modes_and_not_the_runs_left_out(log, tmp_path):
    """The table lists errored runs (no share); the figure of modes leaves them out, and draws each mode a run
    carries."""
    from fae.report.figures import draw
    from fae.store.log import Batch, RunUpdate
    from tests.report.synthetic import _verdict

    path = tmp_path / "modes.duckdb"
    path.write_bytes(log.read_bytes())
    with EventLog(path) as opened:
        opened.write_batch(
            Batch(
                updates=[RunUpdate("A.T2.v0.r1", "errored")],
                verdicts=[_verdict("A.T2.v0.r0", "failure_mode", {}, "no_tool_call+prohibited_tool", False, at=3)],
            )
        )
        study = compute_study(opened, only={"failure_modes"})
    assert "errored" in {r["failure_mode"] for r in study["failure_modes"].dicts()}
    [figure] = draw(study, {}, ("fig-failure-modes",))
    drawn = set(re.findall(r">([a-z_]+)</text>", figure.svg))
    assert {"no_tool_call", "prohibited_tool", "tool_error", "incorrect_order"} <= drawn, drawn
    assert "errored" not in drawn, drawn


def test_a_violin_figure_draws_violins_and_a_box_figure_boxes():
    rng = np.random.default_rng(7)
    values = {"a": rng.normal(5000, 800, 50), "b": rng.normal(4000, 500, 50), "flat": np.full(10, 3000.0)}
    found = distribution(Frame(values), Study(Scope()), "total_tokens", None, "fig-tokens", "t", "tokens", True)
    assert found is not None
    violins = figures.distribution(Study(Scope()), found).svg
    boxes = figures.distribution(Study(Scope()), replace(found, violin=False)).svg

    def drawn(svg: str, what: str) -> int:
        return len(re.findall(rf'id="\w*{what}_\d+"', svg))

    assert drawn(violins, "PolyCollection") == 2  # a violin per spread of many values; the flat one is a line at it
    assert drawn(boxes, "PolyCollection") == 0
    assert drawn(boxes, "patch") == drawn(violins, "patch") + 3  # a box per spread, the flat one too
