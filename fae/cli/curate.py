"""``fae curate``: label each run's deterministic verdict with the soft (LLM) judge."""

from __future__ import annotations

import functools
from collections import Counter
from typing import Annotated

import typer
from rich.table import Table

from fae.cli.console import out
from fae.cli.options import DEFAULT_LOG, LogOption, RunsOption
from fae.cli.progress import progress


def curate(
    log: LogOption = DEFAULT_LOG,
    runs: RunsOption = None,
    llm_url: Annotated[
        str | None,
        typer.Option(
            help="OpenAI-compatible base URL of the judge; not needed when every run has a recorded soft verdict.",
            envvar="OPENAI_BASE_URL",
        ),
    ] = None,
    model: Annotated[str, typer.Option(help="The judge model.")] = "scripted:judge",
    api_key: Annotated[str | None, typer.Option(help="API key for the judge.", envvar="OPENAI_API_KEY")] = None,
) -> None:
    """Soft validator: label each run agreement, validator_too_strict or validator_too_loose."""
    import anyio

    from fae.harness.curate import curate_log

    with progress("curating", 0, lines=True) as step:
        seen = [0]

        def report(done: int, total: int) -> None:
            step(done - seen[0], total=total)
            seen[0] = done

        result = anyio.run(
            functools.partial(
                curate_log, log, runs=runs, llm_url=llm_url, model=model, api_key=api_key, on_progress=report
            )
        )
    table = Table(title=f"soft verdicts in {log}: {result.called} asked, {result.reused} reused from the log")
    for column in ("run", "strict", "label", "reason"):
        table.add_column(column, overflow="fold")
    for row in result.rows:
        strict = row.evidence.get("strict_passed")
        table.add_row(
            row.run_id,
            "n/a" if strict is None else ("pass" if strict else "fail"),
            row.outcome,
            str(row.evidence.get("reason") or row.evidence.get("error") or ""),
        )
    out.print(table)
    counts = Counter(row.outcome for row in result.rows)
    out.print(", ".join(f"{label}: {count}" for label, count in sorted(counts.items())))
    if result.task_changed:
        out.print(
            f"not labelled: {len(result.task_changed)} run(s) played another rendering of their task than "
            "this fae renders (task_changed, docs/judging.md)",
            soft_wrap=True,
        )
