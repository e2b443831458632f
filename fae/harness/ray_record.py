"""``fae record --ray``: a suite's runs on Ray actors, each owning a full stack and its own log shard.

Each actor opens the stack a local recording opens (fae/harness/stack.py: FHIR server, MCP servers, proxy,
a writer with its journal) on its own shard, ``LOG.shards/actor-K.duckdb``, and records one run per method
call with the local path's ``execute_run``. The driver submits the runs in suite order as actor method calls,
at most ``concurrency`` in flight per actor, and collects them with ``ray.wait``. At the end every shard is
merged into LOG (fae/store/merge.py) and the shard directory is removed.

A shard left by a killed actor or driver is settled first (its journal moved in, its unfinished runs marked
interrupted) and merged, before the runs still to do are read from LOG; so ``--resume`` sees every attempt.
"""

from __future__ import annotations

import shutil
import signal
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import start_blocking_portal

from fae.agents.base import Agent
from fae.agents.prefixes import build_agent
from fae.errors import LogInUse, RecordError
from fae.harness.interrupt import StopRequest
from fae.harness.run import Paraphrase, RunSpec, execute_run
from fae.harness.stack import open_stack
from fae.harness.suite_runner import (
    SuiteResult,
    attempts,
    check_servers,
    mark_interrupted,
    render_task,
    runs_to_do,
)
from fae.recorder.redact import Redactor
from fae.store.log import EventLog
from fae.store.merge import merge_logs
from fae.store.writer import open_writer
from fae.tasks.scenarios import add_scenario_dir, scenario_dirs
from fae.tasks.sources import add_task_dir, task_dirs
from fae.util.ray_cluster import cluster_cpus, import_ray, ray_connection, short_error

WAIT_S = 0.25
"""How long the driver waits on the runs in flight before it looks at the stop request again."""


def shard_dir(log_path: str | Path) -> Path:
    """Where the actors' shards of ``log_path`` live (shared storage on a real cluster)."""
    path = Path(log_path)
    return path.with_name(path.name + ".shards")


