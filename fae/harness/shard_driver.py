"""The driver of a sharded recording: prepare as a local recording does, hand runs out in suite order, merge.

A pool of shard recorders (local worker processes, or Ray actors) is driven through ``ShardPool``:
runs go out in suite order to the least-loaded live recorder, at most ``slots`` in flight on each; the
first stop request stops every recorder (the runs in flight are stored interrupted with the signal);
a recorder that dies loses only its runs in flight, which its shard shows as interrupted once merged.
"""

from __future__ import annotations

import signal
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from fae.errors import RecordError
from fae.harness.config import RecordConfig
from fae.harness.interrupt import StopRequest
from fae.harness.paraphrases import fix_paraphrases_first
from fae.harness.run import RunSpec
from fae.harness.shards import ShardJob, merge_shards, shard_dir
from fae.harness.worklist import SuiteResult, Worklist
from fae.store.log import EventLog
from fae.tasks.scenarios import scenario_dirs
from fae.tasks.sources import task_dirs

WAIT_S = 0.25
"""How long the driver waits on the runs in flight before it looks at the stop request again."""
LOST = "lost with its worker"
"""The outcome of a run whose recorder died with it in flight (its shard shows it interrupted, or not at all)."""


class ShardPool(Protocol):
    """Recorders the driver hands runs to, each on its own shard."""

    size: int

    def submit(self, index: int, spec: RunSpec) -> None: ...

    def stop(self, signum: int) -> None:
        """Every live recorder starts no run and cancels its runs in flight."""

    def wait(self, timeout: float) -> list[tuple[int, RunSpec, str | None]]:
        """Runs that came back: (recorder, spec, status, None if never started, or ``LOST``)."""
        ...

    def close(self) -> bool:
        """Close every live recorder's stack (flushing its shard); whether every write reached its shard."""
        ...


def shard_job(log_path: Path, work: Worklist, config: RecordConfig) -> ShardJob | None:
    """What every recorder of a sharded recording is handed, with the shard folder made; None when no run is left.
    LOG is made either way (an empty suite leaves one, as a local recording does; `fae runs` reads it beside the
    shards), and the paraphrases are fixed in it first, so workers on one variation never ask twice."""
    EventLog(log_path).close()
    if not work.todo:
        return None
    shard_dir(log_path).mkdir(parents=True, exist_ok=True)
    paraphrases = (
        fix_paraphrases_first(log_path, work.to_paraphrase(), config.paraphrase, config.stack_config())
        if config.paraphrase is not None and work.todo
        else None
    )
    return ShardJob(
        config=config,
        work=replace(work, todo=[]),
        paraphrases=paraphrases,
        task_dirs=tuple(str(d) for d in task_dirs()),
        scenario_dirs=tuple(str(d) for d in scenario_dirs()),
    )


def record_on_pool(
    log_path: Path,
    pool: AbstractContextManager[ShardPool],
    todo: list[RunSpec],
    slots: int,
    stop: StopRequest | None,
    on_progress: Callable[[RunSpec, str], None] | None,
    result: SuiteResult,
) -> SuiteResult:
    """Drive the pool through ``todo``, close its recorders and merge their shards into ``log_path``. A stop that
    came before the pool started starts no recorder: none of the runs would start anyway."""
    if stop is not None and stop.requested:
        result.stopped = stop
        merge_shards(log_path)  # nothing was recorded: this only removes the empty shard folder
        return result
    with pool as started:
        try:
            try:
                drive(started, todo, slots, stop, on_progress, result)
            except BaseException:
                started.stop(int(signal.SIGTERM))  # the runs in flight are stored interrupted before the stacks close
                raise
        finally:
            healthy = started.close()
            result.interrupted_marked += merge_shards(log_path)
    if not healthy:
        raise RecordError("a shard could not be written; the runs it lost are marked by the next --resume")
    result.stopped = stop if stop is not None and stop.requested else None
    return result


def drive(
    pool: ShardPool,
    todo: list[RunSpec],
    slots: int,
    stop: StopRequest | None,
    on_progress: Callable[[RunSpec, str], None] | None,
    result: SuiteResult,
) -> None:
    """Hand the runs out in order, at most ``slots`` per live recorder, until all are back or a stop comes."""
    queue = deque(todo)
    load = dict.fromkeys(range(pool.size), 0)
    in_flight = 0
    stopping = False
    while in_flight or (queue and load and not stopping):
        if stop is not None and stop.requested and not stopping:
            stopping = True
            pool.stop(stop.signum or int(signal.SIGTERM))
        while queue and not stopping and load and min(load.values()) < slots:
            index = min(load, key=lambda k: (load[k], k))
            pool.submit(index, queue.popleft())
            load[index] += 1
            in_flight += 1
        if not in_flight:
            break
        for index, spec, status in pool.wait(WAIT_S):
            in_flight -= 1
            if index in load:
                load[index] -= 1
            if status == LOST:
                load.pop(index, None)  # its unfinished runs are marked interrupted when its shard is merged
            if status is None:
                continue
            if status != LOST:
                result.statuses[status] += 1
            result.runs.append((spec.run_id, status))
            if on_progress:
                on_progress(spec, status)
    if queue and not load and not stopping:
        raise RecordError(f"every recorder died; {len(queue)} runs were not started (--resume records them)")
