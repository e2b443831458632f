"""A suite of runs: plan them, resume an interrupted suite, run them with bounded concurrency."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from fae.agents.base import Agent, declared_upstreams
from fae.agents.prefixes import build_agent
from fae.errors import RecordError
from fae.harness.interrupt import StopRequest
from fae.harness.paraphrases import Paraphrase, fix_paraphrases
from fae.harness.run import RunSpec, execute_run
from fae.harness.stack import Stack, open_stack
from fae.harness.suite_plan import attempts, check_servers, mark_interrupted, render_task, runs_to_do
from fae.proxy.addon import DEFAULT_MAX_BODY_BYTES
from fae.recorder.redact import Redactor

PROCESSES_ENV = "FAE_RECORD_PROCESSES"


def default_processes() -> int:
    """How many processes a recording uses unless told: ``FAE_RECORD_PROCESSES``, else 2 (the faster)."""
    value = os.environ.get(PROCESSES_ENV, "2")
    if value not in ("1", "2"):
        raise RecordError(f"{PROCESSES_ENV}={value!r}: a recording runs in 1 or 2 processes")
    return int(value)


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
