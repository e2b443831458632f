"""The reference paper's figures (5a-12) on the synthetic log, each number against one worked out here from the
log's known outcomes (tests.report.synthetic's STRICT, TOKENS and light rule), not from fae's SQL."""

from __future__ import annotations

import re
from collections import Counter
from math import isclose
from statistics import mean, stdev

import numpy as np
import pytest

from fae.report.distributions import all_distributions
from fae.report.figures import draw
from fae.report.scope import FIGURE_TABLES, Scope, Table
from fae.report.study import Study, compute_study
from fae.store.log import EventLog
from tests.report.synthetic import STRICT, TOKENS, build

GOLD = {"T1": 1, "T2": 3}
WRITES = {"T1": False, "T2": True}
PROMPTS = list(STRICT["A"])  # (task, variation), three trials each


def light(agent: str, task: str, variation: int, trial: int) -> bool:
    return not ((agent, task, variation) == ("A", "T2", 1) and trial != 1)


def runs(agent: str) -> list[dict]:
    """Every scored run of ``agent`` as the synthetic log wrote it."""
    out = []
    for (task, variation), outcomes in STRICT[agent].items():
        for trial, passed in enumerate(outcomes):
            out.append(
                {
                    "task": task,
                    "variation": variation,
                    "trial": trial,
                    "strict": bool(passed),
                    "light": light(agent, task, variation, trial),
                    "tokens": TOKENS[agent][(task, variation)][trial],
                    "calls": 2,  # searchResources and createResource
                    "errors": int(agent == "A" and task == "T2"),  # A's createResource fails on T2
                }
            )
    return out


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    return build(tmp_path_factory.mktemp("paper") / "synthetic.duckdb")


@pytest.fixture(scope="module")
def figures(log):
    with EventLog(log, read_only=True) as opened:
        study = compute_study(opened, only=set(FIGURE_TABLES))
        distributions = all_distributions(opened, study)
    return study, distributions, {f.name: f for f in draw(study, distributions)}


def spread(distributions, name: str, configuration: str, split: str = ""):
    [found] = [s for s in distributions[name].spreads if s.key[2] == configuration and s.split == split]
    return found


def test_fig5a_strict_and_fig5b_light_over_write_tasks_are_mean_and_std_over_trials(figures):
    study, _, drawn = figures
    for agent in ("A", "B"):
        found = runs(agent)
        strict = [100 * mean(r["strict"] for r in found if r["trial"] == t) for t in range(3)]
        writes = [100 * mean(r["light"] for r in found if r["trial"] == t and WRITES[r["task"]]) for t in range(3)]
        [row] = [r for r in study["success"].dicts() if r["configuration"] == agent and r["slice"] == "all"]
        assert isclose(row["strict_mean"], mean(strict)) and isclose(row["strict_std"], stdev(strict)), row
        assert isclose(row["light_writes_mean"], mean(writes)), (row, writes)
        assert isclose(row["light_writes_std"], stdev(writes)), (row, writes)
        assert f">{mean(writes):.1f}</text>" in drawn["fig-success-light-writes"].svg
    # light over every task differs: the read task T1 passes light in every run
    [a] = [r for r in study["success"].dicts() if r["configuration"] == "A" and r["slice"] == "all"]
    assert not isclose(a["light_mean"], a["light_writes_mean"])


def test_fig6a_shares_are_each_component_over_the_total(figures):
    study, _, drawn = figures
    for agent in ("A", "B"):
        y = {p: [100.0 * v for v in STRICT[agent][p]] for p in PROMPTS}
        values = np.array([v for p in PROMPTS for v in y[p]])
        grand = values.mean()
        task = {t: np.mean([v for p in PROMPTS if p[0] == t for v in y[p]]) for t in GOLD}
        same = np.mean([(v - np.mean(y[p])) ** 2 for p in PROMPTS for v in y[p]])
        within = np.mean([(np.mean(y[p]) - task[p[0]]) ** 2 for p in PROMPTS for _ in y[p]])
        between = np.mean([(task[p[0]] - grand) ** 2 for p in PROMPTS for _ in y[p]])
        total = values.var()
        [row] = [r for r in study["variance"].dicts() if r["configuration"] == agent]
        assert isclose(row["same_prompt_share"], same / total), row
        assert isclose(row["within_task_share"], within / total), row
        assert isclose(row["between_task_share"], between / total), row
        for share in (same, within, between):
            if share / total >= 0.04:
                assert f">{100 * share / total:.0f}%</text>" in drawn["fig-variance-share"].svg


