"""A suite of runs: plan them, resume an interrupted suite, run them with bounded concurrency."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from fae.agents.base import Agent, agent_slug, declared_upstreams
from fae.agents.prefixes import build_agent
from fae.errors import RecordError, TaskError
from fae.harness.interrupt import StopRequest
from fae.harness.paraphrases import Paraphrase, fix_paraphrases
from fae.harness.run import RunSpec, execute_run
from fae.harness.stack import Stack, open_stack
from fae.proxy.addon import DEFAULT_MAX_BODY_BYTES
from fae.recorder.redact import Redactor
from fae.store import events as ev
from fae.store.log import EventLog, RunUpdate
from fae.store.writer import LogWriter, Stamped
from fae.tasks.fixture import BUILTIN_TASK, render_builtin

AGENT_CAUSES = (None, "agent")
"""Causes of an errored run that are the agent's own (None: recorded before causes were)."""


PROCESSES_ENV = "FAE_RECORD_PROCESSES"


def default_processes() -> int:
    """How many processes a recording uses unless told: ``FAE_RECORD_PROCESSES``, else 2 (the faster)."""
    value = os.environ.get(PROCESSES_ENV, "2")
    if value not in ("1", "2"):
        raise RecordError(f"{PROCESSES_ENV}={value!r}: a recording runs in 1 or 2 processes")
    return int(value)


def is_done(status: str, cause: str | None, *, retry_errored: bool = False) -> bool:
    """Whether ``--resume`` keeps a run: finished, or errored on the agent's own upstream fault.

    An interrupted or failed run, or one the harness or stack ended, is recorded again;
    ``retry_errored`` records the agent's own errors again too.
    """
    if status == "finished":
        return True
    return status == "errored" and cause in AGENT_CAUSES and not retry_errored


def render_task(task_id: str, variation: int) -> Any:
    """A rendered variation of a task: the built-in fixture or one of the suite's tasks."""
    if task_id == BUILTIN_TASK:
        return render_builtin(variation)
    from fae.tasks.scenarios import is_scenario_task, render_scenario_task

    if is_scenario_task(task_id):
        return render_scenario_task(task_id, variation)
    try:
        from fae.tasks import load_suite
    except ImportError:
        raise TaskError(f"unknown task {task_id!r} (the task suite is not installed)") from None
    suite = load_suite()
    try:
        task = suite[task_id]
    except KeyError:
        raise TaskError(f"unknown task {task_id!r}; `fae tasks list` shows the tasks") from None
    return task.render(variation=variation)


def base_run_id(task_id: str, variation: int, agent: str, repeat: int) -> str:
    return f"{task_id}.v{variation}.{agent_slug(agent)}.r{repeat}"


def plan_suite(
    task_ids: Sequence[str], variations: Sequence[int], agents: Sequence[str], repeats: int, suite: str | None = None
) -> list[RunSpec]:
    """Every (task, variation, agent, repeat), in a stable order."""
    return [
        RunSpec(run_id=base_run_id(t, v, a, r), task_id=t, variation=v, agent=a, repeat=r, suite=suite)
        for t in task_ids
        for v in variations
        for a in agents
        for r in range(repeats)
    ]


@dataclass
class SuiteResult:
    planned: int
    skipped: int
    statuses: Counter
    interrupted_marked: int
    runs: list[tuple[str, str]]
    stopped: StopRequest | None = None
    """Set when a stop signal ended the suite early (its runs in flight are stored interrupted)."""


async def _mark_interrupted(stack: Stack) -> int:
    """Runs left 'running' by a process that died: we hold the lock now, so nobody is running them."""
    return await mark_interrupted(stack.log, stack.writer)


