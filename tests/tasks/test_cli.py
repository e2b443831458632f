"""`fae tasks list | show | render`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from fae.cli.tasks import app

runner = CliRunner()


def test_list_shows_every_task(suite):
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 0
    assert len(result.output.splitlines()) == len(suite)
    assert "sched-book-appointment" in result.output
    only = runner.invoke(app, ["list", "--family", "orders", "--json"])
    rows = [json.loads(line) for line in only.output.splitlines()]
    assert rows and all(r["family"] == "orders" for r in rows)


def test_show_and_render(suite):
    shown = json.loads(runner.invoke(app, ["show", "sched-book-appointment"]).output)
    assert shown["id"] == "sched-book-appointment" and shown["writes"] is True
    rendered = runner.invoke(app, ["render", "sched-book-appointment", "--variation", "2"])
    assert rendered.exit_code == 0
    data = json.loads(rendered.output)
    assert data["prompt"] == suite["sched-book-appointment"].render(2).prompt
    assert data["seed"]["type"] == "transaction" and data["plan"]["steps"]
    prompt = runner.invoke(app, ["render", "sched-book-appointment", "-v", "2", "--part", "prompt"])
    assert prompt.output == data["prompt"]


def test_user_mistakes_are_one_line_errors():
    for args in (
        ["show", "nope"],
        ["render", "nope"],
        ["render", "rec-find-patient", "-v", "-1"],
        ["render", "rec-find-patient", "--part", "xml"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 1
        assert result.output.startswith("error:") and "Traceback" not in result.output


DEMO_TASKS = Path(__file__).parent.parent / "plugin_demo" / "fae_plugin_demo" / "tasks"


def test_check_passes_a_good_task_directory():
    result = runner.invoke(app, ["check", str(DEMO_TASKS), "--variations", "0-1"])
    assert result.exit_code == 0, result.output
    assert "demo-desk-lookup: ok" in result.output and "all pass" in result.output


def test_check_fails_a_gold_plan_that_does_not_pass_and_a_malformed_task(tmp_path):
    broken = tmp_path / "tasks"
    shutil.copytree(DEMO_TASKS, broken)
    task = broken / "demo" / "demo-desk-lookup.yaml"
    task.write_text(
        task.read_text().replace(
            'answer: "<PATIENT>${found.entry.0.resource.id}</PATIENT>"', 'answer: "<PATIENT>NONE</PATIENT>"'
        )
    )
    result = runner.invoke(app, ["check", str(broken), "--variations", "0"])
    assert result.exit_code == 1, result.output
    assert "v0 strict" in result.output and "1 with problems: demo-desk-lookup" in result.output

    task.write_text(task.read_text().replace("difficulty: 1", "difficulty: 9"))
    malformed = runner.invoke(app, ["check", str(broken)])
    assert malformed.exit_code == 1 and "difficulty: Invalid enum value 9; one of 1, 2, 3" in malformed.output
    assert "Traceback" not in malformed.output


def test_check_fails_a_task_whose_id_the_suite_already_defines(tmp_path):
    """`--tasks-dir` refuses a directory that redefines one of fae's tasks, so `fae tasks check` fails it first."""
    clashing = tmp_path / "tasks"
    shutil.copytree(DEMO_TASKS, clashing)
    suite_file = Path(__file__).parents[2] / "fae" / "tasks" / "data" / "records" / "rec-create-patient.yaml"
    (clashing / "records").mkdir()
    (clashing / "records" / "rec-create-patient.yaml").write_text(suite_file.read_text())
    result = runner.invoke(app, ["check", str(clashing), "--variations", "0"])
    assert result.exit_code == 1, result.output
    flat = " ".join(result.output.split())
    assert f"rec-create-patient: task id already defined in {suite_file}" in flat, result.output
    assert "1 with problems: rec-create-patient" in flat and "demo-desk-lookup: ok" in flat, result.output


def test_a_misspelt_key_in_a_users_task_file_stops_fae_with_one_line(tmp_path):
    """`--tasks-dir` with a task file whose check misspells a key: listing and recording stop at load, naming
    the file and the field, and nothing is recorded (a subprocess: --tasks-dir adds to the process's task dirs)."""
    broken = tmp_path / "tasks"
    shutil.copytree(DEMO_TASKS, broken)
    task = broken / "demo" / "demo-desk-lookup.yaml"
    task.write_text(task.read_text().replace("{PATIENT: {ids:", "{PATIENT: {idz:"))
    log = tmp_path / "runs.duckdb"
    env = {k: v for k, v in os.environ.items() if k != "FAE_TASKS_PATH"}
    for args in (["tasks", "list"], ["record", "--log", str(log), "--task", "demo-desk-lookup", "--agent", "gold"]):
        done = subprocess.run(
            [sys.executable, "-m", "fae.cli", "--tasks-dir", str(broken), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        said = (done.stdout + done.stderr).strip()
        assert done.returncode == 1, said
        assert said == f"error: {task}: check.answer.PATIENT: Object contains unknown field `idz`", said
    assert not log.exists()
