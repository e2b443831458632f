"""A log rescores from itself alone: a user's task recorded from --tasks-dir, the directory gone (a colleague's
machine), ``fae rejudge`` in a fresh process gives the live verdicts byte for byte; judging against today's task
files is the explicit ``--tasks current``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from fae.tasks.sources import PACKAGED

TASK = "my-record-condition"


def fae(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FAE_TASKS_PATH", "FAE_SCENARIOS_PATH")}
    done = subprocess.run(
        [sys.executable, "-m", "fae.cli", *args], env=env, capture_output=True, text=True, timeout=300
    )
    if check:
        assert done.returncode == 0, f"fae {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def _task_dir(root: Path, code_in_check: str | None = None) -> Path:
    """A user's task directory with one write task (a copy of the suite's, under another id)."""
    folder = root / "mine" / "records"
    folder.mkdir(parents=True, exist_ok=True)
    text = (PACKAGED / "records" / "rec-record-condition.yaml").read_text(encoding="utf-8")
    text = text.replace("id: rec-record-condition", f"id: {TASK}")
    if code_in_check is not None:  # the check edited after the recording: it now demands another code
        text = text.replace('code.coding: {coding: "http://snomed.info/sct|{condition_code}"}', code_in_check)
    (folder / f"{TASK}.yaml").write_text(text, encoding="utf-8")
    return folder.parent


def _verdicts(log: Path, batch: str) -> dict[tuple[str, str, str], tuple]:
    with duckdb.connect(str(log), read_only=True) as con:
        rows = con.execute(
            "SELECT run_id, judge, rule_set_hash, outcome, passed, CAST(evidence AS VARCHAR), code_version"
            " FROM verdicts WHERE batch = ?",
            [batch],
        ).fetchall()
    return {(r[0], r[1], r[2]): r[3:] for r in rows}


def _last_batch(log: Path) -> str:
    with duckdb.connect(str(log), read_only=True) as con:
        return con.execute("SELECT batch FROM verdict_batches ORDER BY started_at DESC LIMIT 1").fetchone()[0]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("portable")
    tasks = _task_dir(root)
    log = root / "runs.duckdb"
    fae(
        "--tasks-dir", str(tasks), "record", "--log", str(log), "--task", TASK, "--variations", "0-1", "--agent", "gold"
    )
    shutil.rmtree(tasks)  # the log travels without the directory
    return log, root


def test_without_the_task_files_a_rejudge_gives_the_live_verdicts(recorded):
    log, _ = recorded
    live = _verdicts(log, "live")
    assert len(live) == 2 * 6, live
    assert {v[0] for (_, judge, _), v in live.items() if judge == "task"} == {"pass"}, live
    done = fae("rejudge", "--full", "--log", str(log), "--workers", "1")
    rejudged = _verdicts(log, _last_batch(log))
    assert rejudged == live, "\n".join(f"{k}: live {live.get(k)} rejudged {rejudged.get(k)}" for k in live)
    assert "task_changed" not in done.stdout


def test_against_todays_task_files_is_an_explicit_choice(recorded):
    log, root = recorded
    missing = fae("rejudge", "--full", "--log", str(log), "--workers", "1", "--tasks", "current")
    assert "judged against today's task files" in missing.stdout, missing.stdout
    gone = _verdicts(log, _last_batch(log))
    assert {v[0] for (_, judge, _), v in gone.items() if judge in ("task", "ensure_record")} == {"not_applicable"}

    tasks = _task_dir(root, code_in_check='code.coding: {coding: "http://snomed.info/sct|000000"}')
    try:
        edited = fae(
            "--tasks-dir", str(tasks), "rejudge", "--full", "--log", str(log), "--workers", "1", "--tasks", "current"
        )
        assert "0 of 2 run(s) played another rendering" in edited.stdout, edited.stdout  # the check is not played
        task = [v for (_, judge, _), v in _verdicts(log, _last_batch(log)).items() if judge == "task"]
        strict = [v for v in task if json.loads(v[2])["checked"]["mode"] == "strict"]
        assert len(strict) == 2 and {v[0] for v in strict} == {"fail"}, strict
        assert all("000000" in v[2] for v in strict), strict
        kept = fae("--tasks-dir", str(tasks), "rejudge", "--full", "--log", str(log), "--workers", "1")
        assert _verdicts(log, _last_batch(log)) == _verdicts(log, "live"), kept.stdout
    finally:
        shutil.rmtree(tasks)


def test_a_kept_task_that_is_not_what_the_run_played_is_an_error_not_a_verdict(recorded, tmp_path):
    """A log whose kept task was swapped for another run's (a hand-edited or hostile log) is refused per run."""
    log, _ = recorded
    copy = tmp_path / "swapped.duckdb"
    shutil.copy(log, copy)
    with duckdb.connect(str(copy)) as con:
        rows = con.execute("SELECT run_id, payload FROM events WHERE kind = 'TaskRendered' ORDER BY run_id").fetchall()
        assert len(rows) == 2 and rows[0][1] != rows[1][1], rows
        con.execute(
            "UPDATE events SET payload = ? WHERE run_id = ? AND kind = 'TaskRendered'", [rows[1][1], rows[0][0]]
        )
    fae("rejudge", "--full", "--log", str(copy), "--workers", "1")
    verdicts = _verdicts(copy, _last_batch(copy))
    first = {judge: v for (run, judge, _), v in verdicts.items() if run == rows[0][0]}
    assert first["task"][0] == "error" and "the log is inconsistent" in json.loads(first["task"][2])["error"], first
    assert first["state_drift"][0] == "agree", first  # judges that read only the log still judge it
    other = {judge: v for (run, judge, _), v in verdicts.items() if run == rows[1][0]}
    assert other["task"][0] == "pass", other


