"""``fae record --ray`` on a two-node Ray cluster: shards merged, a killed actor's runs resumed, a stopped driver."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from fae import api
from fae.errors import FaeError
from fae.harness import shards as shard_files
from fae.harness.ray_record import RayActors, shard_dir
from fae.harness.shards import merge_shards
from fae.store.live import LogReader
from fae.store.log import EventLog
from tests.harness.executor_contract import CONFIG, contract_runs, keeps_the_contract, outcomes
from tests.run_report import live_against_rejudge, why_not_finished

pytestmark = pytest.mark.timeout(900)  # a cluster of two nodes on a loaded 2-core machine starts slowly

TASK = "builtin-create-patient"


def _runs(log: Path) -> list[tuple[str, int, str]]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT run_id, variation, status FROM runs ORDER BY run_id")
    return rows


def _actor_holding(shard: Path) -> int | None:
    """The pid of the actor process that holds a shard open (found by its open files, as `lsof` would)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) == str(shard) for fd in (entry / "fd").iterdir()):
                return int(entry.name)
        except OSError:
            continue
    return None


def _finished_in_a_shard(shards: Path) -> bool:
    """Whether an actor has finished a run, read live while it holds its shard."""
    for shard in shards.glob("actor-*.duckdb"):
        try:
            with LogReader(shard) as reader:
                _, rows = reader.query("SELECT count(*) FROM runs WHERE status = 'finished'")
        except Exception:  # not opened yet, or its live endpoint not up yet
            continue
        if rows[0][0]:
            return True
    return False


REPEATS = 3
"""Each variation's runs, in the driver tests: the suite must outlast the wait for its first finished run, however
fast a run is (one of this task takes ~0.2 s; the stop or kill must find runs still to do)."""


def _driver_with_a_finished_run(ray_cluster, log: Path, variations: str) -> tuple[subprocess.Popen, Path]:
    """`fae record --ray` as a process of its own, once one of its actors has finished a run; and its shards."""
    address = ray_cluster.get_runtime_context().gcs_address
    command = [
        sys.executable,
        "-m",
        "fae.cli",
        "record",
        "--log",
        str(log),
        "--task",
        TASK,
        "--variations",
        variations,
        "--repeats",
        str(REPEATS),
        "--ray",
        address,
        "--ray-actors",
        "2",
        "--concurrency",
        "1",
    ]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600  # ends when a run finished; the bound is for a stalled machine
    shards = shard_dir(log)
    while time.monotonic() < deadline and proc.poll() is None and not _finished_in_a_shard(shards):
        time.sleep(0.2)
    assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
    assert _finished_in_a_shard(shards), "no run finished on the cluster within 600 s"
    return proc, shards


