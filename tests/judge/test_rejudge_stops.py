"""A rejudge on worker processes that is stopped: one line, no traceback, no verdict, no process left behind.

The judge is a plugin, found through a real entry point on PYTHONPATH, that notes which process is judging
and then waits: the signal is sent once the parent and a worker are each part way through a shard, instead
of at a guessed moment. ``fae rejudge`` runs as a real command in a session of its own.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fae.store.log import EventLog

STALL_JUDGE = '''
import os
import time
from pathlib import Path

from fae import Verdict, register_judge


@register_judge("stall")
def stall(rules):
    """Notes the process that judges, then waits (a stand-in for a judge that takes long)."""

    def verdict(run):
        Path(os.environ["FAE_STALL_DIR"], f"judging-{os.getpid()}").touch()
        time.sleep(300)
        return Verdict("pass", True, {})

    return verdict
'''


@pytest.fixture
def stalled(scenario_log, tmp_path):
    """A copy of a recorded log, an environment that finds the stalling judge, and a spool folder to watch."""
    site = tmp_path / "site"
    (site / "fae_stall_judge-0.1.dist-info").mkdir(parents=True)
    (site / "fae_stall_judge.py").write_text(STALL_JUDGE)
    (site / "fae_stall_judge-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fae-stall-judge\nVersion: 0.1\n"
    )
    (site / "fae_stall_judge-0.1.dist-info" / "entry_points.txt").write_text("[fae.judges]\nstall = fae_stall_judge\n")
    log = tmp_path / "log.duckdb"
    shutil.copy(scenario_log, log)
    marks, spool = tmp_path / "marks", tmp_path / "spool"
    marks.mkdir()
    spool.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "FAE_STALL_DIR": str(marks),
        "TMPDIR": str(spool),
    }
    return log, env, marks, spool


def _start(log: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "fae.cli", "rejudge", "--log", str(log), "--judge", "stall", "--workers", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # as a terminal would start it


def _judging(process: subprocess.Popen, marks: Path) -> set[int]:
    """Wait until two processes (the parent and a worker) are judging; returns the worker's pid."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        pids = {int(p.name.split("-")[1]) for p in marks.glob("judging-*")}
        if len(pids) >= 2:
            assert process.pid in pids, f"the parent {process.pid} is not among the judging processes {pids}"
            return pids - {process.pid}
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"fae rejudge ended before judging on two processes ({process.returncode}):\n{out}\n{err}")
        time.sleep(0.05)
    process.kill()
    pytest.fail(f"no two processes were judging after 180 s: {sorted(p.name for p in marks.iterdir())}")


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            try:
                children = {int(c) for c in (task / "children").read_text().split()}
            except OSError:
                continue
            todo.extend(children - found)
            found |= children
    return found


