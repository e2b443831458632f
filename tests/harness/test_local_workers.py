"""``fae record --workers N``: shards merged, secrets scrubbed in every worker, a killed worker resumed, stops.

Each recording here starts real worker processes (each imports fae and opens its own stack), so the
suites are small: the built-in task's gold runs, a few variations.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fae import api
from fae.cli import app
from fae.errors import FaeError
from fae.harness.config import Execution, RecordConfig, StackConfig
from fae.harness.interrupt import StopRequest
from fae.harness.local_workers import RUNS_PER_WORKER, LocalWorkers, choose_workers, default_workers
from fae.harness.prepare import prepare_recording
from fae.harness.recording import record
from fae.harness.run import RunSpec
from fae.harness.shards import ShardJob, ShardRecorder, shard_dir, shard_paths
from fae.harness.worklist import Worklist, render_task
from fae.store import journal as journal_module
from fae.store.live import LogReader, live_file
from fae.store.log import EventLog
from tests.plans import slow_agent
from tests.run_report import live_against_rejudge, why_not_finished

pytestmark = pytest.mark.timeout(900)  # worker processes start slowly on a loaded 2-core machine

TASK = "builtin-create-patient"
KEY = "sk-proj-WORKERKEY-0042"
runner = CliRunner()


def _runs(log: Path) -> list[tuple[str, int, str, str | None]]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT run_id, variation, status, cause FROM runs ORDER BY run_id")
    return rows


def test_two_workers_record_each_run_once_judged_live_with_the_key_scrubbed(tmp_path):
    log = tmp_path / "suite.duckdb"
    plan = tmp_path / "tells-the-key.yaml"
    plan.write_text(f"steps:\n  - answer: the key is {KEY}\n")  # the key reaches the log unless scrubbed
    seen_live: list[str] = []

    def look_while_recording(spec, status):
        if not seen_live:  # the first run back: the others are still being recorded in the shards
            assert live_file(shard_paths(log)[0]).exists()
            listed = runner.invoke(app, ["runs", "--log", str(log)])
            seen_live.append(listed.output)

    result = api.record(
        log,
        api.run_specs([TASK], variations=range(3), agents=["gold", f"plan:{plan}"]),
        api.RecordConfig(llm=api.LlmConfig(api_key=KEY), execution=api.Execution(workers=2), concurrency=4),
        on_progress=look_while_recording,
    )
    assert result.statuses == {"finished": 6}, why_not_finished(log)
    assert spec_id_in(seen_live[0], result.runs[0][0]), seen_live[0]  # `fae runs` shows a shard's run live
    assert not shard_dir(log).exists()
    runs = _runs(log)
    assert len(runs) == 6 and len({run_id for run_id, *_ in runs}) == 6
    with EventLog(log, read_only=True) as opened:
        _, verdicts = opened.query("SELECT count(DISTINCT run_id) FROM verdicts WHERE batch = 'live'")
        _, leaks = opened.query("SELECT count(*) FROM events WHERE payload::VARCHAR LIKE ?", [f"%{KEY}%"])
        _, answers = opened.query(
            "SELECT count(*) FROM events WHERE kind = 'AnswerGiven' AND payload::VARCHAR LIKE '%the key is%'"
        )
    assert verdicts[0][0] == 6  # judged live in the workers, the verdicts merged with the runs
    assert answers[0][0] == 3 and leaks[0][0] == 0  # each worker's writer knew the configured key
    # judged in a worker as in this process (a worker once added the scenario folder twice, and every
    # ensure_record and oracle verdict of a worker's run was an error)
    live, here = live_against_rejudge(log)
    assert live == here and not [row for row in live if row[2] == "error"], (live, here)


def spec_id_in(listing: str, run_id: str) -> bool:
    """Whether a `fae runs` table names the run (rich may cut a long id: its start is enough)."""
    return run_id[:20] in listing


def test_a_killed_worker_loses_no_run_and_resume_doubles_none(tmp_path):
    log = tmp_path / "suite.duckdb"
    workers: list[int] = []
    killed: list[int] = []
    slow = slow_agent(tmp_path, 8)  # in flight for seconds after it is seen running (the kill follows at once)

    def kill_a_worker_running_a_slow_run() -> None:
        """SIGKILL the worker whose shard shows a slow run running: it dies with that run in flight."""
        index = wait_until_running(log, slow)
        if index is not None:
            os.kill(workers[index], signal.SIGKILL)
            killed.append(workers[index])

    watcher = threading.Thread(target=kill_a_worker_running_a_slow_run, daemon=True)
    first = record(
        log,
        api.run_specs([TASK], variations=range(4), agents=["gold", slow]),
        api.RecordConfig(concurrency=4),
        executor=LocalWorkers(2, on_start=lambda pool: (workers.extend(pool.pids), watcher.start())),
    )
    watcher.join(60)
    assert killed, f"no slow run was seen running: {first}"
    lost = sum(1 for _, status in first.runs if status == "lost with its worker")
    assert lost >= 1 and first.interrupted_marked <= lost, f"the kill caught no run in flight: {first}"
    assert not shard_dir(log).exists()
    after_kill = _runs(log)
    assert {status for *_, status, _ in after_kill} <= {"finished", "interrupted"}, after_kill
    assert all(cause == "harness" for *_, status, cause in after_kill if status == "interrupted"), after_kill

    Path(slow.removeprefix("plan:")).write_text("steps:\n  - answer: done\n")  # the resume need not wait again
    # resumed in this process: what a killed worker left is settled and merged while the suite is planned, the
    # same for every executor (tests/harness/executor_contract.py), and two more workers would cost ~6 CPU-seconds
    again = api.record(
        log,
        api.run_specs([TASK], variations=range(4), agents=["gold", slow]),
        api.RecordConfig(concurrency=4, resume=True),
    )
    # a run whose answer the kill cut off may have finished in the shard all the same: done, not redone
    assert again.skipped >= 8 - lost and again.skipped + len(again.runs) == 8, again
    runs = _runs(log)
    finished = Counter(variation for _, variation, status, _ in runs if status == "finished")
    assert finished == dict.fromkeys(range(4), 2), why_not_finished(log)
    assert len({run_id for run_id, *_ in runs}) == len(runs)


def wait_until_running(
    log: Path, agent: str, seconds: float = 600, alive: Callable[[], bool] = lambda: True
) -> int | None:
    """The index of the first worker whose shard shows a run of ``agent`` running (None: none in ``seconds``,
    or the recording is no longer ``alive``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and alive():
        for index, shard in enumerate(shard_paths(log)):
            try:
                with LogReader(shard) as reader:
                    _, [(running,)] = reader.query(
                        "SELECT count(*) FROM runs WHERE status = 'running' AND agent = ?", [agent]
                    )
            except Exception:  # not opened yet, or its live endpoint not up yet
                continue
            if running:
                return index
        time.sleep(0.2)
    return None


def test_a_stop_request_interrupts_the_runs_in_flight_and_merges(tmp_path):
    log = tmp_path / "stopped.duckdb"
    stop = StopRequest()
    slow = slow_agent(tmp_path)

    def stop_once_a_slow_run_is_in_flight() -> None:
        if wait_until_running(log, slow, alive=lambda: not ended.is_set()) is not None:
            stop.request(int(signal.SIGTERM))

    ended = threading.Event()
    watcher = threading.Thread(target=stop_once_a_slow_run_is_in_flight, daemon=True)
    watcher.start()
    try:
        result = api.record(
            log,
            api.run_specs([TASK], variations=range(4), agents=["gold", slow]),
            api.RecordConfig(execution=api.Execution(workers=2), concurrency=4),
            stop=stop,
        )
    finally:
        ended.set()
    watcher.join(60)
    assert result.stopped is stop and stop.exit_code == 143, result
    assert not shard_dir(log).exists()
    runs = _runs(log)
    statuses = Counter(status for *_, status, _ in runs)
    assert set(statuses) <= {"finished", "interrupted"} and statuses["finished"] < 8, runs
    assert statuses["interrupted"] >= 1, runs  # the slow run was in flight when the stop came
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT count(*) FROM runs WHERE status = 'interrupted' AND cause = 'signal' AND error LIKE '%SIGTERM%'"
        )
    assert rows[0][0] == statuses["interrupted"]