class ShardRecorder:
    """A Ray actor's recording: one stack on its own shard log, running the runs handed to it."""

    def __init__(self, shard: str, stack_options: dict[str, Any], agents: dict[str, Agent],
                 rendered: dict[tuple[str, int], Any], run_options: dict[str, Any],
                 folders: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
        for folder in folders[0]:
            add_task_dir(folder)
        for folder in folders[1]:
            add_scenario_dir(folder)
        self._agents, self._rendered, self._run_options = agents, rendered, run_options
        stack_options = dict(stack_options)
        stack_options["redactor"] = Redactor(**stack_options.pop("redaction"))
        self._in_flight: dict[str, anyio.CancelScope] = {}
        self._stop = StopRequest()
        self._exit = ExitStack()
        try:
            self._portal = self._exit.enter_context(start_blocking_portal())
            self._stack = self._exit.enter_context(
                self._portal.wrap_async_context_manager(open_stack(shard, **stack_options)))
            self._portal.call(self._stop.bind)
        except BaseException:
            self._exit.close()
            raise

    def ready(self) -> bool:
        return True

    def run(self, spec: RunSpec) -> str | None:
        """Record one run; its status, or None when a stop came before it started."""
        return self._portal.call(self._one, spec)

    async def _one(self, spec: RunSpec) -> str | None:
        if self._stop.requested:
            return None  # never started: the next --resume records it
        with anyio.CancelScope() as scope:
            self._in_flight[spec.run_id] = scope
            try:
                status = await execute_run(self._stack, spec, self._rendered[(spec.task_id, spec.variation)],
                                           self._agents[spec.agent], stop=self._stop, **self._run_options)
            finally:
                del self._in_flight[spec.run_id]
        return "interrupted" if scope.cancelled_caught else status

    def stop(self, signum: int) -> None:
        """Start no run, and cancel those in flight (each is stored interrupted with the signal as reason)."""
        self._portal.call(self._cancel, signum)

    def _cancel(self, signum: int) -> None:
        self._stop.request(signum)
        for scope in list(self._in_flight.values()):
            scope.cancel()

    def close(self) -> bool:
        """Flush the shard and stop the stack; whether every write reached the shard."""
        healthy = self._stack.writer.healthy
        self._exit.close()
        return healthy


async def _settle(path: Path) -> int:
    with EventLog(path) as log:  # moves a journal left by a killed actor in
        async with open_writer(log) as writer:
            return await mark_interrupted(log, writer)


SHARD_RELEASE_S = 180.0
"""How long a shard may stay held by an actor of a killed driver (Ray stops an actor whose owner died within
seconds to a minute) before --resume gives up on it."""


def _settle_when_free(shard: Path) -> int:
    """Settle a shard once no process holds it: an actor of a SIGKILLed driver can outlive it for a while."""
    deadline = time.monotonic() + SHARD_RELEASE_S
    while True:
        try:
            return anyio.run(_settle, shard)
        except LogInUse:
            if time.monotonic() > deadline:
                raise RecordError(f"shard {shard} is still held by another process after {SHARD_RELEASE_S:g} s "
                                  "(an actor of an earlier recording that was killed?): stop it (`ray list actors`, "
                                  "`ray stop` on its node), then --resume again") from None
            time.sleep(0.5)


def merge_shards(log_path: str | Path) -> int:
    """Settle every shard of ``log_path``, merge them into it and remove them; returns the runs marked interrupted."""
    folder = shard_dir(log_path)
    shards = sorted(folder.glob("actor-*.duckdb"))
    marked = sum(_settle_when_free(shard) for shard in shards)
    if shards:
        merge_logs(shards, log_path)
    if folder.exists():
        shutil.rmtree(folder)
    return marked


def _planned_attempts(log_path: Path) -> dict[tuple, list[tuple[str, str, str | None]]]:
    if not log_path.exists():
        return {}
    with EventLog(log_path) as log:
        return attempts(log)


def record_on_ray(log_path: str | Path, specs: Sequence[RunSpec], *, address: str, actors: int | None = None,
                  resume: bool = False, concurrency: int = 4, fhir_url: str | None = None,
                  stack_options: Mapping[str, Any] | None = None, memory_stores: Mapping[str, Path] | None = None,
                  llm_options: Mapping[str, Any] | None = None, paraphrase: Paraphrase | None = None,
                  stop: StopRequest | None = None, retry_errored: bool = False, settle_s: float | None = None,
                  on_progress: Callable[[RunSpec, str], None] | None = None) -> SuiteResult:
    """Record every planned run not already done on Ray actors, then merge their shards into ``log_path``."""
    if fhir_url:
        raise RecordError("--ray records on the embedded FHIR server only: an external server is one shared "
                          "store, so its runs go one at a time (record without --ray)")
    import_ray("fae record --ray")  # before anything is planned or written
    if actors is not None and actors < 1:
        raise RecordError(f"--ray-actors must be at least 1, not {actors}")
    log_path = Path(log_path).resolve()
    agents: dict[str, Agent] = {spec.agent: build_agent(spec.agent, **(llm_options or {})) for spec in specs}
    check_servers(agents, memory_stores or {})
    rendered = {(s.task_id, s.variation): None for s in specs}
    for key in rendered:
        rendered[key] = render_task(*key)
    marked = merge_shards(log_path)  # what a killed driver or actor left is in LOG before anything is planned
    todo, skipped = runs_to_do(specs, _planned_attempts(log_path), resume=resume, retry_errored=retry_errored)
    result = SuiteResult(planned=len(specs), skipped=skipped, statuses=Counter(), interrupted_marked=marked,
                         runs=[])
    if not todo:
        EventLog(log_path).close()  # an empty suite still leaves a log, as a local recording does
        return result
    with ray_connection(address, "fae record --ray") as ray:
        count = min(actors or cluster_cpus(ray), len(todo))
        folder = shard_dir(log_path)
        folder.mkdir(parents=True, exist_ok=True)
        options = {**(stack_options or {}), "memory_stores": dict(memory_stores or {})}
        redactor = options.pop("redactor", None) or Redactor()
        # each actor learns its own secret values; a redactor's set of them holds a lock, which does not travel
        options["redaction"] = {"headers": redactor.headers, "query_params": redactor.query_params,
                                "extra_values": redactor.extra_values}
        run_options = {"paraphrase": paraphrase, "settle_s": settle_s}
        folders = (tuple(str(d) for d in task_dirs()), tuple(str(d) for d in scenario_dirs()))
        actor_class = ray.remote(num_cpus=1, max_concurrency=concurrency,
                                 concurrency_groups={"control": 2})(ShardRecorder)
        handles = [actor_class.remote(str(folder / f"actor-{k}.duckdb"), options, agents, rendered, run_options,
                                      folders) for k in range(count)]
        try:
            try:
                ray.get([handle.ready.remote() for handle in handles])
            except ray.exceptions.RayError as exc:
                raise RecordError(f"a recording actor could not start: {short_error(exc)}") from None
            try:
                _drive(ray, handles, todo, concurrency, stop, on_progress, result)
            except BaseException:
                for handle in handles:  # the runs still in flight are stored interrupted before the stacks close
                    handle.stop.options(concurrency_group="control").remote(int(signal.SIGTERM))
                raise
        finally:
            healthy = _close(ray, handles)
            result.interrupted_marked += merge_shards(log_path)
        if not healthy:
            raise RecordError("a shard could not be written; the runs it lost are marked by the next --resume")
    result.stopped = stop if stop is not None and stop.requested else None
    return result


def _drive(ray: Any, handles: list[Any], todo: list[RunSpec], slots: int, stop: StopRequest | None,
           on_progress: Callable[[RunSpec, str], None] | None, result: SuiteResult) -> None:
    """Hand the runs out in order, at most ``slots`` per live actor, until all are back or a stop comes."""
    queue = deque(todo)
    load = dict.fromkeys(range(len(handles)), 0)
    calls: dict[Any, tuple[int, RunSpec]] = {}
    stopping = False
    while calls or (queue and load and not stopping):
        if stop is not None and stop.requested and not stopping:
            stopping = True
            for index in load:
                handles[index].stop.options(concurrency_group="control").remote(stop.signum)
        while queue and not stopping and load and min(load.values()) < slots:
            index = min(load, key=lambda k: (load[k], k))
            spec = queue.popleft()
            calls[handles[index].run.remote(spec)] = (index, spec)
            load[index] += 1
        if not calls:
            break
        done, _ = ray.wait(list(calls), num_returns=1, timeout=WAIT_S)
        for ref in done:
            index, spec = calls.pop(ref)
            if index in load:
                load[index] -= 1
            try:
                status = ray.get(ref)
            except ray.exceptions.RayActorError:
                load.pop(index, None)  # its unfinished runs are marked interrupted when its shard is merged
                status = "lost with its actor"
            except ray.exceptions.RayTaskError as exc:
                raise RecordError(f"run {spec.run_id}: {short_error(exc)}") from None
            if status is None:
                continue
            if status != "lost with its actor":
                result.statuses[status] += 1
            result.runs.append((spec.run_id, status))
            if on_progress:
                on_progress(spec, status)
    if queue and not load and not stopping:
        raise RecordError(f"every recording actor died; {len(queue)} runs were not started (--resume records them)")


def _close(ray: Any, handles: list[Any]) -> bool:
    """Close every live actor's stack (so its shard is flushed and unlocked), then end the actors."""
    healthy = True
    for handle in handles:
        try:
            healthy = ray.get(handle.close.options(concurrency_group="control").remote()) and healthy
        except ray.exceptions.RayError:
            pass  # a dead actor: its journal is moved in when its shard is settled
        ray.kill(handle, no_restart=True)
    return healthy
