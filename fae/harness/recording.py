"""One way to record: prepare the suite's worklist once, then hand it to one of three interchangeable executors.

    record(log, specs, config)
      -> prepare_recording (fae.harness.prepare): agents built, tasks rendered, servers checked, the log settled,
         what is left after an interrupted recording
      -> an Executor: InProcess (this module), LocalWorkers (fae.harness.local_workers) or RayActors
         (fae.harness.ray_record), chosen from ``config.execution`` unless one is given
      -> SuiteResult

Every executor records the same runs to the same statuses and verdicts (tests/harness/test_executors.py);
they differ only in where the runs go.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio

from fae.agents.base import Agent
from fae.harness.config import RecordConfig
from fae.harness.interrupt import StopRequest
from fae.harness.local_workers import LocalWorkers, choose_workers
from fae.harness.prepare import prepare_recording
from fae.harness.ray_record import RayActors
from fae.harness.run import RunSpec
from fae.harness.suite_runner import Progress, record_worklist
from fae.harness.worklist import SuiteResult, Worklist


class Executor(Protocol):
    """Records a planned suite into a log."""

    def record(
        self,
        log_path: Path,
        work: Worklist,
        agents: Mapping[str, Agent],
        config: RecordConfig,
        stop: StopRequest | None,
        on_progress: Progress | None,
    ) -> SuiteResult: ...


@dataclass(frozen=True)
class InProcess:
    """The runs on one stack in this process (``llm_app``: an ASGI app the stack serves as the LLM)."""

    llm_app: Any | None = None

    def record(
        self,
        log_path: Path,
        work: Worklist,
        agents: Mapping[str, Agent],
        config: RecordConfig,
        stop: StopRequest | None,
        on_progress: Progress | None,
    ) -> SuiteResult:
        return anyio.run(
            lambda: record_worklist(
                log_path, work, agents, config, llm_app=self.llm_app, stop=stop, on_progress=on_progress
            )
        )


def choose_executor(work: Worklist, config: RecordConfig) -> Executor:
    """Ray when ``config.execution.ray`` names a cluster; worker processes when asked for (or by
    ``FAE_RECORD_WORKERS`` for a suite large enough); else this process."""
    if config.execution.ray is not None:
        return RayActors(config.execution.ray, config.execution.ray_actors)
    workers = choose_workers(work, config)
    return LocalWorkers(workers) if workers > 1 else InProcess()


def record(
    log_path: str | Path,
    specs: Sequence[RunSpec],
    config: RecordConfig | None = None,
    *,
    stop: StopRequest | None = None,
    on_progress: Progress | None = None,
    executor: Executor | None = None,
) -> SuiteResult:
    """Plan ``specs`` once and record every run not already done with ``executor`` (default: chosen from
    ``config``); returns the statuses. With nothing left to record, no executor starts (no stack, worker or actor)."""
    config = config or RecordConfig()
    if executor is None and config.execution.ray is not None:
        RayActors(config.execution.ray).check()  # before anything is planned or written
    work, agents = prepare_recording(log_path, specs, config)
    if not work.todo:
        return work.result()
    chosen = executor or choose_executor(work, config)
    return chosen.record(Path(log_path), work, agents, config, stop, on_progress)
