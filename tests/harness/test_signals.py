"""SIGTERM (or SIGINT) a `fae record` of gold runs at chosen moments: --resume then gives one finished run per spec.

The moments are drawn from a seed and waited for on what the log shows (rows read live), never
on sleeps: while the stack starts, with the first run in flight, between runs, while the stack
closes, two signals in a row (the second exits at once), and Ctrl-C with runs in flight.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fae.cli import app
from fae.store.live import LogReader
from fae.store.log import EventLog
from tests.plans import slow_agent

VARIATIONS = 5
SEED = 20261201
_rng = random.Random(SEED)
# (name, finished runs to wait for, runs in flight to wait for, signal, how many times)
MOMENTS = [
    ("startup", None, None, signal.SIGTERM, 1),
    ("first-run", 0, 1, signal.SIGTERM, 1),
    ("between-runs", _rng.randint(1, VARIATIONS - 3), 1, signal.SIGTERM, 1),
    ("shutdown", VARIATIONS, 0, signal.SIGTERM, 1),
    ("twice", _rng.randint(1, VARIATIONS - 3), 1, signal.SIGTERM, 2),
    ("ctrl-c", _rng.randint(0, VARIATIONS - 3), 1, signal.SIGINT, 1),
]
IN_FLIGHT = {"first-run", "ctrl-c"}
"""The moments that must interrupt a run: a slow run is recorded beside the gold ones, and the signal waits for it
to be running (a gold run takes ~0.2 s, and the one seen running could end before the signal was handled)."""
WAIT_S = 240  # each wait ends when its moment shows in the log; the bound only matters on a stalled machine
runner = CliRunner()


def _record(log, *extra, agents=("gold",), processes="2"):
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
        *(a for agent in agents for a in ("--agent", agent)),
        "--concurrency",
        "2",
        "--processes",
        processes,
        *extra,
    ]


def _counts(log, running_agent=None) -> tuple[int, int] | None:
    """(finished, running) runs read live while the recorder holds the log; None before it is readable.
    ``running_agent``: count only that agent's runs running."""
    try:
        with LogReader(log) as reader:
            _, rows = reader.query(
                "SELECT count(*) FILTER (status = 'finished'),"
                " count(*) FILTER (status = 'running' AND agent = coalesce(?, agent)) FROM runs",
                [running_agent],
            )
            return rows[0]
    except Exception:
        return None


