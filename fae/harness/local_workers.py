"""``fae record --workers N``: a suite's runs in N local worker processes, each with a full stack on its own shard.

Each worker (fae/harness/record_worker.py) opens the stack a local recording opens on
``LOG.shards/worker-K.duckdb``; the driver (fae/harness/shard_driver.py, shared with ``--ray``) plans the
runs as a local recording does, hands them out in suite order over each worker's pipe, and merges the shards
into LOG at the end. ``--concurrency`` stays the number of runs at once in all, shared among the workers.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_any
from pathlib import Path
from typing import Any

from fae.errors import RecordError
from fae.harness.interrupt import StopRequest
from fae.harness.paraphrases import Paraphrase
from fae.harness.run import RunSpec
from fae.harness.shard_driver import LOST, plan_shards, record_on_pool
from fae.harness.shards import ShardJob, merge_shards, planned_attempts, shard_dir
from fae.harness.suite_plan import runs_to_do
from fae.harness.suite_runner import SuiteResult
from fae.store.log import EventLog

WORKERS_ENV = "FAE_RECORD_WORKERS"
RUNS_PER_WORKER = 100
"""``FAE_RECORD_WORKERS`` starts at most one worker per this many runs: a worker costs ~3.2 CPU-s more (its start,
its share of the merge), a second core takes ~0.035 CPU-s of a gold run's 0.07 off the critical path (docs/scale.md)."""
CLOSE_TIMEOUT_S = 60
"""A worker flushes its shard and stops its stack when told to close; one that has not by then is killed."""


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_workers(runs: int, concurrency: int) -> int:
    """``FAE_RECORD_WORKERS`` (capped by the runs and ``concurrency``), else 1: measured on this project's
    loaded 2-core machine, two workers recorded the gold suite at 0.89x and 1.07x the runs/s of one process
    for 1.64x and 1.71x the CPU seconds (docs/scale.md), so a second stack is something to ask for, not a default."""
    value = os.environ.get(WORKERS_ENV)
    if value is None:
        return 1
    if not value.isdigit() or int(value) < 1:
        raise RecordError(f"{WORKERS_ENV}={value!r}: a recording runs in 1 or more worker processes")
    return max(1, min(int(value), concurrency, math.ceil(runs / RUNS_PER_WORKER)))