def _running(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"  # a zombie has ended; only its parent's wait is missing


def _all_ended(pids: set[int], within: float = 60) -> set[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        left = {pid for pid in pids if _running(pid)}
        if not left:
            return set()
        time.sleep(0.1)
    return left


def _batch(log: Path) -> tuple[list[tuple], int]:
    with EventLog(log, read_only=True) as opened:
        _, batches = opened.query("SELECT batch, completed_at FROM verdict_batches WHERE kind = 'rejudge'")
        _, [(count,)] = opened.query("SELECT count(*) FROM verdicts WHERE batch LIKE 'rejudge-%'")
    return batches, count


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads the process tree from /proc")
def test_sigterm_to_the_parent_alone_stops_its_workers_and_writes_nothing(stalled):
    log, env, marks, spool = stalled
    process = _start(log, env)
    workers = _judging(process, marks)
    family = _descendants(process.pid) | workers  # the forkserver, its worker, the resource tracker
    process.send_signal(signal.SIGTERM)  # to the parent only, as `kill PID` or a scheduler's time limit does
    try:
        out, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("fae rejudge did not end within 120 s of SIGTERM (waiting for its workers' shards?)")
    assert process.returncode == 128 + signal.SIGTERM, f"exit {process.returncode}:\n{out}\n{err}"
    assert "stopped by SIGTERM; its batch is left started and never completed" in err, err
    assert "Traceback" not in err, err
    assert not _all_ended(family), f"processes left running after the rejudge ended: {_all_ended(family, 0)}"
    assert list(spool.iterdir()) == [], "the spool folder of the workers' verdicts was left behind"
    batches, verdicts = _batch(log)
    assert len(batches) == 1 and batches[0][1] is None, f"the batch should be started, never completed: {batches}"
    assert verdicts == 0


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads the process tree from /proc")
def test_a_worker_whose_parent_is_killed_stops_and_removes_the_spool(stalled):
    log, env, marks, spool = stalled
    process = _start(log, env)
    workers = _judging(process, marks)
    process.kill()  # SIGKILL: the parent runs no clean-up at all
    process.wait(timeout=60)  # not communicate(): a worker left running would hold its pipes open
    process.stdout.close()
    process.stderr.close()
    left = _all_ended(workers)
    assert not left, f"workers {left} kept judging for a parent that is gone"
    assert not list(spool.glob("fae-rejudge-*/*")), f"the spool kept files: {list(spool.rglob('*'))}"


# Loaded at the start of every process of the rejudge (sitecustomize, found on PYTHONPATH): no pidfd, as outside
# Linux, and every pid looks alive to os.kill(pid, 0), as when the owner's pid was taken by a new process.
NO_PIDFD_PIDS_REUSED = """
import os

if hasattr(os, "pidfd_open"):
    del os.pidfd_open
_kill = os.kill


def kill(pid, sig):
    if sig != 0:
        _kill(pid, sig)


os.kill = kill
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads the process tree from /proc")
def test_a_worker_without_a_pidfd_stops_for_a_killed_parent_whose_pid_was_taken(stalled):
    log, env, marks, spool = stalled
    site = Path(env["PYTHONPATH"].split(os.pathsep)[0])
    (site / "sitecustomize.py").write_text(NO_PIDFD_PIDS_REUSED)
    process = _start(log, env)
    workers = _judging(process, marks)
    process.kill()
    process.wait(timeout=60)
    process.stdout.close()
    process.stderr.close()
    left = _all_ended(workers)
    assert not left, f"workers {left} kept judging: a pid that looks alive hid that their parent is gone"
    assert not list(spool.glob("fae-rejudge-*/*")), f"the spool kept files: {list(spool.rglob('*'))}"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads the process tree from /proc")
def test_ctrl_c_stops_the_rejudge_with_one_line(stalled):
    log, env, marks, spool = stalled
    process = _start(log, env)
    workers = _judging(process, marks)
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C reaches every process of the terminal's foreground group
    out, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGINT, f"exit {process.returncode}:\n{out}\n{err}"
    assert "stopped by SIGINT; its batch is left started and never completed" in err, err
    assert "Traceback" not in err, err
    assert not _all_ended(workers), "a worker outlived the rejudge"
    assert list(spool.iterdir()) == []
    assert _batch(log)[1] == 0


def test_two_workers_start_under_a_temp_folder_too_long_for_a_socket(scenario_log, tmp_path):
    log = tmp_path / "log.duckdb"
    shutil.copy(scenario_log, log)
    deep = tmp_path / ("t" * 100)  # with multiprocessing's own names, past the 107 bytes a socket path holds
    deep.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "fae.cli", "rejudge", "--log", str(log), "--workers", "2"],
        env={**os.environ, "TMPDIR": str(deep)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"fae rejudge --workers 2 under TMPDIR={deep} exited {done.returncode}:\n{done.stderr}"
    assert "rejudged" in done.stdout
    assert list(deep.iterdir()) == [], "the spool folder was left in TMPDIR"