def _wait_for_moment(proc, log, finished_at_least, running_at_least, running_agent=None) -> str:
    """Block until the moment shows in the log (or the process ended); returns what was seen."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and proc.poll() is None:
        if finished_at_least is None:
            if log.exists():  # the stack is opening the log: the servers are still starting
                return "log created"
        else:
            counts = _counts(log, running_agent)
            if counts and counts[0] >= finished_at_least and counts[1] >= running_at_least:
                return f"finished={counts[0]} running={counts[1]}"
        time.sleep(0.02)
    return f"process ended or timed out (rc={proc.poll()})"


def _runs(log) -> list[tuple]:
    with EventLog(log) as opened:  # opening for writing moves any journal left behind into the log
        _, rows = opened.query(
            "SELECT task_id, variation, agent, repeat, run_id, status, cause, error FROM runs ORDER BY run_id"
        )
    return rows


@pytest.mark.timeout(900)  # two waits of WAIT_S and a resume: bounded by the waits, not pytest's default
@pytest.mark.parametrize(
    ("moment", "finished_at_least", "running_at_least", "signum", "signals"), MOMENTS, ids=[m[0] for m in MOMENTS]
)
def test_a_signal_at_a_moment_then_resume_finishes_each_spec_once(
    tmp_path, moment, finished_at_least, running_at_least, signum, signals
):
    log = tmp_path / "suite.duckdb"
    slow = slow_agent(tmp_path) if moment in IN_FLIGHT else None
    agents = ("gold", slow) if slow else ("gold",)
    proc = subprocess.Popen(_record(log, agents=agents), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = _wait_for_moment(proc, log, finished_at_least, running_at_least, slow)
        early = []
        if proc.poll() is None:
            proc.send_signal(signum)
            if signals == 2:
                # signals of one kind are not queued: send the second once the first was handled
                for line in proc.stderr:
                    early.append(line)
                    if ": stopping;" in line:
                        proc.send_signal(signum)
                        break
        stdout, stderr = proc.communicate(timeout=WAIT_S)
        stderr = "".join(early) + stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = f"moment {moment} ({seen}); rc={proc.returncode}\n{stdout[-1500:]}\n{stderr[-3000:]}"
    assert "Traceback" not in stderr, output
    if moment == "shutdown":
        # a signal that comes once the recording has ended, its summary printed and its handlers put back, ends
        # the process by the signal's default action (-SIGTERM here, 143 to a shell) with every run stored: a
        # loaded CI run sent it there. Before that point it must be handled (exit 0 or 143, nothing lost).
        ended_late = proc.returncode == -signum and "recorded into" in stdout
        assert proc.returncode in (0, 128 + signum) or ended_late, output
    else:
        assert proc.returncode == 128 + signum, output
    if proc.returncode > 0:
        assert "--resume" in stderr, output
    if signals == 2:
        assert "again: exiting now" in stderr, output

    before = _runs(log) if log.exists() else []
    for *_, run_id, status, cause, error in before:
        # nothing the signal did is blamed on the agent or shown as a harness failure; runs cut off
        # by the second signal stay `running` until the next recording marks them
        allowed = ("finished", "interrupted", "running") if signals == 2 else ("finished", "interrupted")
        assert status in allowed, (run_id, status, cause, error, output)
        if status == "interrupted":
            assert cause in ("signal", "harness"), (run_id, cause, error)
            if signals == 1:
                assert cause == "signal" and signal.Signals(signum).name in error, (run_id, cause, error)
    if moment in ("first-run", "ctrl-c"):
        assert any(status == "interrupted" for *_, status, _, _ in before), (before, output)

    if slow:  # the resume records the slow run again under the same agent name; it need not wait again
        Path(slow.removeprefix("plan:")).write_text("steps:\n  - answer: done\n")
    # the same `fae record`, in process and in one process: what is checked is the log it leaves, and a second
    # process for the servers costs ~3 CPU-seconds a case
    resumed = runner.invoke(app, _record(log, "--resume", agents=agents, processes="1")[3:])
    assert resumed.exit_code == 0, resumed.output[-3000:]
    after = _runs(log)
    per_spec: dict = {}
    for task_id, variation, agent, repeat, run_id, status, cause, error in after:
        per_spec.setdefault((task_id, variation, agent, repeat), []).append((run_id, status, cause, error))
        assert status in ("finished", "interrupted"), (run_id, status, cause, error)
        if status == "interrupted":
            assert cause in ("signal", "harness"), (run_id, cause, error)
    assert len(per_spec) == VARIATIONS * len(agents), per_spec
    for spec, attempts in per_spec.items():
        assert [a[1] for a in attempts].count("finished") == 1, (spec, attempts)
    with EventLog(log, read_only=True) as done:
        for *_, run_id, status, cause, _ in after:
            # an exchange the proxy was already forwarding may be recorded after an interrupted run's end
            _, ends = done.query(
                "SELECT payload FROM events WHERE run_id = ? AND kind IN ('RunFinished', 'RunFailed')", [run_id]
            )
            assert len(ends) == 1, (run_id, ends)
            end = json.loads(ends[0][0])
            if status == "finished":
                assert end["type"] == "RunFinished", (run_id, end)
            else:
                assert (end["type"], end["status"], end["cause"]) == ("RunFailed", "interrupted", cause), (run_id, end)
    # the resumed recording cleaned up after itself
    assert not os.path.exists(str(log) + ".live.json")


def test_a_repeated_sigint_is_the_same_key_press_only_through_a_forwarding_parent_and_soon():
    from fae.harness.interrupt import SAME_PRESS_S, StopRequest, same_key_press

    stop = StopRequest()
    stop.request(signal.SIGINT)
    first = stop.at
    assert first is not None
    assert same_key_press(stop, signal.SIGINT, first + 0.2, shared=True)  # uv's forwarded copy
    assert not same_key_press(stop, signal.SIGINT, first + SAME_PRESS_S + 0.1, shared=True)  # a second press
    assert not same_key_press(stop, signal.SIGINT, first + 0.2, shared=False)  # no parent got the key press
    assert not same_key_press(stop, signal.SIGTERM, first + 0.2, shared=True)  # another signal
    term = StopRequest()
    term.request(signal.SIGTERM)
    assert not same_key_press(term, signal.SIGINT, (term.at or 0) + 0.2, shared=True)


@pytest.mark.timeout(900)
def test_ctrl_c_on_uv_run_stops_gracefully(tmp_path):
    """`uv run fae record` (the README's form) with Ctrl-C: the terminal signals the whole process group and uv
    passes the signal on again, so fae gets SIGINT twice; that is one key press, and the stop is graceful."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    log = tmp_path / "suite.duckdb"
    slow = slow_agent(tmp_path)
    command = [uv, "run", "--frozen", "fae", *_record(log, agents=("gold", slow))[3:]]
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )  # its own process group, as a terminal's foreground job
    try:
        seen = _wait_for_moment(proc, log, 0, 1, slow)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        stdout, stderr = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    output = f"({seen}); rc={proc.returncode}\n{stdout[-1500:]}\n{stderr[-3000:]}"
    assert "SIGINT: stopping;" in stderr and "again: exiting now" not in stderr, output
    assert proc.returncode == 128 + signal.SIGINT, output
    runs = _runs(log)
    interrupted = [r for r in runs if r[5] == "interrupted"]
    assert interrupted and all(r[6] == "signal" and "SIGINT" in r[7] for r in interrupted), (runs, output)
    assert all(r[5] in ("finished", "interrupted") for r in runs), (runs, output)
