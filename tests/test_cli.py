"""The command line over a real recorded log: listing, timelines, SQL, export, and user mistakes."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import duckdb
import pytest
from typer.testing import CliRunner

from fae.cli import app
from fae.cli.main import with_optional_values

runner = CliRunner()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    log = tmp_path_factory.mktemp("cli") / "rec.duckdb"
    result = runner.invoke(
        app,
        ["record", "--log", str(log), "--task", "builtin-create-patient", "--variations", "0-1", "--concurrency", "2"],
    )
    assert result.exit_code == 0, result.output
    return log


def test_record_refuses_to_duplicate_a_suite_without_resume(recorded):
    again = runner.invoke(
        app, ["record", "--log", str(recorded), "--task", "builtin-create-patient", "--variations", "0-1"]
    )
    assert again.exit_code == 1
    assert "--resume" in again.output
    assert "Traceback" not in again.output


def test_runs_lists_each_run(recorded):
    result = runner.invoke(app, ["runs", "--log", str(recorded)])
    assert result.exit_code == 0
    assert "builtin-create-patient.v0.gold.r0" in result.output
    assert "builtin-create-patient.v1.gold.r0" in result.output


def test_runs_takes_the_same_run_filter_as_rejudge_and_compare(recorded):
    only_v1 = runner.invoke(app, ["runs", "--log", str(recorded), "--runs", "variation=1"])
    assert only_v1.exit_code == 0, only_v1.output
    assert "builtin-create-patient.v1.gold.r0" in only_v1.output
    assert "builtin-create-patient.v0.gold.r0" not in only_v1.output
    globbed = runner.invoke(app, ["runs", "--log", str(recorded), "--runs", "*.v0.*"])
    assert "builtin-create-patient.v0.gold.r0" in globbed.output and ".v1." not in globbed.output
    bad = runner.invoke(app, ["runs", "--log", str(recorded), "--runs", "colour=blue"])
    assert bad.exit_code == 1 and "key=value with key one of" in bad.output


def test_show_prints_the_timeline(recorded):
    result = runner.invoke(app, ["show", "builtin-create-patient.v1.gold.r0", "--log", str(recorded)])
    assert result.exit_code == 0, result.output
    for needed in (
        "sandbox",
        "tool createResource",
        "fhir create Patient/",
        "answer (answered)",
        "state captured: 4 resources",
        "run finished",
    ):
        assert needed in result.output, needed
    events = [line.split() for line in result.output.splitlines() if re.match(r"\s*\d+\s+\d+\.\d{3}s ", line)]
    times = [float(words[1][:-1]) for words in events]
    assert times == sorted(times), "events in time order"
    seqs = [int(words[0]) for words in events]
    late = sum(1 for i, seq in enumerate(seqs) if seq < max(seqs[: i + 1]))
    assert late, "an MCP call starts before the FHIR request it makes, and is logged after it"
    assert f"events in time order, each at its start; {late} of them came into the log after" in result.output


def test_sql_over_the_documented_views(recorded):
    result = runner.invoke(
        app,
        [
            "sql",
            "--json",
            "--log",
            str(recorded),
            "SELECT interaction, resource_type, status FROM fhir_exchanges WHERE actor = 'agent' ORDER BY run_id",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines() if line.strip()]
    assert rows == [{"interaction": "create", "resource_type": "Patient", "status": 201}] * 2
    tools = runner.invoke(app, ["sql", "--json", "--log", str(recorded), "SELECT tool, is_error FROM tool_calls"])
    assert [json.loads(x) for x in tools.output.splitlines()] == [{"tool": "createResource", "is_error": False}] * 2


def test_export_writes_parquet_per_table(recorded, tmp_path):
    result = runner.invoke(app, ["export", "--parquet", str(tmp_path / "pq"), "--log", str(recorded)])
    assert result.exit_code == 0, result.output
    count = (
        duckdb.connect()
        .execute(f"SELECT count(*) FROM read_parquet('{(tmp_path / 'pq').as_posix()}/runs/**/*.parquet')")
        .fetchall()[0][0]
    )
    assert count == 2
    query = "SELECT interaction, resource_type, status FROM fhir_exchanges WHERE actor = 'agent' ORDER BY run_id"
    exchanges = runner.invoke(app, ["sql", "--json", "--parquet", str(tmp_path / "pq"), query])
    assert exchanges.exit_code == 0, exchanges.output
    assert [json.loads(x) for x in exchanges.output.splitlines()] == [
        {"interaction": "create", "resource_type": "Patient", "status": 201}
    ] * 2


@pytest.mark.parametrize(
    "args, message",
    [
        (["show", "no-such-run"], "no run 'no-such-run'"),
        (["sql", "SELEKT 1"], "bad SQL"),
        (["sql", "DROP TABLE runs"], "only queries"),
        (["sql", "SELECT * FROM no_such_table"], "bad SQL"),
    ],
)
def test_user_mistakes_get_one_line_and_exit_1(recorded, args, message):
    result = runner.invoke(app, [*args, "--log", str(recorded)])
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output


def test_unreadable_and_missing_logs(tmp_path):
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(b"\x00garbage" * 1000)
    for path in (bad, tmp_path / "missing.duckdb"):
        result = runner.invoke(app, ["runs", "--log", str(path)])
        assert result.exit_code == 1
        assert "Traceback" not in result.output
        assert "log" in result.output


def test_malformed_plan_file_is_a_clear_error(tmp_path):
    plan = tmp_path / "bad.yaml"
    plan.write_text("steps:\n  - callx: createResource\n")
    result = runner.invoke(
        app,
        ["record", "--log", str(tmp_path / "x.duckdb"), "--task", "builtin-create-patient", "--agent", f"plan:{plan}"],
    )
    assert result.exit_code == 1
    assert "step 1" in result.output
    assert "Traceback" not in result.output


def test_record_needs_tasks_and_a_forward_variation_range(tmp_path):
    log = tmp_path / "x.duckdb"
    no_task = runner.invoke(app, ["record", "--log", str(log)])
    assert no_task.exit_code == 1 and "--task" in no_task.output and "Traceback" not in no_task.output
    backwards = runner.invoke(app, ["record", "--log", str(log), "--task", "rec-find-patient", "--variations", "2-0"])
    assert backwards.exit_code == 1 and "runs backwards" in backwards.output
    assert not log.exists(), "a refused recording must not leave an empty log behind"


def test_a_plan_calling_an_unknown_tool_is_refused_before_recording(tmp_path):
    plan = tmp_path / "typo.yaml"
    plan.write_text(
        "steps:\n  - call: createResource\n"
        "    args: {resourceType: Patient, body_json: {resourceType: Patient}}\n"
        "  - call: serchResources\n    args: {resourceType: Patient}\n  - answer: done\n"
    )
    log = tmp_path / "x.duckdb"
    result = runner.invoke(
        app, ["record", "--log", str(log), "--task", "builtin-create-patient", "--agent", f"plan:{plan}"]
    )
    assert result.exit_code == 1, result.output
    assert "step 2 calls 'serchResources'" in result.output and "Traceback" not in result.output
    assert not log.exists(), "nothing may be recorded for a plan that cannot run"


@pytest.mark.parametrize(
    ("agent", "said"),
    [
        ("golden", "unknown agent 'golden' (did you mean 'gold'?): use one of gold, scripted:gold"),
        ("langchain:basline", "unknown LangChain configuration 'basline'"),
        ("scenario:no-such", "unknown scenario 'no-such'"),
        ("langchain:baseline?tool_choise=none", "unknown option 'tool_choise'"),
    ],
)
def test_an_unknown_agent_is_refused_before_the_recording_starts(tmp_path, agent, said):
    log = tmp_path / "agent.duckdb"
    result = runner.invoke(app, ["record", "--log", str(log), "--task", "builtin-create-patient", "--agent", agent])
    assert result.exit_code == 1, result.output
    assert said in " ".join(result.output.split()) and "Traceback" not in result.output, result.output
    assert "recording" not in result.output, "the agent is checked before the progress starts"
    assert not log.exists(), "nothing is recorded, not even an empty log"


def test_long_commands_report_progress_on_stderr_when_not_on_a_terminal(tmp_path):
    import subprocess
    import sys

    log = tmp_path / "p.duckdb"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fae.cli",
            "record",
            "--log",
            str(log),
            "--task",
            "builtin-create-patient",
            "--variations",
            "0-2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "recording: 0/3" in lines, done.stderr
    assert any(line.startswith("recording: 3/3 (100%)") for line in lines), done.stderr


@pytest.mark.parametrize(
    ("words", "filled"),
    [
        (["rejudge", "--ray"], ["rejudge", "--ray", "auto"]),
        (["rejudge", "--ray", "--workers", "2"], ["rejudge", "--ray", "auto", "--workers", "2"]),
        (
            ["record", "--ray", "ray://head:10001", "--task", "t"],
            ["record", "--ray", "ray://head:10001", "--task", "t"],
        ),
        (["record", "--ray=local"], ["record", "--ray=local"]),
        (["sql", "--", "--ray"], ["sql", "--", "--ray"]),  # after --, a word is a word
    ],
)
def test_ray_alone_means_auto(words, filled):
    assert with_optional_values(words) == filled


def test_ray_without_an_address_reaches_the_command(tmp_path):
    # before: "Option '--ray' requires an argument" (a usage error, exit 2); now the command runs and finds no log
    done = subprocess.run(
        [sys.executable, "-m", "fae.cli", "rejudge", "--log", str(tmp_path / "none.duckdb"), "--ray"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "requires an argument" not in done.stderr, done.stderr
    assert "none.duckdb" in done.stderr and "Traceback" not in done.stderr, done.stderr
