"""The in-process executor: a planned suite's runs on one stack in this process, ``concurrency`` at once.

``record_suite`` plans and records (the form tests and the experiment runner call); ``record_worklist`` records a
worklist made by ``fae.harness.prepare.prepare_recording`` (the form ``fae.harness.recording`` calls).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from fae.agents.base import Agent, declared_upstreams
from fae.errors import RecordError
from fae.harness.config import RecordConfig
from fae.harness.in_flight import RunSlots
from fae.harness.interrupt import StopRequest
from fae.harness.paraphrases import fix_paraphrases
from fae.harness.prepare import prepare_recording
from fae.harness.run import RunSpec
from fae.harness.stack import open_stack
from fae.harness.worklist import SuiteResult, Worklist

PROCESSES_ENV = "FAE_RECORD_PROCESSES"

Progress = Callable[[RunSpec, str], None]


def default_processes() -> int:
    """How many processes a recording uses unless told: ``FAE_RECORD_PROCESSES``, else 2 (the faster)."""
    value = os.environ.get(PROCESSES_ENV, "2")
    if value not in ("1", "2"):
        raise RecordError(f"{PROCESSES_ENV}={value!r}: a recording runs in 1 or 2 processes")
    return int(value)


async def record_suite(
    log_path: str | Path,
    specs: Sequence[RunSpec],
    config: RecordConfig | None = None,
    *,
    llm_app: Any | None = None,
    stop: StopRequest | None = None,
    on_progress: Progress | None = None,
) -> SuiteResult:
    """Plan ``specs`` and record every run not already done, in this process; returns what happened.

    ``llm_app``: an OpenAI-compatible ASGI app the stack serves as its LLM instead of ``config.stack.llm_url``
    (fae's scripted LLM server), reached, like the stack's other servers, only through the proxy.
    """
    config = config or RecordConfig()
    # planning settles the log with an event loop of its own, so it runs on a thread of its own
    work, agents = await anyio.to_thread.run_sync(prepare_recording, log_path, specs, config)
    return await record_worklist(log_path, work, agents, config, llm_app=llm_app, stop=stop, on_progress=on_progress)


async def record_worklist(
    log_path: str | Path,
    work: Worklist,
    agents: Mapping[str, Agent],
    config: RecordConfig,
    *,
    llm_app: Any | None = None,
    stop: StopRequest | None = None,
    on_progress: Progress | None = None,
) -> SuiteResult:
    """Record the worklist's runs on one stack in this process (none started when nothing is left to record)."""
    if not work.todo:
        return work.result()
    stack_config = config.stack_config()
    if stack_config.processes is None:
        stack_config = replace(stack_config, processes=default_processes())
    stop = stop or StopRequest()
    result = work.result()
    async with open_stack(
        log_path, stack_config, llm_app=llm_app, agent_upstreams=declared_upstreams(agents.values())
    ) as stack:
        stop.bind()
        # every variation's paraphrase is fixed before a run starts: runs that start together never ask twice
        paraphrases = (
            await fix_paraphrases(stack, work.to_paraphrase(), config.paraphrase, concurrency=config.concurrency)
            if config.paraphrase is not None and work.todo
            else None
        )
        slots = RunSlots(stack, work, agents, stop=stop, paraphrases=paraphrases, settle_s=config.settle_s)
        # an external server is one shared store: its runs go one at a time
        limiter = anyio.CapacityLimiter(1 if stack_config.fhir_url else config.concurrency)

        async def one(spec: RunSpec) -> None:
            async with limiter:
                status = await slots.record(spec)
            if status is None:
                return
            result.statuses[status] += 1
            result.runs.append((spec.run_id, status))
            if on_progress:
                on_progress(spec, status)

        async def interrupt_on_stop() -> None:
            await stop.wait()
            slots.cancel()

        async with anyio.create_task_group() as watcher:
            watcher.start_soon(interrupt_on_stop)
            async with anyio.create_task_group() as group:
                for spec in work.todo:
                    group.start_soon(one, spec)
            watcher.cancel_scope.cancel()
        if not stack.writer.healthy:
            raise RecordError("the log could not be written; the runs it lost are marked by the next --resume")
    result.stopped = stop if stop.requested else None
    return result
