"""``fae replay RUN``: a plain command function the top-level CLI registers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from fae.errors import ReplayDrift, StoreError

out = Console(highlight=False, width=None if sys.stdout.isatty() else 240)
err = Console(stderr=True, highlight=False)


def _plan_of(run: Any) -> Any:
    """The plan a recorded scripted run played: its own, or its task variation's gold plan."""
    from fae.plan import plan_from_dict
    from fae.store import events as ev

    started = run.first(ev.RunStarted)
    config = started.event.agent_config if started else {}
    if config.get("kind") != "scripted":
        raise ReplayDrift(f"run {run.run_id} was played by a {config.get('kind') or 'unknown'} agent, "
                          f"not a scripted one")
    if isinstance(config.get("plan"), dict):
        return plan_from_dict(config["plan"])
    from fae.harness.suite_runner import render_task

    rendered = render_task(run.task_id, run.variation)
    return rendered.gold_plan


def replay(
    run_id: Annotated[str, typer.Argument(help="The recorded run to re-drive.")],
    log: Annotated[Path, typer.Option("--log", "-l", help="The DuckDB event log.", envvar="FAE_LOG")] = Path("fae.duckdb"),
    lenient: Annotated[bool, typer.Option("--lenient", help="Warn at each divergence and go on.")] = False,
    out_log: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Log the re-driven LLM-agent run goes into (default: LOG's name + .replay.duckdb)."
    )] = None,
    memory: Annotated[list[str] | None, typer.Option(
        "--memory", help="NAME=DIR: a Reflexion memory store the replayed agent uses (memory configurations)."
    )] = None,
) -> None:
    """Re-drive a recorded run against a fresh sandbox, its LLM answered from the log; stop at the first divergence."""
    import anyio

    from fae.harness.redrive import agent_kind, read_llm_recording, replay_llm, replay_scripted
    from fae.replay.source import load_run
    from fae.store.live import LogReader

    def warn(divergence: Any) -> None:
        err.print(f"warning: {divergence.describe()}", markup=False)

    with LogReader(log) as reader:
        if reader.live:
            raise StoreError(f"log {log} is being recorded; replay its runs when the recording ends")
        _, found = reader.query("SELECT run_id FROM runs WHERE run_id = ?", [run_id])
        if not found:
            raise StoreError(f"no run {run_id!r} in {log}; `fae runs` lists them")
        run = load_run(reader, run_id)
        if agent_kind(run) == "scripted":
            plan = _plan_of(run)
            report = anyio.run(lambda: replay_scripted(run, plan, strict=not lenient, warn=warn))
            recording = None
        else:
            # every body the LLM replay needs is read now, before the log closes (--out may be the same file)
            recording = read_llm_recording(run, str(log.resolve()))
    if recording is not None:
        from fae.harness.stack import parse_memory_stores

        target = out_log or log.with_name(log.stem + ".replay.duckdb")
        stores = parse_memory_stores(memory or [])
        report = anyio.run(lambda: replay_llm(recording, target, strict=not lenient, warn=warn,
                                              memory_stores=stores), backend="asyncio")
    verdict = "replayed identically" if not report.divergences else f"{len(report.divergences)} divergences"
    if report.replay_run_id:
        out.print(f"{run_id}: replayed as {report.replay_run_id} in {report.out}", markup=False)
        out.print(f"{report.llm_played}/{report.llm_calls} LLM calls answered from the log, "
                  f"{report.matched}/{report.calls} tool calls matched; {verdict}", markup=False)
    else:
        out.print(f"{run_id}: {report.matched}/{report.calls} calls matched; {verdict}", markup=False)
    if report.divergences:
        raise typer.Exit(1)
