"""A recording cut into log shards: one full stack per shard, each shard merged into the log at the end.

Both sharded recordings use this: ``fae record --workers N`` (local worker processes,
``fae.harness.local_workers``) and ``fae record --ray`` (Ray actors, ``fae.harness.ray_record``).
A ``ShardRecorder`` opens the stack a local recording opens (fae/harness/stack.py) on its own shard,
``LOG.shards/NAME.duckdb``, and records the runs handed to it with the local path's ``execute_run``.
A shard left by a killed worker or driver is settled (its journal moved in, its unfinished runs marked
interrupted) and merged before anything is planned, so ``--resume`` sees every attempt.
"""

from __future__ import annotations

import re
import shutil
import time
from concurrent.futures import Future
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
from anyio.from_thread import start_blocking_portal

from fae.agents.base import declared_upstreams
from fae.errors import LogInUse, RecordError
from fae.harness.config import RecordConfig
from fae.harness.in_flight import RunSlots
from fae.harness.interrupt import StopRequest
from fae.harness.paraphrases import Paraphrases
from fae.harness.run import RunSpec
from fae.harness.stack import open_stack
from fae.harness.worklist import Worklist, build_agents, mark_interrupted
from fae.store.log import EventLog
from fae.store.merge import merge_logs
from fae.store.writer import open_writer
from fae.tasks.scenarios import add_scenario_dir
from fae.tasks.sources import add_task_dir


def shard_dir(log_path: str | Path) -> Path:
    """Where the shards of ``log_path`` live while it is recorded (shared storage on a real cluster)."""
    path = Path(log_path)
    return path.with_name(path.name + ".shards")


SHARD_NAME = re.compile(r"(worker|actor)-[0-9]{1,6}\.duckdb")
"""The names fae gives shards (``worker-K.duckdb``, ``actor-K.duckdb``): nothing else in the folder is one."""


def shard_paths(log_path: str | Path) -> list[Path]:
    """The shards of ``log_path`` there are now, in name order: files fae named, never a link."""
    return sorted(
        path
        for path in shard_dir(log_path).glob("*.duckdb")
        if SHARD_NAME.fullmatch(path.name) and not path.is_symlink()
    )


async def _settle(path: Path) -> int:
    with EventLog(path) as log:  # moves a journal left by a killed worker in
        async with open_writer(log) as writer:
            return await mark_interrupted(log, writer)


SHARD_RELEASE_S = 180.0
"""How long a shard may stay held by a recorder of a killed driver (Ray stops an actor whose owner died within
seconds to a minute) before --resume gives up on it."""


def _settle_when_free(shard: Path) -> int:
    """Settle a shard once no process holds it: an actor of a SIGKILLed driver can outlive it for a while."""
    deadline = time.monotonic() + SHARD_RELEASE_S
    while True:
        try:
            return anyio.run(_settle, shard)
        except LogInUse:
            if time.monotonic() > deadline:
                raise RecordError(
                    f"shard {shard} is still held by another process after {SHARD_RELEASE_S:g} s "
                    "(a recorder of an earlier recording that was killed?): stop it (for Ray: "
                    "`ray list actors`, `ray stop` on its node), then --resume again"
                ) from None
            time.sleep(0.5)


def merge_shards(log_path: str | Path) -> int:
    """Settle every shard of ``log_path``, merge them into it and remove them; returns the runs marked interrupted."""
    folder = shard_dir(log_path)
    shards = shard_paths(log_path)
    marked = sum(_settle_when_free(shard) for shard in shards)
    if shards:
        merge_logs(shards, log_path)
    if folder.exists():
        shutil.rmtree(folder)
    return marked


@dataclass
class ShardJob:
    """Everything a shard's recorder needs, sent to it once: it must pickle (no locks, no open handles)."""

    config: RecordConfig
    work: Worklist
    """The worklist without its runs (they are handed out one by one)."""
    paraphrases: Paraphrases | None = None
    task_dirs: tuple[str, ...] = ()
    scenario_dirs: tuple[str, ...] = ()


class ShardRecorder:
    """One stack on its own shard log, recording the runs handed to it, several at once."""

    def __init__(self, shard: str, job: ShardJob) -> None:
        for folder in job.task_dirs:
            add_task_dir(folder)
        for folder in job.scenario_dirs:
            add_scenario_dir(folder)
        agents = build_agents(job.work.agents, job.config)
        stack_config = job.config.stack_config()
        stack_config = replace(stack_config, processes=stack_config.processes or 1)
        self._stop = StopRequest()
        self._exit = ExitStack()
        try:
            self._portal = self._exit.enter_context(start_blocking_portal())
            self._stack = self._exit.enter_context(
                self._portal.wrap_async_context_manager(
                    open_stack(shard, stack_config, agent_upstreams=declared_upstreams(agents.values()))
                )
            )
            self._portal.call(self._stop.bind)
        except BaseException:
            self._exit.close()
            raise
        self._slots = RunSlots(
            self._stack,
            job.work,
            agents,
            stop=self._stop,
            paraphrases=job.paraphrases,
            settle_s=job.config.settle_s,
        )

    def ready(self) -> bool:
        return True

    def run(self, spec: RunSpec) -> str | None:
        """Record one run; its status, or None when a stop came before it started."""
        return self._portal.call(self._slots.record, spec)

    def submit(self, spec: RunSpec) -> Future[str | None]:
        """Start recording one run and return at once; the future holds what ``run`` returns."""
        return self._portal.start_task_soon(self._slots.record, spec)

    def stop(self, signum: int) -> None:
        """Start no run, and cancel those in flight (each is stored interrupted with the signal as reason)."""
        self._portal.call(self._cancel, signum)

    def _cancel(self, signum: int) -> None:
        self._stop.request(signum)
        self._slots.cancel()

    def close(self) -> bool:
        """Flush the shard and stop the stack; whether every write reached the shard."""
        healthy = self._stack.writer.healthy
        self._exit.close()
        return healthy