def test_log_info_says_what_a_log_holds(recorded, tmp_path):
    log, _ = recorded
    shown = fae("log", "info", str(log)).stdout
    for line in (
        "runs             2 (finished 2)",
        "agents           gold 2",
        "tasks            1 tasks, 2 variations",
    ):
        assert line in shown, shown
    assert "2 of 2 runs keep their task in the log" in shown and "created by: fae " in shown, shown
    found = json.loads(fae("log", "info", str(log), "--json").stdout)
    assert found["runs_by_status"] == {"finished": 2} and found["runs_keeping_their_task"] == 2, found
    assert found["verdict_batches"]["live"] == 1 and found["judges"]["task"] >= 4, found
    assert found["size_bytes"] >= log.stat().st_size, found
    older = tmp_path / "older.duckdb"  # as a log made before runs kept their task
    shutil.copy(log, older)
    with duckdb.connect(str(older)) as con:
        con.execute("DELETE FROM events WHERE kind = 'TaskRendered'")
    assert json.loads(fae("log", "info", str(older), "--json").stdout)["runs_keeping_their_task"] == 0
    missing = fae("log", "info", str(tmp_path / "nowhere.duckdb"), check=False)
    assert missing.returncode == 1 and "no log at" in missing.stdout + missing.stderr
    assert "Traceback" not in missing.stdout + missing.stderr


def test_a_log_older_than_kept_tasks_is_judged_against_todays_files(recorded, tmp_path):
    log, root = recorded
    older = tmp_path / "older.duckdb"
    shutil.copy(log, older)
    with duckdb.connect(str(older)) as con:
        con.execute("DELETE FROM events WHERE kind = 'TaskRendered'")
    tasks = _task_dir(tmp_path)
    fae("--tasks-dir", str(tasks), "rejudge", "--full", "--log", str(older), "--workers", "1")
    assert _verdicts(older, _last_batch(older)) == _verdicts(older, "live")
    shutil.rmtree(tasks)
    fae("rejudge", "--full", "--log", str(older), "--workers", "1")
    gone = _verdicts(older, _last_batch(older))
    assert {v[0] for (_, judge, _), v in gone.items() if judge == "task"} == {"not_applicable"}, gone