async def mark_interrupted(log: EventLog, writer: LogWriter) -> int:
    """Mark a log's runs left 'running' interrupted (the caller holds its lock, so none is running)."""
    _, rows = log.query("SELECT run_id FROM runs WHERE status = 'running'")
    now = datetime.now(UTC)
    for (run_id,) in rows:
        await writer.write(
            events=[
                Stamped(
                    run_id,
                    ev.RunFailed(status="interrupted", reason="the recording process stopped", cause="harness"),
                    actor="harness",
                    wall_time=now,
                )
            ],
            updates=[
                RunUpdate(
                    run_id=run_id,
                    status="interrupted",
                    ended_at=now,
                    error="the recording process stopped before this run ended",
                    cause="harness",
                )
            ],
        )
    return len(rows)


def attempts(log: EventLog) -> dict[tuple, list[tuple[str, str, str | None]]]:
    """Attempts so far of each spec: (experiment, phase, task, variation, agent, repeat)."""
    _, rows = log.query(
        "SELECT run_id, experiment, phase, task_id, variation, agent, repeat, status, cause"
        " FROM runs ORDER BY started_at, run_id"
    )
    found: dict[tuple, list[tuple[str, str, str | None]]] = {}
    for run_id, experiment, phase, task_id, variation, agent, repeat, status, cause in rows:
        found.setdefault((experiment, phase, task_id, variation, agent, repeat), []).append((run_id, status, cause))
    return found


def runs_to_do(
    specs: Sequence[RunSpec],
    previous_attempts: Mapping[tuple, list[tuple[str, str, str | None]]],
    *,
    resume: bool,
    retry_errored: bool = False,
) -> tuple[list[RunSpec], int]:
    """The specs still to record (a retry gets its own id, ``….aN``) and how many are already done."""
    todo: list[RunSpec] = []
    skipped = 0
    for spec in specs:
        previous = previous_attempts.get(
            (spec.experiment, spec.phase, spec.task_id, spec.variation, spec.agent, spec.repeat), []
        )
        if any(is_done(status, cause, retry_errored=retry_errored) for _, status, cause in previous):
            if not resume:
                raise RecordError(
                    f"the log already holds run {previous[0][0]}; use --resume to finish the suite, "
                    f"or record into a new log"
                )
            skipped += 1
            continue
        if previous and not resume:
            raise RecordError(f"the log already holds run {previous[0][0]} (unfinished); use --resume")
        run_id = spec.run_id if not previous else f"{spec.run_id}.a{len(previous) + 1}"
        todo.append(replace(spec, run_id=run_id))
    return todo, skipped