def _resume(ray_cluster, log: Path, variations: str, *extra: str) -> None:
    """`fae record --resume` as a user runs it after a kill: a new process (a new Ray job), once the cluster has
    both CPUs back (a killed driver's actors hold them until Ray has ended them)."""
    deadline = time.monotonic() + 600
    while (free := ray_cluster.available_resources().get("CPU", 0)) < 2:
        assert time.monotonic() < deadline, f"{free} of 2 CPUs free 600 s after the kill"
        time.sleep(1)
    address = ray_cluster.get_runtime_context().gcs_address
    resumed = subprocess.run(
        [
            sys.executable,
            "-m",
            "fae.cli",
            "record",
            "--log",
            str(log),
            "--task",
            TASK,
            "--variations",
            variations,
            *extra,
            "--ray",
            address,
            "--ray-actors",
            "2",
            "--concurrency",
            "2",
            "--resume",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]


def test_a_killed_actor_loses_no_run_and_resume_doubles_none(ray_cluster, tmp_path):
    log = tmp_path / "suite.duckdb"
    victim = shard_dir(log.resolve()) / "actor-1.duckdb"
    killed: list[int] = []

    def kill_actor_one(spec, status):
        pid = _actor_holding(victim) if not killed else None
        if pid is not None:
            os.kill(pid, signal.SIGKILL)  # mid-suite, with its runs in flight
            killed.append(pid)

    first = api.record(
        log,
        api.run_specs([TASK], variations=range(8)),
        api.RecordConfig(execution=api.Execution(ray="auto", ray_actors=2), concurrency=2),
        on_progress=kill_actor_one,
    )
    assert killed, "actor 1 was never seen holding its shard"
    # a run in flight is in the shard (stored interrupted) or, killed before its first batch was journaled, not
    # in the log at all: either way it is not finished, and --resume records it
    lost = sum(1 for _, status in first.runs if status == "lost with its worker")
    assert lost >= 1 and first.interrupted_marked <= lost, f"the kill caught no run in flight: {first}"
    assert not shard_dir(log).exists()  # merged, then removed
    after_kill = _runs(log)
    assert {status for _, _, status in after_kill} <= {"finished", "interrupted"}, after_kill
    assert Counter(status for _, _, status in after_kill)["interrupted"] == first.interrupted_marked

    _resume(ray_cluster, log, "0-7")
    runs = _runs(log)
    # a run whose answer the kill cut off may have finished in the shard all the same: done, not redone
    done_before = Counter(status for _, _, status in after_kill)["finished"]
    assert done_before >= 8 - lost and len(runs) - len(after_kill) == 8 - done_before, runs
    finished = Counter(variation for _, variation, status in runs if status == "finished")
    assert finished == dict.fromkeys(range(8), 1), why_not_finished(log)
    assert len({run_id for run_id, _, _ in runs}) == len(runs)
    if first.interrupted_marked:  # a retried run has its own id
        assert any(run_id.endswith(".a2") for run_id, _, _ in runs), runs
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT count(DISTINCT run_id) FROM verdicts WHERE batch = 'live'")
    assert rows[0][0] == 8  # each finished run judged live in its shard, the verdicts merged with it
    finished_ids = {run_id for run_id, _, status in runs if status == "finished"}
    live, here = (  # judged in an actor as in this process
        [row for row in rows if row[0] in finished_ids] for rows in live_against_rejudge(log)
    )
    assert live and live == here and not [row for row in live if row[2] == "error"], (live, here)


def test_sigterm_stops_the_driver_and_merges_what_was_recorded(ray_cluster, tmp_path):
    log = tmp_path / "stopped.duckdb"
    proc, shards = _driver_with_a_finished_run(ray_cluster, log, "0-11")
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=180)[0].decode()
    assert proc.returncode == 128 + signal.SIGTERM, output[-3000:]
    assert not shards.exists(), output[-3000:]
    stopped = _runs(log)
    assert stopped and {status for _, _, status in stopped} <= {"finished", "interrupted"}, stopped
    assert Counter(status for _, _, status in stopped)["finished"] < 12 * REPEATS, "the stop came after the suite ended"
    with EventLog(log, read_only=True) as opened:  # a run in flight was cancelled by the signal, not lost
        _, rows = opened.query("SELECT count(*) FROM runs WHERE status = 'interrupted' AND cause = 'signal'")
    assert rows[0][0] == Counter(status for _, _, status in stopped)["interrupted"]
    assert "stopped by SIGTERM" in output, output[-3000:]


def test_an_external_fhir_server_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(FaeError, match="embedded FHIR server only"):
        api.record(
            tmp_path / "x.duckdb",
            api.run_specs([TASK]),
            api.RecordConfig(
                stack=api.StackConfig(fhir_url="http://127.0.0.1:9/fhir"), execution=api.Execution(ray="auto")
            ),
        )
    assert not (tmp_path / "x.duckdb").exists()


def test_without_the_ray_extra_the_error_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what an install without the extra sees: import ray fails
    with pytest.raises(FaeError, match=r"fae record --ray needs the ray extra: pip install 'fae\[ray\]'"):
        api.record(tmp_path / "x.duckdb", api.run_specs([TASK]), api.RecordConfig(execution=api.Execution(ray="auto")))


def test_a_killed_driver_loses_no_run_and_resume_doubles_none(ray_cluster, tmp_path):
    """SIGKILL to `fae record --ray` mid-suite: no signal handler runs, the actors die with their owner, their
    shards stay behind unmerged; `--resume` settles and merges them, then records what is left, once each."""
    log = tmp_path / "killed.duckdb"
    proc, shards = _driver_with_a_finished_run(ray_cluster, log, "0-7")
    proc.kill()
    proc.communicate(timeout=60)
    assert sorted(p.name for p in shards.glob("actor-*.duckdb")), "the killed driver left no shard"

    _resume(ray_cluster, log, "0-7", "--repeats", str(REPEATS))
    assert not shards.exists()
    runs = _runs(log)
    # a run finished before the kill counts as done: once per spec, so one redone would count twice
    finished = Counter(variation for _, variation, status in runs if status == "finished")
    assert finished == dict.fromkeys(range(8), REPEATS), why_not_finished(log)
    assert {status for _, _, status in runs} <= {"finished", "interrupted"}, runs
    assert len({run_id for run_id, _, _ in runs}) == len(runs)