def test_fig7_heatmaps_annotate_each_tool_and_resource_types_rate_and_calls(figures):
    study, _, drawn = figures
    for by, table, figure, failing, fine in (
        ("tool", "tool_errors_by_tool", "fig-tool-errors-tool", "createResource", "searchResources"),
        ("resource_type", "tool_errors_by_resource_type", "fig-tool-errors", "Patient", "Slot"),
    ):
        rows = {(r["configuration"], r[by]): r for r in study[table].dicts()}
        a = runs("A")
        expected = 100 * sum(r["errors"] for r in a) / len(a)  # one failing call per erroneous run
        assert isclose(100 * rows[("A", failing)]["error_rate"], expected) and rows[("A", failing)]["calls"] == 12
        assert rows[("A", fine)]["errors"] == 0 and rows[("B", failing)]["errors"] == 0
        svg = drawn[figure].svg
        assert svg.count(f">{expected:.0f}% (n=12)</text>") == 1, figure
        assert svg.count(">0% (n=12)</text>") == 3, figure  # the zero cells are written, not left blank


def test_fig8_draws_every_mode_each_failed_run_carries(figures):
    study, _, drawn = figures
    for agent in ("A", "B"):
        expected = Counter(
            "incorrect_order" if r["task"] == "T1" else "tool_error" for r in runs(agent) if not r["strict"]
        )
        found = {r["failure_mode"]: r["runs"] for r in study["failure_modes"].dicts() if r["configuration"] == agent}
        assert found == dict(expected), (agent, found)
    labels = set(re.findall(r">([a-z_]+)</text>", drawn["fig-failure-modes"].svg))
    # the paper's modes are all on the axis, those no run carries too (as bars of height 0)
    assert {"incorrect_tool_selection", "incorrect_resource_type", "prohibited_tool", "other"} <= labels, labels


def test_fig9_the_five_tool_call_distributions(figures):
    _, distributions, _ = figures
    for agent in ("A", "B"):
        found = runs(agent)
        solved = sorted({(r["task"], r["variation"]) for r in found if r["strict"]})
        expected = {
            "calls, passed": [r["calls"] for r in found if r["strict"]],
            "calls, failed": [r["calls"] for r in found if not r["strict"]],
            "errors, passed": [r["errors"] for r in found if r["strict"]],
            "errors, failed": [r["errors"] for r in found if not r["strict"]],
            "expected, solved": [GOLD[task] for task, _ in solved],
        }
        for split, values in expected.items():
            got = spread(distributions, "fig-calls", agent, split)
            assert got.runs == len(values), (agent, split, got)
            assert got.median == np.median(values) and (got.low, got.high) == (min(values), max(values)), split
            if distributions["fig-calls"].violin and got.points:
                assert list(got.points) == sorted(values), (agent, split)


def test_fig10_and_11_token_violins_by_outcome_difficulty_and_bucketed_calls(figures, log, tmp_path):
    _, distributions, _ = figures
    a = runs("A")
    assert list(spread(distributions, "fig-tokens", "A").points) == sorted(r["tokens"] for r in a)
    for split, pick in (
        ("strict success", lambda r: r["strict"]),
        ("strict failure", lambda r: not r["strict"]),
        ("light success", lambda r: r["light"]),
        ("light failure", lambda r: not r["light"]),
    ):
        values = sorted(r["tokens"] for r in a if pick(r))
        assert list(spread(distributions, "fig-tokens-outcome", "A", split).points) == values, split
    for difficulty, task in (("1", "T1"), ("2", "T2")):
        values = sorted(r["tokens"] for r in a if r["task"] == task)
        assert list(spread(distributions, "fig-tokens-difficulty", "A", difficulty).points) == values
    # a task variation of 7 gold calls falls in the 5+ bucket, one of 1 in bucket 1
    path = tmp_path / "many.duckdb"
    path.write_bytes(log.read_bytes())
    with EventLog(path) as opened:
        opened.con.execute("UPDATE task_meta SET gold_calls = 7 WHERE task_id = 'T2'")
        study = compute_study(opened, only={"success"})
        found = all_distributions(opened, study)["fig-tokens-calls"]
    splits = {s.split for s in found.spreads if s.key[2] == "A"}
    assert splits == {"1", "5+"}, splits
    [five] = [s for s in found.spreads if s.key[2] == "A" and s.split == "5+"]
    assert list(five.points) == sorted(r["tokens"] for r in a if r["task"] == "T2")


