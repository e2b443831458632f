"""A suite's worklist: which runs, what is left of them after an interrupted recording, and the tasks they play.

Every executor of a recording (this process, local worker processes, Ray actors) prepares its work the same way, with
these functions, before any run starts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fae.agents.base import Agent, agent_slug
from fae.agents.prefixes import build_agent
from fae.errors import RecordError, TaskError
from fae.harness.config import RecordConfig
from fae.harness.interrupt import StopRequest
from fae.harness.run import RunSpec
from fae.store import events as ev
from fae.store.log import EventLog, RunUpdate
from fae.store.writer import LogWriter, Stamped
from fae.tasks.fixture import BUILTIN_TASK, render_builtin
from fae.tasks.model import FixtureVariation, Rendered

AGENT_CAUSES = (None, "agent")
"""Causes of an errored run that are the agent's own (None: recorded before causes were)."""


def is_done(status: str, cause: str | None, *, retry_errored: bool = False) -> bool:
    """Whether ``--resume`` keeps a run: finished, or errored on the agent's own upstream fault.

    An interrupted or failed run, or one the harness or stack ended, is recorded again;
    ``retry_errored`` records the agent's own errors again too.
    """
    if status == "finished":
        return True
    return status == "errored" and cause in AGENT_CAUSES and not retry_errored


def render_task(task_id: str, variation: int) -> Rendered | FixtureVariation:
    """A rendered variation of a task: the built-in fixture, a scenario or case task, or one of the suite's tasks."""
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


def suite_specs(
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


@dataclass
class SuiteResult:
    planned: int
    skipped: int
    statuses: Counter
    interrupted_marked: int
    runs: list[tuple[str, str]]
    stopped: StopRequest | None = None
    """Set when a stop signal ended the suite early (its runs in flight are stored interrupted)."""


Key = tuple[str, int]
"""(task, variation)."""


@dataclass
class Worklist:
    """What a recording does, decided once before any run starts (``fae.harness.prepare.prepare_recording``);
    every executor records it. It pickles: a worker or an actor is handed it (agents travel by name)."""

    planned: int
    """Runs the suite names."""
    todo: list[RunSpec]
    """The runs still to record, in suite order (a retry has its own id, ``….aN``)."""
    skipped: int
    """Runs a resumed suite keeps."""
    marked: int
    """Runs an earlier recording left unfinished, marked interrupted while preparing."""
    agents: tuple[str, ...]
    """The agents' names, each checked and buildable."""
    rendered: dict[Key, Any] = field(default_factory=dict)
    """The rendered variation of each (task, variation) of the suite."""

    def result(self) -> SuiteResult:
        """The suite's result before any run of it is recorded."""
        return SuiteResult(
            planned=self.planned, skipped=self.skipped, statuses=Counter(), interrupted_marked=self.marked, runs=[]
        )

    def to_paraphrase(self) -> dict[Key, Any]:
        """The variations the runs still to record play, each once."""
        return {(s.task_id, s.variation): self.rendered[(s.task_id, s.variation)] for s in self.todo}


def build_agents(names: Sequence[str], config: RecordConfig) -> dict[str, Agent]:
    """One agent per name, built once (building one looks up the installed agent plugins)."""
    return {name: build_agent(name, **config.llm.options()) for name in dict.fromkeys(names)}
