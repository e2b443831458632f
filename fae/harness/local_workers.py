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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_any
from pathlib import Path

from fae.agents.base import Agent
from fae.errors import RecordError
from fae.harness.config import RecordConfig
from fae.harness.interrupt import StopRequest
from fae.harness.run import RunSpec
from fae.harness.shard_driver import LOST, record_on_pool, shard_job
from fae.harness.shards import ShardJob, shard_dir
from fae.harness.worklist import SuiteResult, Worklist

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
    work: Worklist,
    config: RecordConfig,
    *,
    workers: int,
    stop: StopRequest | None = None,
    on_progress: Callable[[RunSpec, str], None] | None = None,
    on_start: Callable[[WorkerPool], None] | None = None,
) -> SuiteResult:
    """Record the worklist's runs in ``workers`` processes, then merge their shards into the log.

    ``on_start`` is called with the pool once every worker is serving (tests find the workers' pids there).
    """
    log_path = Path(log_path).resolve()
    job = shard_job(log_path, work, config)
    if job is None:
        return work.result()
    count = max(1, min(workers, len(work.todo)))
    return record_on_pool(
        log_path,
        WorkerPool(count, shard_dir(log_path), job, on_start),
        work.todo,
        math.ceil(config.concurrency / count),
        stop,
        on_progress,
        work.result(),
    )


@dataclass(frozen=True)
class LocalWorkers:
    """The worker-process executor: ``count`` local processes, each with its own stack and log shard."""

    count: int
    on_start: Callable[[WorkerPool], None] | None = None

    def record(
        self,
        log_path: Path,
        work: Worklist,
        agents: Mapping[str, Agent],
        config: RecordConfig,
        stop: StopRequest | None,
        on_progress: Callable[[RunSpec, str], None] | None,
    ) -> SuiteResult:
        return record_on_workers(
            log_path, work, config, workers=self.count, stop=stop, on_progress=on_progress, on_start=self.on_start
        )


def choose_workers(work: Worklist, config: RecordConfig) -> int:
    """How many worker processes record the suite: ``config.execution.workers`` as asked, else
    ``default_workers`` for the runs still to do (a suite too small to pay for a second worker records here)."""
    if config.stack.fhir_url:
        return 1  # one shared store (RecordConfig refuses more workers for it)
    if config.execution.workers is not None:
        return config.execution.workers
    return default_workers(len(work.todo), config.concurrency)
