"""Spool folders of verdict files: a folder left by a process that was killed outright is removed by a later
rejudge of the same host, nothing any other process may still use is touched, and a spool that cannot be
written (a full temp folder) is one error line."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.grow_log import grow
from fae.errors import JudgeError
from fae.judge import parallel
from fae.judge.judging import judges_to_run
from fae.judge.parallel import STALE_SPOOL_S, ShardJob, judge_shard, remove_stale_spools, spool_folder
from fae.replay.source import run_ids
from fae.replay.stream import spans
from fae.store.log import EventLog

NO_PID = 4_194_305  # above Linux's largest pid_max (2**22) and macOS's: no process can have it


@pytest.fixture
def temp(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # what gettempdir() answers in this process
    return tmp_path


def _folder(temp: Path, name: str, *, age: float = STALE_SPOOL_S + 60) -> Path:
    folder = temp / name
    folder.mkdir()
    (folder / "shard-0-00000.parquet").write_bytes(b"verdicts")
    then = time.time() - age
    os.utime(folder, (then, then))
    return folder


def test_only_the_folder_of_an_ended_process_of_this_host_is_removed(temp):
    host = parallel._host_name()
    dead = _folder(temp, f"fae-rejudge-{NO_PID}@{host}.abc123xy")
    kept = {
        "live owner": _folder(temp, f"fae-rejudge-{os.getpid()}@{host}.abc123xy"),
        "recent": _folder(temp, f"fae-rejudge-{NO_PID}@{host}.recent00", age=5),
        "other host": _folder(temp, f"fae-rejudge-{NO_PID}@{host}x.abc123xy"),
        "other host, a name this host's name begins": _folder(temp, f"fae-rejudge-{NO_PID}@{host}.lan.abc123xy"),
        "other kind": _folder(temp, f"fae-ray-judge-{NO_PID}@{host}.abc123xy"),
        "no pid": _folder(temp, f"fae-rejudge-x{NO_PID}@{host}.abc123xy"),
        "an old-style name": _folder(temp, "fae-rejudge-abc123xy"),
    }
    target = _folder(temp, "not-a-spool")  # a link named like a dead process's spool must not be followed
    (temp / f"fae-rejudge-{NO_PID}@{host}.link0000").symlink_to(target, target_is_directory=True)
    plain = temp / f"fae-rejudge-{NO_PID}@{host}.file0000"
    plain.write_text("not a folder")
    then = time.time() - STALE_SPOOL_S - 60
    os.utime(plain, (then, then))

    assert remove_stale_spools("rejudge") == [dead]
    assert not dead.exists()
    for why, folder in kept.items():
        assert (folder / "shard-0-00000.parquet").exists(), why
    assert plain.exists() and (target / "shard-0-00000.parquet").exists()


def test_a_new_spool_folder_is_named_for_its_process_and_removes_what_an_ended_one_left(temp):
    host = parallel._host_name()
    left = _folder(temp, f"fae-rejudge-{NO_PID}@{host}.abc123xy")
    with spool_folder() as folder:
        name = Path(folder).name
        assert name.startswith(f"fae-rejudge-{os.getpid()}@{host}.")
        assert not left.exists()
        assert remove_stale_spools("rejudge", older_than=0) == []  # its own folder: a live process's
    assert not Path(folder).exists()


STALLING_REJUDGE = """
import sys, time
from fae.judge import parallel
def stalling(job):
    print("stalling", file=sys.stderr, flush=True)
    while True:
        time.sleep(1)
parallel.judge_shard = stalling
from fae.cli import app
app(["rejudge", "--full", "--log", sys.argv[1], "--workers", "1"])
"""


def test_the_next_rejudge_removes_the_spool_of_one_killed_outright(scenario_log, tmp_path):
    log = tmp_path / "log.duckdb"
    log.write_bytes(Path(scenario_log).read_bytes())
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    proc = subprocess.Popen(
        [sys.executable, "-c", STALLING_REJUDGE, str(log)], stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        said = []
        for line in proc.stderr:  # waits on what the rejudge says, not on time
            said.append(line)
            if line.strip() == "stalling":
                break
        assert "stalling" in "".join(said), "".join(said)
        proc.kill()  # SIGKILL: nothing of the process runs after it
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stderr.close()
    (left,) = temp.glob("fae-rejudge-*")
    assert left.name.startswith(f"fae-rejudge-{proc.pid}@"), left.name

    done = subprocess.run(
        [sys.executable, "-m", "fae.cli", "rejudge", "--full", "--log", str(log), "--workers", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert left.exists(), "a folder touched within the last ten minutes was removed"
    then = time.time() - STALE_SPOOL_S - 60
    os.utime(left, (then, then))
    done = subprocess.run(
        [sys.executable, "-m", "fae.cli", "rejudge", "--full", "--log", str(log), "--workers", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert list(temp.glob("fae-rejudge-*")) == [], "the killed rejudge's spool folder is still there"


def test_verdicts_that_cannot_be_spilled_are_one_error_naming_the_temp_folder(scenario_log, tmp_path):
    """A spill DuckDB cannot write (here: its folder is gone) is a JudgeError saying where and what to do."""
    with EventLog(scenario_log, read_only=True) as log:
        found = tuple(spans(log, run_ids(log)))
    judges = tuple((j.name, j.rules) for j in judges_to_run())
    job = ShardJob(
        str(scenario_log), found, judges, datetime(2026, 1, 1, tzinfo=UTC), "b", out=str(tmp_path / "gone" / "shard-0")
    )
    with pytest.raises(JudgeError, match=r"cannot write verdicts in the temp folder \(.*gone.*\).*TMPDIR"):
        judge_shard(job)


def _small_tmpfs(folder: Path) -> bool:
    folder.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(folder)], capture_output=True)
    except OSError:
        return False
    return done.returncode == 0


def test_a_full_temp_folder_is_one_line_and_no_verdict(scenario_log, tmp_path):
    """A real full file system (a one-page tmpfs) under TMPDIR: `fae rejudge` says so in one line, exit 1."""
    full = tmp_path / "full"
    if not _small_tmpfs(full):
        pytest.skip("cannot mount a small tmpfs here (needs root in a container that allows it)")
    grown_log = tmp_path / "grown.duckdb"
    grown_log.write_bytes(Path(scenario_log).read_bytes())
    assert grow(str(grown_log), 48) == 48
    try:
        for workers in ("1", "2"):
            done = subprocess.run(
                [sys.executable, "-m", "fae.cli", "rejudge", "--full", "--log", str(grown_log), "--workers", workers],
                env={**os.environ, "TMPDIR": str(full)},
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert done.returncode == 1, done.stderr
            assert "Traceback" not in done.stderr, done.stderr
            assert done.stderr.startswith("error: cannot write verdicts"), done.stderr
            assert "No space left on device" in done.stderr and "TMPDIR" in done.stderr
            assert list(full.iterdir()) == [], "the spool folder was left"
    finally:
        subprocess.run(["umount", str(full)], capture_output=True)
