"""Re-drive one recorded run from its log: a scripted run replays its plan, an LLM run its cassette."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio

from fae.errors import PlanError, ReplayDrift, StoreError
from fae.harness.redrive import Divergence, ReplayReport, agent_kind, read_llm_recording, replay_llm, replay_scripted
from fae.harness.worklist import render_task
from fae.plan import Plan, plan_from_dict
from fae.replay.source import RunLog, load_run
from fae.store import events as ev
from fae.store.live import LogReader
from fae.store.names import check_run_id


def recorded_plan(run: RunLog) -> Plan:
    """The plan a recorded scripted run played: its own, or its task variation's gold plan."""
    started = run.first(ev.RunStarted)
    config = started.event.agent_config if started and isinstance(started.event, ev.RunStarted) else {}
    if config.get("kind") != "scripted":
        raise ReplayDrift(
            f"run {run.run_id} was played by a {config.get('kind') or 'unknown'} agent, not a scripted one"
        )
    if isinstance(config.get("plan"), dict):
        return plan_from_dict(config["plan"])
    return render_task(run.task_id, run.variation).gold_plan


def replay_run(
    log: str | Path,
    run_id: str,
    *,
    lenient: bool = False,
    out: str | Path | None = None,
    memory_stores: Mapping[str, Path] | None = None,
    warn: Callable[[Divergence], None] | None = None,
    on_step: Callable[[int, int, str], None] | None = None,
    agent: str | None = None,
    trust_log_agent: bool = False,
) -> ReplayReport:
    """Re-drive ``run_id`` against a fresh sandbox; strict stops at the first divergence, lenient goes on.

    An LLM-agent run is answered from the log's cassette and recorded into ``out``
    (default: the log's name + ``.replay.duckdb``). ``on_step(done, total, name)`` is told as each stage
    starts: reading the run, re-driving it (an LLM agent's: starting the stack first), comparing.
    A program (``cmd:``) or A2A agent is run or contacted only as ``agent`` names it (a spec of the recorded
    kind) or, with ``trust_log_agent``, as the log names it (``fae.harness.redrive.replay_agent``).
    """
    told = on_step or (lambda done, total, name: None)
    log = Path(log)
    with LogReader(log) as reader:
        if reader.live:
            raise StoreError(f"log {log} is being recorded; replay its runs when the recording ends")
        _, found = reader.query("SELECT run_id FROM runs WHERE run_id = ?", [run_id])
        if not found:
            raise StoreError(f"no run {run_id!r} in {log}; `fae runs` lists them")
        check_run_id(run_id, f"log {log}")  # it names the replayed run, a segment of the proxied URLs
        told(0, 3, "reading the run")
        run = load_run(reader, run_id)
        if agent_kind(run) == "scripted":
            if agent is not None:
                raise PlanError(f"run {run_id} was played by a scripted agent: replay plays its own plan, not --agent")
            plan = recorded_plan(run)
            told(1, 3, "re-driving")
            report = anyio.run(lambda: replay_scripted(run, plan, strict=not lenient, warn=warn))
            told(3, 3, "compared")
            return report
        # every body the LLM replay needs is read now, before the log closes (out may be the same file)
        recording = read_llm_recording(run, str(log.resolve()))
    target = Path(out) if out else log.with_name(log.stem + ".replay.duckdb")
    stores: Any = dict(memory_stores or {})
    told(1, 4, "starting the stack")
    report = anyio.run(
        lambda: replay_llm(
            recording,
            target,
            strict=not lenient,
            warn=warn,
            memory_stores=stores,
            on_stage=lambda name: told(2 if name == "re-driving" else 3, 4, name),
            agent=agent,
            trust_log=trust_log_agent,
        ),
        backend="asyncio",
    )
    told(4, 4, "compared")
    return report
