"""``fae record --ray``: a suite's runs on Ray actors, each owning a full stack and its own log shard.

Each actor is a ``ShardRecorder`` (fae/harness/shards.py): the stack a local recording opens, on its own
shard ``LOG.shards/actor-K.duckdb``, recording one run per method call. The driver
(fae/harness/shard_driver.py, shared with ``--workers``) submits the runs in suite order as actor method
calls, at most ``concurrency`` in flight per actor, collected with ``ray.wait``; at the end every shard is
merged into LOG and the shard directory is removed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fae.agents.base import Agent
from fae.errors import RecordError
from fae.harness.config import RecordConfig
from fae.harness.interrupt import StopRequest
from fae.harness.run import RunSpec
from fae.harness.shard_driver import LOST, record_on_pool, shard_job
from fae.harness.shards import ShardJob, ShardRecorder, shard_dir
from fae.harness.worklist import SuiteResult, Worklist
from fae.util.ray_cluster import cluster_cpus, import_ray, ray_connection, short_error

__all__ = ["RayActors", "shard_dir"]


START_ENV = "FAE_RAY_ACTOR_START_S"
"""Seconds the driver waits for every actor to start (Ray itself would wait forever for a free CPU)."""


def actor_start_s() -> float:
    """How long to wait for the actors to start: ``FAE_RAY_ACTOR_START_S``, or 300 s."""
    raw = os.environ.get(START_ENV, "300")
    try:
        seconds = float(raw)
    except ValueError:
        raise RecordError(f"{START_ENV} must be a number of seconds, not {raw!r}") from None
    if not seconds > 0:
        raise RecordError(f"{START_ENV} must be a positive number of seconds, not {raw!r}")
    return seconds


class _ActorPool:
    """Ray actors as the driver's recorders: a run is a method call, a dead actor a ``RayActorError``."""

    def __init__(self, ray: Any, size: int, folder: Path, job: ShardJob, concurrency: int) -> None:
        self.size = size
        self._ray = ray
        actor_class = ray.remote(num_cpus=1, max_concurrency=concurrency, concurrency_groups={"control": 2})(
            ShardRecorder
        )
        self._handles = [actor_class.remote(str(folder / f"actor-{k}.duckdb"), job) for k in range(size)]
        self._live = set(range(size))
        self._calls: dict[Any, tuple[int, RunSpec]] = {}
        self._started = set(range(size))  # until the start says otherwise; an unstarted actor cannot be closed

    def __enter__(self) -> _ActorPool:
        waiting = [handle.ready.remote() for handle in self._handles]
        try:
            ready, pending = self._ray.wait(waiting, num_returns=len(waiting), timeout=actor_start_s())
            self._started = {index for index, ref in enumerate(waiting) if ref in ready}
            self._ray.get(ready)
        except self._ray.exceptions.RayError as exc:
            self.close()
            raise RecordError(f"a recording actor could not start: {short_error(exc)}") from None
        if pending:
            free = self._ray.available_resources().get("CPU", 0)
            total = self._ray.cluster_resources().get("CPU", 0)
            self.close()
            raise RecordError(
                f"{len(pending)} of {self.size} recording actors did not start within "
                f"{actor_start_s():g} s (each needs 1 CPU; the cluster has {free:g} of {total:g} "
                f"CPUs free); nothing was recorded. Free CPUs, pass a smaller --ray-actors, or wait "
                f"longer with {START_ENV}=SECONDS"
            )
        return self

    def __exit__(self, *exc: object) -> None:
        pass  # the driver closes the pool before it merges

    def submit(self, index: int, spec: RunSpec) -> None:
        self._calls[self._handles[index].run.remote(spec)] = (index, spec)

    def stop(self, signum: int) -> None:
        for index in self._live:
            self._handles[index].stop.options(concurrency_group="control").remote(signum)

    def wait(self, timeout: float) -> list[tuple[int, RunSpec, str | None]]:
        done, _ = self._ray.wait(list(self._calls), num_returns=1, timeout=timeout)
        back: list[tuple[int, RunSpec, str | None]] = []
        for ref in done:
            index, spec = self._calls.pop(ref)
            try:
                back.append((index, spec, self._ray.get(ref)))
            except self._ray.exceptions.RayActorError:
                self._live.discard(index)
                back.append((index, spec, LOST))
            except self._ray.exceptions.RayTaskError as exc:
                raise RecordError(f"run {spec.run_id}: {short_error(exc)}") from None
        return back

    def close(self) -> bool:
        """Close every live actor's stack (so its shard is flushed and unlocked), then end the actors."""
        healthy = True
        for index, handle in enumerate(self._handles):
            if index not in self._started:  # still waiting for a CPU: a close call would wait with it
                self._ray.kill(handle, no_restart=True)
                continue
            try:
                healthy = self._ray.get(handle.close.options(concurrency_group="control").remote()) and healthy
            except self._ray.exceptions.RayError:
                pass  # a dead actor: its journal is moved in when its shard is settled
            self._ray.kill(handle, no_restart=True)
        return healthy


@dataclass(frozen=True)
class RayActors:
    """The Ray executor: the runs on actors of the cluster at ``address``, each with its own stack and log shard."""

    address: str
    actors: int | None = None

    def check(self) -> None:
        """Refuse a bad setting, or a missing Ray, before anything is planned or written."""
        actor_start_s()
        import_ray("fae record --ray")

    def record(
        self,
        log_path: Path,
        work: Worklist,
        agents: Mapping[str, Agent],
        config: RecordConfig,
        stop: StopRequest | None,
        on_progress: Callable[[RunSpec, str], None] | None,
    ) -> SuiteResult:
        """Record the worklist's runs on Ray actors, then merge their shards into ``log_path``."""
        self.check()
        log_path = Path(log_path).resolve()
        job = shard_job(log_path, work, config)
        if job is None:
            return work.result()
        with ray_connection(self.address, "fae record --ray") as ray:
            count = min(self.actors or cluster_cpus(ray), len(work.todo))
            return record_on_pool(
                log_path,
                _ActorPool(ray, count, shard_dir(log_path), job, config.concurrency),
                work.todo,
                config.concurrency,
                stop,
                on_progress,
                work.result(),
            )
