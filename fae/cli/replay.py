"""``fae replay RUN``: a plain command function the top-level CLI registers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fae.cli.console import err, out
from fae.cli.progress import steps


def replay(
    run_id: Annotated[str, typer.Argument(help="The recorded run to re-drive.")],
    log: Annotated[Path, typer.Option("--log", "-l", help="The DuckDB event log.", envvar="FAE_LOG")] = Path(
        "fae.duckdb"
    ),
    lenient: Annotated[bool, typer.Option("--lenient", help="Warn at each divergence and go on.")] = False,
    out_log: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Log the re-driven LLM-agent run goes into (default: LOG's name + .replay.duckdb)."
        ),
    ] = None,
    memory: Annotated[
        list[str] | None,
        typer.Option(
            "--memory", help="NAME=DIR: a Reflexion memory store the replayed agent uses (memory configurations)."
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            "-a",
            help="The program or A2A agent to re-drive (cmd:COMMAND, a2a:URL), named again: a log's own is never run.",
        ),
    ] = None,
    trust_log_agent: Annotated[
        bool,
        typer.Option(
            "--trust-log-agent", help="Run the program or contact the A2A server the log names (trusted logs only)."
        ),
    ] = False,
) -> None:
    """Re-drive a recorded run against a fresh sandbox, its LLM answered from the log; stop at the first divergence."""
    from fae.harness.replay_run import replay_run
    from fae.harness.stack import parse_memory_stores

    def warn(divergence: Any) -> None:
        err.print(f"warning: {divergence.describe()}")

    with steps("replaying") as on_step:
        report = replay_run(
            log,
            run_id,
            lenient=lenient,
            out=out_log,
            memory_stores=parse_memory_stores(memory or []),
            warn=warn,
            on_step=on_step,
            agent=agent,
            trust_log_agent=trust_log_agent,
        )
    verdict = "replayed identically" if not report.divergences else f"{len(report.divergences)} divergences"
    if report.replay_run_id:
        out.print(f"{run_id}: replayed as {report.replay_run_id} in {report.out}")
        out.print(
            f"{report.llm_played}/{report.llm_calls} LLM calls answered from the log, "
            f"{report.matched}/{report.calls} tool calls matched; {verdict}",
        )
    else:
        out.print(f"{run_id}: {report.matched}/{report.calls} calls matched; {verdict}")
    if report.divergences:
        raise typer.Exit(1)