def test_fig12_token_cv_distributions_over_prompts_and_tasks_and_the_overall_line(figures):
    study, distributions, drawn = figures
    a = runs("A")

    def cv(values):
        return stdev(values) / mean(values)

    prompts = sorted(cv([r["tokens"] for r in a if (r["task"], r["variation"]) == p]) for p in PROMPTS)
    tasks = sorted(cv([r["tokens"] for r in a if r["task"] == t]) for t in GOLD)
    same = spread(distributions, "fig-token-cv", "A", "same prompt")
    within = spread(distributions, "fig-token-cv", "A", "within task")
    assert np.allclose(same.points, prompts) and np.allclose(within.points, tasks)
    [row] = [r for r in study["token_cv"].dicts() if r["configuration"] == "A"]
    assert isclose(row["overall_cv"], cv([r["tokens"] for r in a]))
    assert ">overall</text>" in drawn["fig-token-cv"].svg  # the overall CV drawn as a line, in the legend


def test_pooled_groups_every_experiment_of_a_configuration_together(log, tmp_path):
    """Trial 2 of every run moved to experiment "f": per experiment, two rows per configuration; pooled, one row
    with the numbers of the whole log."""
    path = tmp_path / "two.duckdb"
    path.write_bytes(log.read_bytes())
    with EventLog(path) as opened:
        opened.con.execute("UPDATE runs SET experiment = 'f' WHERE repeat = 2 AND agent IN ('A', 'B')")
        apart = compute_study(opened, only={"success", "variance"})
        pooled = compute_study(opened, Scope(pooled=True), only={"success", "variance"})
    a_apart = [r for r in apart["success"].dicts() if r["configuration"] == "A" and r["slice"] == "all"]
    assert sorted(r["experiment"] for r in a_apart) == ["e", "f"]
    [a] = [r for r in pooled["success"].dicts() if r["configuration"] == "A" and r["slice"] == "all"]
    strict = [100 * mean(r["strict"] for r in runs("A") if r["trial"] == t) for t in range(3)]
    assert a["experiment"] is None and a["trials"] == 3 and isclose(a["strict_mean"], mean(strict))
    [v] = [r for r in pooled["variance"].dicts() if r["configuration"] == "A"]
    assert isclose(v["total_pp2"], np.var([100.0 * r["strict"] for r in runs("A")]))


def _success(**values) -> Study:
    columns = ["experiment", "phase", "configuration", "slice", "value", "strict_mean", "strict_std"]
    columns += ["light_writes_mean", "light_writes_std"]
    row = {"experiment": "e", "phase": "eval", "configuration": "A", "slice": "all", "value": "all"} | values
    table = Table("success", "", "SELECT 1", columns, [tuple(row.get(c) for c in columns)])
    return Study(Scope(), {"success": table})


def test_an_axis_with_nothing_or_only_zeros_says_so():
    zero = _success(strict_mean=0.0, strict_std=0.0, light_writes_mean=None)
    drawn = {f.name: f for f in draw(zero, {}, ("fig-success", "fig-success-light-writes"))}
    assert ">all zero</text>" in drawn["fig-success"].svg
    assert ">no data</text>" in drawn["fig-success-light-writes"].svg
    some = _success(strict_mean=40.0, strict_std=5.0, light_writes_mean=0.0, light_writes_std=0.0)
    drawn = {f.name: f for f in draw(some, {}, ("fig-success", "fig-success-light-writes"))}
    assert ">all zero</text>" not in drawn["fig-success"].svg and ">no data</text>" not in drawn["fig-success"].svg
    assert ">all zero</text>" in drawn["fig-success-light-writes"].svg


def test_labels_stay_text_and_colours_are_the_colour_blind_safe_palette(figures):
    from fae.report.plotting import COLORS

    assert tuple(c.lower() for c in COLORS[:3]) == ("#0072b2", "#e69f00", "#009e73")
    _, _, drawn = figures
    assert "#0072b2" in drawn["fig-success"].svg.lower()


def test_stats_and_report_take_pooled(log, tmp_path):
    import json

    from typer.testing import CliRunner

    from fae.cli.main import app

    runner = CliRunner()
    result = runner.invoke(app, ["stats", "--log", str(log), "--pooled", "--table", "success", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["success"]["rows"]
    assert {(r["experiment"], r["phase"]) for r in rows} == {(None, None)}, rows[:2]
    result = runner.invoke(app, ["report", "--log", str(log), "--pooled", "-o", str(tmp_path / "pooled.html")])
    assert result.exit_code == 0, result.output
    assert 'id="fig-success-light-writes"' in (tmp_path / "pooled.html").read_text(encoding="utf-8")
