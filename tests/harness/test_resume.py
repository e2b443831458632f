"""SIGKILL a recording mid-suite: finished runs stay complete, the rest are marked, --resume finishes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from typer.testing import CliRunner

from fae.cli import app
from fae.store.live import LogReader
from fae.store.log import EventLog
from tests.processes import upstream_children, wait_gone

VARIATIONS = 24
runner = CliRunner()


def _record(log, *extra, processes="2"):
    return [
        sys.executable,
        "-m",
        "fae.cli",
        "record",
        "--log",
        str(log),
        "--task",
        "builtin-create-patient",
        "--variations",
        f"0-{VARIATIONS - 1}",
        "--concurrency",
        "2",
        "--processes",
        processes,
        *extra,
    ]


def _counts(log) -> tuple[int, int]:
    """(finished, running) runs, read live while the recorder holds the file."""
    try:
        with LogReader(log) as reader:
            _, rows = reader.query(
                "SELECT count(*) FILTER (status = 'finished'), count(*) FILTER (status = 'running') FROM runs"
            )
            return rows[0]
    except Exception:  # the file may not exist yet
        return 0, 0


def test_sigkill_mid_suite_then_resume(tmp_path):
    log = tmp_path / "suite.duckdb"
    proc = subprocess.Popen(_record(log), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    seen_live = 0
    while time.monotonic() < deadline and proc.poll() is None:
        seen_live, running = _counts(log)
        if seen_live >= 3 and running >= 1:
            break
        time.sleep(0.1)
    assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
    assert seen_live >= 3
    # frozen where it was seen, so the checks below cannot give it time to finish the suite (under load they
    # took long enough for all 24 runs to start); readers still work, and SIGKILL then lands mid-suite
    os.kill(proc.pid, signal.SIGSTOP)
    # the CLI's readers work while the recorder holds the file
    listed = runner.invoke(app, ["runs", "--log", str(log), "--status", "finished"])
    assert listed.exit_code == 0 and ".gold.r0" in listed.output, listed.output
    first = next(word for line in listed.output.splitlines() for word in line.split() if word.endswith(".gold.r0"))
    shown = runner.invoke(app, ["show", first, "--log", str(log)])
    assert shown.exit_code == 0 and "run finished" in shown.output, shown.output
    counted = runner.invoke(app, ["sql", "--json", "--log", str(log), "SELECT count(*) AS n FROM fhir_exchanges"])
    assert counted.exit_code == 0 and json.loads(counted.output)["n"] > 0
    children = upstream_children(proc.pid)
    assert len(children) == 1, children  # the FHIR and MCP servers' process (--processes 2, the default)
    stopped_at = _counts(log)
    assert stopped_at[0] >= 3 and stopped_at[1] >= 1, stopped_at
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert wait_gone(children[0]), "the upstream process outlived a killed `fae record`"

    with EventLog(log) as opened:  # opening for writing replays DuckDB's WAL
        _, runs = opened.query("SELECT run_id, status FROM runs")
        finished = [r for r, s in runs if s == "finished"]
        unfinished = [r for r, s in runs if s != "finished"]
        # a live reader may trail what the journal holds, so the killed log has at least what it saw
        assert finished and unfinished and len(finished) >= stopped_at[0] and len(runs) < VARIATIONS, runs
        for run_id in finished:
            _, kinds = opened.query("SELECT kind FROM events WHERE run_id = ? ORDER BY seq", [run_id])
            kinds = [k for (k,) in kinds]
            assert kinds[0] == "RunStarted" and kinds[-1] == "RunFinished"
            for needed in ("SandboxSeeded", "ToolCalled", "FhirInteracted", "AnswerGiven", "StateCaptured"):
                assert needed in kinds, (run_id, needed)

    # the same `fae record --resume`, in process and in one process (what is checked is the log it leaves)
    resumed = runner.invoke(app, _record(log, "--resume", processes="1")[3:])
    assert resumed.exit_code == 0, resumed.output[-3000:]

    with EventLog(log, read_only=True) as done:
        _, rows = done.query("SELECT task_id, variation, agent, repeat, status, run_id FROM runs")
        per_spec: dict = {}
        for task_id, variation, agent, repeat, status, run_id in rows:
            per_spec.setdefault((task_id, variation, agent, repeat), []).append((status, run_id))
        assert len(per_spec) == VARIATIONS
        for spec, attempts in per_spec.items():
            assert [s for s, _ in attempts].count("finished") == 1, (spec, attempts)
        statuses = {run_id: status for *_, status, run_id in rows}
        for run_id in unfinished:
            assert statuses[run_id] == "interrupted"
            _, last = done.query("SELECT payload FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT 1", [run_id])
            assert json.loads(last[0][0])["status"] == "interrupted"
        for run_id in finished:  # untouched by the resume
            assert statuses[run_id] == "finished"

    again = subprocess.run(_record(log, "--resume"), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0
    with EventLog(log, read_only=True) as done:
        _, (count,) = done.query("SELECT count(*) FROM runs WHERE status = 'finished'")
        assert count[0] == VARIATIONS