HOLDER = """
import sys
from fae.store.log import EventLog
log = EventLog(sys.argv[1])
print("holding", flush=True)
sys.stdin.readline()
log.close()
"""


def _hold(shard: Path) -> subprocess.Popen:
    """Another process holding a shard open for writing, as an actor of a SIGKILLed driver does until Ray stops it."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(shard)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "holding"
    return holder


def _shard_with_a_finished_run(log: Path) -> Path:
    api.record(log, api.run_specs([TASK], variations=[0]))
    shard = shard_dir(log) / "actor-0.duckdb"
    shard.parent.mkdir()
    log.rename(shard)
    return shard


def test_resume_waits_for_a_shard_an_old_actor_still_holds(tmp_path):
    log = tmp_path / "held.duckdb"
    shard = _shard_with_a_finished_run(log)
    holder = _hold(shard)
    merged: list[object] = []
    waiting = threading.Thread(target=lambda: merged.append(merge_shards(log)))
    waiting.start()
    waiting.join(2.0)
    assert waiting.is_alive() and not merged, "merged a shard another process still held"
    holder.communicate("\n", timeout=60)  # the old actor goes
    waiting.join(120)
    assert merged == [0] and not shard.parent.exists()
    assert [status for _, _, status in _runs(log)] == ["finished"]


def test_a_shard_held_past_the_wait_is_one_clear_error(tmp_path, monkeypatch):
    log = tmp_path / "stuck.duckdb"
    shard = _shard_with_a_finished_run(log)
    monkeypatch.setattr(shard_files, "SHARD_RELEASE_S", 1.0)
    holder = _hold(shard)
    try:
        with pytest.raises(FaeError, match=r"still held by another process after 1 s .* --resume again"):
            merge_shards(log)
    finally:
        holder.communicate("\n", timeout=60)
    assert shard.exists()  # left for the next --resume, untouched


def test_a_bad_actor_start_wait_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    for bad in ("soon", "0", "-5", "nan"):
        monkeypatch.setenv("FAE_RAY_ACTOR_START_S", bad)
        with pytest.raises(FaeError, match="FAE_RAY_ACTOR_START_S must be a"):
            api.record(
                tmp_path / "x.duckdb", api.run_specs([TASK]), api.RecordConfig(execution=api.Execution(ray="auto"))
            )
        assert not (tmp_path / "x.duckdb").exists()


def test_actors_the_cluster_has_no_cpu_for_are_one_clear_error_not_a_hang(ray_cluster, tmp_path, monkeypatch):
    """Three actors on two CPUs: Ray would wait for the third forever; fae gives up after the wait it was given.

    Last in the file: it checks that the CPUs come back, so a test after it is not starved.
    """
    monkeypatch.setenv("FAE_RAY_ACTOR_START_S", "8")
    log = tmp_path / "starved.duckdb"
    with pytest.raises(
        FaeError,
        match=r"of 3 recording actors did not start within 8 s \(each needs 1 CPU; "
        r"the cluster has \d+ of 2 CPUs free\)",
    ):
        api.record(
            log,
            api.run_specs([TASK], variations=range(3)),
            api.RecordConfig(execution=api.Execution(ray="auto", ray_actors=3), concurrency=1),
        )
    assert not log.exists() or not _runs(log)  # no run was started, so none can be mislabelled
    deadline = time.monotonic() + 300  # the killed actors' CPUs are given back; the bound is for a stalled machine
    while time.monotonic() < deadline and ray_cluster.available_resources().get("CPU", 0) < 2:
        time.sleep(0.5)
    assert ray_cluster.available_resources().get("CPU", 0) == 2, ray_cluster.available_resources()


def test_ray_actors_keep_the_executors_contract(ray_cluster, tmp_path):
    """The Ray executor records what the in-process one records (tests/harness/executor_contract.py)."""
    here = tmp_path / "here"
    here.mkdir()
    api.record(here / "baseline.duckdb", contract_runs(here), CONFIG)
    address = ray_cluster.get_runtime_context().gcs_address
    keeps_the_contract(tmp_path, RayActors(address, 2), outcomes(here / "baseline.duckdb"))