def test_a_terminals_ctrl_c_stops_the_driver_and_the_workers_store_their_runs_interrupted(tmp_path):
    log = tmp_path / "ctrl-c.duckdb"
    slow = slow_agent(tmp_path)  # the signal comes while one of its runs is in flight
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
        "0-3",
        "--agent",
        "gold",
        "--agent",
        slow,
        "--workers",
        "2",
        "--concurrency",
        "2",
    ]
    # its own process group, as a terminal's foreground job: Ctrl-C is SIGINT to the whole group
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    found = wait_until_running(log, slow, alive=lambda: proc.poll() is None)
    assert proc.poll() is None and found is not None, proc.stdout.read().decode()[-3000:]
    os.killpg(proc.pid, signal.SIGINT)
    output = proc.communicate(timeout=300)[0].decode()
    assert proc.returncode == 130, output[-3000:]
    assert "Traceback" not in output and "stopped by SIGINT" in output, output[-3000:]
    assert not shard_dir(log).exists(), output[-3000:]
    runs = _runs(log)
    statuses = Counter(status for *_, status, _ in runs)
    assert set(statuses) <= {"finished", "interrupted"} and statuses["finished"] < 8, runs
    # no worker died of the Ctrl-C: each run in flight was stopped by the driver, with the signal as cause
    assert statuses["interrupted"] >= 1 and all(cause == "signal" for *_, s, cause in runs if s == "interrupted"), runs