class WorkerPool:
    """Local worker processes as the driver's recorders; a dead worker is an end of file on its pipe."""

    def __init__(
        self, size: int, folder: Path, job: ShardJob, on_start: Callable[[WorkerPool], None] | None = None
    ) -> None:
        self.size = size
        self._on_start = on_start
        self._shards = [str(folder / f"worker-{k}.duckdb") for k in range(size)]
        self._job = job
        self._conns: dict[int, Connection] = {}
        self._processes: list[subprocess.Popen] = []
        self._in_flight: dict[int, dict[str, RunSpec]] = {k: {} for k in range(size)}

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self._processes]

    def __enter__(self) -> WorkerPool:
        root = str(Path(__file__).resolve().parent.parent.parent)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        try:
            for index, shard in enumerate(self._shards):
                ours, theirs = Pipe()
                # its own session: a terminal's Ctrl-C reaches the driver, which tells the worker to stop
                self._processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "fae.harness.record_worker", str(theirs.fileno()), str(os.getpid())],
                        pass_fds=[theirs.fileno()],
                        env=env,
                        start_new_session=True,
                        stdin=subprocess.DEVNULL,
                    )
                )
                theirs.close()
                ours.send((shard, self._job))
                self._conns[index] = ours
            for index, conn in list(self._conns.items()):
                try:
                    answer = conn.recv()
                except EOFError:
                    answer = ("failed", f"it exited with code {self._processes[index].wait()}; its error is above")
                if answer[0] != "ready":
                    raise RecordError(f"recording worker {index} could not start: {answer[1]}")
        except BaseException:
            self.__exit__()
            raise
        if self._on_start is not None:
            self._on_start(self)
        return self

    def __exit__(self, *exc: object) -> None:
        for process in self._processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        for conn in self._conns.values():
            conn.close()

    def _lost(self, index: int) -> list[tuple[int, RunSpec, str | None]]:
        self._conns.pop(index).close()
        return [(index, spec, LOST) for spec in self._in_flight.pop(index).values()]

    def submit(self, index: int, spec: RunSpec) -> None:
        self._in_flight[index][spec.run_id] = spec
        try:
            self._conns[index].send(("run", spec))
        except OSError:
            pass  # a dead worker: its end of file comes back from wait

    def stop(self, signum: int) -> None:
        for conn in self._conns.values():
            try:
                conn.send(("stop", signum))
            except OSError:
                pass

    def wait(self, timeout: float) -> list[tuple[int, RunSpec, str | None]]:
        back: list[tuple[int, RunSpec, str | None]] = []
        ready = wait_any(list(self._conns.values()), timeout)
        for index, conn in list(self._conns.items()):
            if conn not in ready:
                continue
            try:
                while conn.poll():
                    kind, run_id, outcome = conn.recv()
                    spec = self._in_flight[index].pop(run_id)
                    if kind == "error":
                        raise RecordError(f"run {run_id}: {outcome}")
                    back.append((index, spec, outcome))
            except (EOFError, OSError):
                back.extend(self._lost(index))
        return back

    def close(self) -> bool:
        """Tell every live worker to close its stack, and wait for each to say whether its shard is whole."""
        healthy = True
        for conn in self._conns.values():
            try:
                conn.send(("close",))
            except OSError:
                pass
        for conn in self._conns.values():
            try:
                while conn.poll(CLOSE_TIMEOUT_S):
                    answer = conn.recv()
                    if answer[0] == "closed":
                        healthy = answer[1] and healthy
                        break
            except (EOFError, OSError):
                pass  # a dead worker: its journal is moved in when its shard is settled
        for process in self._processes:
            try:
                process.wait(CLOSE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return healthy


def record_on_workers(
    log_path: str | Path,
    specs: Sequence[RunSpec],
    *,
    workers: int,
    resume: bool = False,
    concurrency: int = 4,
    stack_options: Mapping[str, Any] | None = None,
    memory_stores: Mapping[str, Path] | None = None,
    llm_options: Mapping[str, Any] | None = None,
    paraphrase: Paraphrase | None = None,
    stop: StopRequest | None = None,
    retry_errored: bool = False,
    settle_s: float | None = None,
    on_progress: Callable[[RunSpec, str], None] | None = None,
    on_start: Callable[[WorkerPool], None] | None = None,
) -> SuiteResult:
    """Record every planned run not already done in ``workers`` processes, then merge their shards into the log.

    ``on_start`` is called with the pool once every worker is serving (tests find the workers' pids there).
    """
    log_path = Path(log_path).resolve()
    todo, result, job = plan_shards(
        log_path,
        specs,
        resume=resume,
        retry_errored=retry_errored,
        stack_options=stack_options or {},
        memory_stores=memory_stores or {},
        llm_options=llm_options or {},
        paraphrase=paraphrase,
        settle_s=settle_s,
    )
    if not todo:
        return result
    count = max(1, min(workers, len(todo)))
    folder = shard_dir(log_path)
    folder.mkdir(parents=True, exist_ok=True)
    EventLog(log_path).close()  # LOG exists while its shards are recorded, for `fae runs` (which reads both)
    return record_on_pool(
        log_path,
        WorkerPool(count, folder, job, on_start),
        todo,
        math.ceil(concurrency / count),
        stop,
        on_progress,
        result,
    )


def choose_workers(
    log_path: str | Path,
    specs: Sequence[RunSpec],
    *,
    workers: int | None,
    concurrency: int,
    resume: bool,
    retry_errored: bool,
    fhir_url: str | None,
) -> int:
    """How many worker processes record the suite: ``workers`` as asked (checked), else ``default_workers``
    for the runs still to do (a suite too small to pay for a second worker records in this process)."""
    if workers is not None and workers < 1:
        raise RecordError(f"--workers must be at least 1, not {workers}")
    if fhir_url:
        if workers is not None and workers > 1:
            raise RecordError(
                "--workers records on the embedded FHIR server only: an external server is one "
                "shared store, so its runs go one at a time (record with --workers 1)"
            )
        return 1
    if workers is not None:
        return workers
    if default_workers(len(specs), concurrency) == 1:
        return 1  # even if every planned run were still to do
    log_path = Path(log_path)
    merge_shards(log_path)  # a killed sharded recording's runs count as attempts
    todo, _ = runs_to_do(specs, planned_attempts(log_path), resume=resume, retry_errored=retry_errored)
    return default_workers(len(todo), concurrency)