async def record_suite(
    log_path: str | Path,
    specs: Sequence[RunSpec],
    *,
    resume: bool = False,
    concurrency: int = 4,
    fhir_url: str | None = None,
    llm_url: str | None = None,
    llm_app: Any | None = None,
    redactor: Redactor | None = None,
    on_progress: Callable[[RunSpec, str], None] | None = None,
    memory_stores: Mapping[str, Path] | None = None,
    llm_options: Mapping[str, Any] | None = None,
    paraphrase: Paraphrase | None = None,
    audit_events: bool = False,
    stop: StopRequest | None = None,
    retry_errored: bool = False,
    fsync: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    settle_s: float | None = None,
    processes: int | None = None,
) -> SuiteResult:
    """Record every planned run not already done; returns what happened.

    ``paraphrase``: reword every prompt, one paraphrase per variation, fixed before the runs start
    (``fae.harness.paraphrases``). ``memory_stores`` names the Reflexion memory stores the memory agents use
    (``nospec``, ``spec``); ``llm_options`` (model, api_key, timeout_s,
    max_retries) go to LLM agents. ``audit_events``: the FHIR server keeps an AuditEvent
    trail (the embedded one is told to), and each run's trail is read into the log. ``settle_s``:
    the wait after the agent's last write before the read-back (default: ensure_record's).
    ``processes``: 2 serves the FHIR and MCP servers in a child process so the recording uses two
    cores; 1 keeps everything in this process (for debugging); None: ``default_processes()``.
    ``llm_app``: an OpenAI-compatible ASGI app the stack serves as its LLM instead of ``llm_url``
    (fae's scripted LLM server), reached, like the stack's other servers, only through the proxy.
    """
    processes = default_processes() if processes is None else processes
    # one agent per name, built once (building one looks up the installed agent plugins)
    agents: dict[str, Agent] = {
        name: build_agent(name, **(llm_options or {})) for name in dict.fromkeys(spec.agent for spec in specs)
    }
    check_servers(agents, memory_stores or {})
    rendered: dict[tuple[str, int], Any] = {}
    for spec in specs:
        key = (spec.task_id, spec.variation)
        if key not in rendered:
            rendered[key] = render_task(*key)
    statuses: Counter = Counter()
    runs: list[tuple[str, str]] = []
    async with open_stack(
        log_path,
        fhir_url=fhir_url,
        llm_url=llm_url,
        llm_app=llm_app,
        redactor=redactor,
        memory_stores=memory_stores,
        audit_events=audit_events,
        fsync=fsync,
        max_body_bytes=max_body_bytes,
        processes=processes,
        agent_upstreams=declared_upstreams(agents.values()),
    ) as stack:
        if stop is not None:
            stop.bind()
        marked = await _mark_interrupted(stack)
        todo, skipped = runs_to_do(specs, attempts(stack.log), resume=resume, retry_errored=retry_errored)
        # every variation's paraphrase is fixed before a run starts: runs that start together never ask twice
        book = (
            await fix_paraphrases(
                stack,
                {(s.task_id, s.variation): rendered[(s.task_id, s.variation)] for s in todo},
                paraphrase,
                concurrency=concurrency,
            )
            if paraphrase is not None and todo
            else None
        )
        # an external server is one shared store: its runs go one at a time
        limiter = anyio.CapacityLimiter(1 if fhir_url else max(1, concurrency))

        in_flight: dict[str, anyio.CancelScope] = {}

        async def one(spec: RunSpec) -> None:
            async with limiter:
                if stop is not None and stop.requested:
                    return  # never started: the next --resume records it
                status = "interrupted"  # what the run is when its scope is cancelled before execute_run returns
                with anyio.CancelScope() as scope:
                    in_flight[spec.run_id] = scope
                    try:
                        status = await execute_run(
                            stack,
                            spec,
                            rendered[(spec.task_id, spec.variation)],
                            agents[spec.agent],
                            paraphrase=book,
                            stop=stop,
                            settle_s=settle_s,
                        )
                    finally:
                        del in_flight[spec.run_id]
                if scope.cancelled_caught:
                    status = "interrupted"
            statuses[status] += 1
            runs.append((spec.run_id, status))
            if on_progress:
                on_progress(spec, status)

        async def interrupt_on_stop() -> None:
            await stop.wait()  # type: ignore[union-attr]
            for scope in list(in_flight.values()):
                scope.cancel()

        async with anyio.create_task_group() as watcher:
            if stop is not None:
                watcher.start_soon(interrupt_on_stop)
            async with anyio.create_task_group() as group:
                for spec in todo:
                    group.start_soon(one, spec)
            watcher.cancel_scope.cancel()
        if not stack.writer.healthy:
            raise RecordError("the log could not be written; the runs it lost are marked by the next --resume")
    return SuiteResult(
        planned=len(specs),
        skipped=skipped,
        statuses=statuses,
        interrupted_marked=marked,
        runs=runs,
        stopped=stop if stop is not None and stop.requested else None,
    )


def check_servers(agents: Mapping[str, Agent], memory_stores: Mapping[str, Path]) -> None:
    """Every extra MCP server an agent needs will be served (``specs`` always is), before anything starts."""
    served = {"specs", *(f"memory:{name}" for name in memory_stores)}
    for name, agent in agents.items():
        missing = [server for server in getattr(agent, "required_mcp", ()) if server not in served]
        if missing:
            stores = [server.removeprefix("memory:") for server in missing]
            raise RecordError(
                f"agent {name} needs the memory store(s) {', '.join(stores)}: give them as --memory {stores[0]}=DIR"
            )