def test_a_shard_recorder_keeps_fsync_and_records_one_run(tmp_path, monkeypatch):
    # A spy, not a fake: power loss cannot be staged, so count the fsyncs the shard's journal asks for.
    calls: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(journal_module.os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd))[1])
    job = ShardJob(
        config=RecordConfig(stack=StackConfig(fsync=True)),
        work=Worklist(
            planned=1, todo=[], skipped=0, marked=0, agents=("gold",), rendered={(TASK, 0): render_task(TASK, 0)}
        ),
    )
    recorder = ShardRecorder(str(tmp_path / "worker-0.duckdb"), job)
    try:
        assert recorder.run(RunSpec(run_id="r0", task_id=TASK, variation=0, agent="gold", repeat=0)) == "finished"
    finally:
        assert recorder.close()
    assert len(calls) >= 3


def test_the_default_is_one_process_and_the_environment_asks_for_workers(tmp_path, monkeypatch):
    monkeypatch.delenv("FAE_RECORD_WORKERS", raising=False)
    assert default_workers(100 * RUNS_PER_WORKER, concurrency=8) == 1
    monkeypatch.setenv("FAE_RECORD_WORKERS", "4")
    assert default_workers(100 * RUNS_PER_WORKER, concurrency=8) == 4
    assert default_workers(RUNS_PER_WORKER + 1, concurrency=8) == 2  # a worker per RUNS_PER_WORKER runs at most
    assert default_workers(100 * RUNS_PER_WORKER, concurrency=1) == 1  # one run at a time needs no second stack
    specs = api.run_specs([TASK], variations=range(4 * RUNS_PER_WORKER))
    log = tmp_path / "x.duckdb"
    config = RecordConfig(concurrency=8, resume=True)
    plan, _ = prepare_recording(log, specs, config)
    assert choose_workers(plan, config) == 4
    external = RecordConfig(stack=StackConfig(fhir_url="http://127.0.0.1:9/fhir"), concurrency=8)
    assert choose_workers(plan, external) == 1
    with pytest.raises(FaeError, match="embedded FHIR server only"):
        RecordConfig(stack=StackConfig(fhir_url="http://127.0.0.1:9/fhir"), execution=Execution(workers=2))
    monkeypatch.setenv("FAE_RECORD_WORKERS", "zero")
    with pytest.raises(FaeError, match="FAE_RECORD_WORKERS"):
        default_workers(10, concurrency=8)
    assert not log.exists()


def test_one_worker_records_in_this_process_as_before(tmp_path):
    log = tmp_path / "one.duckdb"
    holders: list[int] = []

    def who_holds(spec, status):
        holders.append(json.loads(live_file(log).read_text())["pid"])
        assert not shard_dir(log).exists()

    result = api.record(
        log,
        api.run_specs([TASK], variations=range(2)),
        api.RecordConfig(execution=api.Execution(workers=1)),
        on_progress=who_holds,
    )
    assert result.statuses == {"finished": 2} and holders == [os.getpid()] * 2
