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
    from fae.agents.plan import plan_from_dict
    from fae.store import events as ev

    started = run.first(ev.RunStarted)
    config = started.event.agent_config if started else {}
    if config.get("kind") != "scripted":
        raise ReplayDrift(f"run {run.run_id} was played by a {config.get('kind') or 'unknown'} agent; "
                          f"fae replay drives scripted runs (LLM runs need the cassette, not built yet)")
    if isinstance(config.get("plan"), dict):
        return plan_from_dict(config["plan"])
    from fae.harness.suite import render_task
    from fae.judge.scenarios import TASK_ID, render

    rendered = render(run.variation) if run.task_id == TASK_ID else render_task(run.task_id, run.variation)
    return rendered.gold_plan


def replay(
    run_id: Annotated[str, typer.Argument(help="The recorded run to re-drive.")],
    log: Annotated[Path, typer.Option("--log", "-l", help="The DuckDB event log.", envvar="FAE_LOG")] = Path("fae.duckdb"),
    lenient: Annotated[bool, typer.Option("--lenient", help="Warn at each divergence and go on.")] = False,
) -> None:
    """Re-drive a recorded scripted run against a fresh sandbox; stop at the first divergence."""
    import anyio

    from fae.replay.driver import replay_scripted
    from fae.replay.source import load_run
    from fae.store.live import LogReader

    with LogReader(log) as reader:
        if reader.live:
            raise StoreError(f"log {log} is being recorded; replay its runs when the recording ends")
        _, found = reader.query("SELECT run_id FROM runs WHERE run_id = ?", [run_id])
        if not found:
            raise StoreError(f"no run {run_id!r} in {log}; `fae runs` lists them")
        run = load_run(reader, run_id)
        plan = _plan_of(run)
        report = anyio.run(lambda: replay_scripted(
            run, plan, strict=not lenient,
            warn=lambda d: err.print(f"warning: {d.describe()}", markup=False)))
    verdict = "replayed identically" if not report.divergences else f"{len(report.divergences)} divergences"
    out.print(f"{run_id}: {report.matched}/{report.calls} calls matched; {verdict}", markup=False)
    if report.divergences:
        raise typer.Exit(1)
