"""`fae stats` through the real CLI on a synthetic log: tables that fit 100 columns, JSON, CSV, clear errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fae.cli.main import app
from tests.report.synthetic import build

runner = CliRunner()


@pytest.fixture()
def log(tmp_path):
    return build(tmp_path / "synthetic.duckdb")


def test_stats_prints_every_table_within_100_columns(log):
    result = runner.invoke(app, ["stats", "--log", str(log), "--price", "m-a=1/2"])
    assert result.exit_code == 0, result.output
    for title in (
        "Runs and outcomes",
        "mean ± std over trials",
        "pass^k",
        "Variance",
        "Paired",
        "error rate by tool",
        "Failure modes",
        "gold plan",
        "tokens per run",
        "coefficient of variation",
        "harms caught",
        "Cost of the agents' LLM calls",
    ):
        assert title in result.output, title
    too_wide = [line for line in result.output.splitlines() if len(line) > 100]
    assert not too_wide, too_wide[:3]


def test_stats_json_gives_numbers_and_the_sql_that_made_them(log):
    result = runner.invoke(app, ["stats", "--log", str(log), "--json", "--table", "success", "--table", "paired"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert set(found) == {"success", "paired"}
    overall = [r for r in found["success"]["rows"] if r["configuration"] == "A" and r["slice"] == "all"]
    assert overall[0]["strict_mean"] == 50.0 and overall[0]["strict_std"] == 25.0
    assert "FROM run_results" in found["success"]["sql"]
    assert found["paired"]["rows"][0]["mcnemar_p"] == 0.25


def test_stats_csv_and_a_filtered_experiment(log):
    result = runner.invoke(app, ["stats", "--log", str(log), "--csv", "--table", "pass_k", "--experiment", "e"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("# pass_k")
    assert lines[1] == "experiment,phase,configuration,k,prompts,pass_hat_k,pass_at_k"
    assert "e,eval,A,3,4,0.25,0.75" in lines


@pytest.mark.parametrize(
    "args, message",
    [
        (["--table", "nope"], "no table 'nope'"),
        (["--price", "m-a"], "is not MODEL=IN/OUT"),
        (["--pair", "A"], "is not A,B"),
        (["--experiment", "missing"], "no runs of experiment 'missing'"),
    ],
)
def test_user_mistakes_are_one_line_and_exit_1(log, args, message):
    result = runner.invoke(app, ["stats", "--log", str(log), *args])
    assert result.exit_code == 1, result.output
    assert message in result.output and "Traceback" not in result.output


def test_a_missing_log_is_one_line(tmp_path):
    result = runner.invoke(app, ["stats", "--log", str(tmp_path / "none.duckdb")])
    assert result.exit_code == 1 and "no log at" in result.output
    assert not (tmp_path / "none.duckdb").exists()


def test_stats_fills_task_metadata_the_log_lacks(tmp_path):
    from fae.store.log import Batch, EventLog, RunRow

    path = tmp_path / "real-tasks.duckdb"
    with EventLog(path) as written:
        written.write_batch(Batch(runs=[RunRow("r1", "sched-book-appointment", 0, "gold", 0, status="finished")]))
    result = runner.invoke(app, ["stats", "--log", str(path), "--json", "--table", "overview"])
    assert result.exit_code == 0, result.output
    with EventLog(path, read_only=True) as read:
        _, rows = read.query("SELECT family, difficulty, gold_calls FROM run_results")
    assert rows == [("scheduling", 2, 4)]


def test_record_ends_with_a_short_results_table(tmp_path):
    log = tmp_path / "recorded.duckdb"
    result = runner.invoke(
        app, ["record", "--log", str(log), "--task", "rec-create-patient", "--agent", "gold", "--repeats", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "Runs and outcomes per configuration" in result.output
    line = next(line for line in result.output.splitlines() if line.lstrip("│ ").startswith("gold"))
    assert "100.0" in line and " 2 " in line, line  # two runs, both passing the strict check


def test_stats_while_the_log_is_being_recorded_reads_it_live(log):
    from fae.store.live import LiveQueryServer
    from fae.store.log import EventLog

    with EventLog(log) as recording, LiveQueryServer(recording):  # the file is held, as by `fae record`
        result = runner.invoke(app, ["stats", "--log", str(log), "--json", "--table", "success", "--table", "variance"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    overall = [r for r in found["success"]["rows"] if r["configuration"] == "A" and r["slice"] == "all"]
    assert (overall[0]["strict_mean"], overall[0]["strict_std"]) == (50.0, 25.0)
    assert [r["total_pp2"] for r in found["variance"]["rows"] if r["configuration"] == "A"] == [2500.0]
