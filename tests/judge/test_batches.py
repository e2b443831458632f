"""A rejudge killed part way leaves a batch the log marks incomplete; compare leaves its verdicts out and says so."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap

from typer.testing import CliRunner

from fae.cli import app
from fae.store.log import EventLog

runner = CliRunner()
# The real `fae rejudge` on one worker, paused once its shard is judged and before its verdicts are
# written, so the kill lands between the batch's start and its completion (a pause, not a fake:
# nothing else about the rejudge is changed).
STALLING_REJUDGE = textwrap.dedent("""
    import sys, time
    import fae.judge.parallel as parallel

    real_judge_shard = parallel.judge_shard

    def stalling(job):
        real_judge_shard(job)
        print("stalling", file=sys.stderr, flush=True)
        while True:
            time.sleep(1)

    parallel.judge_shard = stalling
    from fae.cli import app
    # --from-events: the runs are read and judged in a shard (from the findings the log keeps, none would be)
    app(["rejudge", "--log", sys.argv[1], "--judge", "ensure_record", "--rule", "accept_corrections=false",
         "--workers", "1", "--chunk", "1", "--from-events"])
""")
COMPARE = ["compare", "--old", "", "--new", "accept_corrections=false", "--judge", "ensure_record"]


def _batches(log) -> dict[str, tuple]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT batch, complete, judged_runs, planned_runs FROM batch_status WHERE kind = 'rejudge'"
        )
    return {batch: tuple(rest) for batch, *rest in rows}


def test_a_killed_rejudge_is_an_incomplete_batch_that_compare_leaves_out(scenario_log, tmp_path):
    log = tmp_path / "scenarios.duckdb"
    shutil.copy(scenario_log, log)
    with EventLog(log, read_only=True) as opened:
        _, [(judged_runs,)] = opened.query("SELECT count(*) FROM runs WHERE status IN ('finished', 'errored')")
    assert judged_runs > 3

    # the killed process cannot remove its spool folder: keep it in this test's folder, not in /tmp
    proc = subprocess.Popen(
        [sys.executable, "-c", STALLING_REJUDGE, str(log)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    lines = []
    try:
        for line in proc.stderr:  # waits on what the rejudge says, not on time
            lines.append(line)
            if line.strip() == "stalling":
                break
        assert "stalling" in "".join(lines), "".join(lines)
        proc.send_signal(signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stderr.close()

    (killed,) = _batches(log).items()
    batch, (complete, judged, planned) = killed
    # started, never completed, and none of its verdicts in the log: a batch is all or nothing
    assert (complete, judged, planned) == (False, 0, judged_runs), killed
    with EventLog(log, read_only=True) as opened:
        _, [(kept,)] = opened.query("SELECT count(*) FROM verdicts WHERE batch = ?", [batch])
    assert kept == 0

    compared = runner.invoke(app, [*COMPARE, "--log", str(log)])
    assert compared.exit_code == 0, compared.output
    # nothing of the killed batch was used: every run's new-rule verdict was judged now
    flat = " ".join(compared.output.split())
    assert f"{judged_runs} runs compared; {judged_runs} verdicts were not in the log" in flat, compared.output

    finished = runner.invoke(
        app, ["rejudge", "--log", str(log), "--judge", "ensure_record", "--rule", "accept_corrections=false"]
    )
    assert finished.exit_code == 0, finished.output
    statuses = _batches(log)
    assert statuses.pop(batch) == (False, 0, judged_runs)
    assert list(statuses.values()) == [(True, judged_runs, judged_runs)], statuses
    again = runner.invoke(app, [*COMPARE, "--log", str(log)])
    assert f"{judged_runs} runs compared; every verdict was read from the log" in again.output, again.output


def test_compare_leaves_out_the_verdicts_of_a_batch_that_never_completed(scenario_log, tmp_path):
    """Verdicts written under a batch that was started and never completed (a writer that died between its
    verdicts and its completion, or an older fae that committed in chunks) are named and not used."""
    from datetime import UTC, datetime

    from fae.judge.rejudge import judge_run, judges_to_run
    from fae.replay.source import load_run
    from fae.store.log import Batch, VerdictBatchStarted

    log = tmp_path / "scenarios.duckdb"
    shutil.copy(scenario_log, log)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    plan = judges_to_run("ensure_record", {"accept_corrections": False})
    with EventLog(log) as opened:
        _, [(first,)] = opened.query("SELECT min(run_id) FROM runs WHERE status = 'finished'")
        rows = judge_run(load_run(opened, first), plan, judged_at=now, batch="half-done")
        opened.write_batch(
            Batch(
                verdict_batches=[
                    VerdictBatchStarted(
                        batch="half-done",
                        kind="rejudge",
                        started_at=now,
                        planned_runs=5,
                        judges=[{"judge": j.name, "rule_set": j.rules, "rule_set_hash": j.rules_hash} for j in plan],
                    )
                ],
                verdicts=rows,
            )
        )
    compared = runner.invoke(app, [*COMPARE, "--log", str(log)])
    assert compared.exit_code == 0, compared.output
    assert "verdict batch half-done is incomplete (1 of 5 runs judged" in compared.output, compared.output
    with EventLog(log, read_only=True) as opened:
        _, [(judged_runs,)] = opened.query("SELECT count(*) FROM runs WHERE status IN ('finished', 'errored')")
    flat = " ".join(compared.output.split())
    assert f"{judged_runs} runs compared; {judged_runs} verdicts were not in the log" in flat, compared.output
