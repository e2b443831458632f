"""A rejudge killed part way leaves a batch the log marks incomplete; compare leaves its verdicts out and says so."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import textwrap

from typer.testing import CliRunner

from fae.cli import app
from fae.store.log import EventLog

runner = CliRunner()
# The real `fae rejudge`, paused before its third run so the kill lands after two committed chunks
# (a pause, not a fake: nothing else about the rejudge is changed).
STALLING_REJUDGE = textwrap.dedent("""
    import sys, time
    import fae.judge.rejudge as rejudge

    real_load_runs = rejudge.load_runs

    def stalling(*args, **kwargs):
        for index, run in enumerate(real_load_runs(*args, **kwargs)):
            if index == 2:
                print("stalling", file=sys.stderr, flush=True)
                while True:
                    time.sleep(1)
            yield run

    rejudge.load_runs = stalling
    from fae.cli import app
    app(["rejudge", "--log", sys.argv[1], "--judge", "ensure_record", "--rule", "accept_corrections=false",
         "--chunk", "1"])
""")
COMPARE = ["compare", "--old", "", "--new", "accept_corrections=false", "--judge", "ensure_record"]


def _batches(log) -> dict[str, tuple]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT batch, complete, judged_runs, planned_runs FROM batch_status"
                               " WHERE kind = 'rejudge'")
    return {batch: tuple(rest) for batch, *rest in rows}


def test_a_killed_rejudge_is_an_incomplete_batch_that_compare_leaves_out(scenario_log, tmp_path):
    log = tmp_path / "scenarios.duckdb"
    shutil.copy(scenario_log, log)
    with EventLog(log, read_only=True) as opened:
        _, [(judged_runs,)] = opened.query("SELECT count(*) FROM runs WHERE status IN ('finished', 'errored')")
    assert judged_runs > 3

    proc = subprocess.Popen([sys.executable, "-c", STALLING_REJUDGE, str(log)], stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        for line in proc.stderr:  # waits on what the rejudge says, not on time
            lines.append(line)
            if line.strip() == "stalling":
                break
        assert "judged 2 of" in "".join(lines), "".join(lines)
        proc.send_signal(signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stderr.close()

    (killed,) = _batches(log).items()
    batch, (complete, judged, planned) = killed
    assert (complete, judged, planned) == (False, 2, judged_runs), killed

    compared = runner.invoke(app, [*COMPARE, "--log", str(log)])
    assert compared.exit_code == 0, compared.output
    assert f"verdict batch {batch} is incomplete (2 of {judged_runs} runs judged" in compared.output, compared.output
    # the killed batch's two verdicts were not used: every run's new-rule verdict was judged now
    assert f"{judged_runs} runs; {judged_runs} verdicts judged now" in compared.output, compared.output

    finished = runner.invoke(app, ["rejudge", "--log", str(log), "--judge", "ensure_record",
                                   "--rule", "accept_corrections=false"])
    assert finished.exit_code == 0, finished.output
    statuses = _batches(log)
    assert statuses.pop(batch) == (False, 2, judged_runs)
    assert list(statuses.values()) == [(True, judged_runs, judged_runs)], statuses
    again = runner.invoke(app, [*COMPARE, "--log", str(log)])
    assert f"{judged_runs} runs; 0 verdicts judged now" in again.output, again.output
