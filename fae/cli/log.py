"""``fae log``: work on log files as a whole (what a log holds; merge the shards of a cluster recording)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fae.cli.console import echo
from fae.cli.guard import user_errors
from fae.cli.progress import steps

MERGE_STOPPED = (
    "the shard being merged was rolled back (shards merged before it stay); the same command finishes the merge"
)

app = typer.Typer(help="Log files as a whole: what one holds, merge shards.", no_args_is_help=True)


def _shown(counts: dict[str, int], most: int = 8) -> str:
    """``a 3, b 1`` for the most frequent keys, with how many more there are."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    text = ", ".join(f"{key} {count}" for key, count in ranked[:most])
    return (text + f", and {len(ranked) - most} more") if len(ranked) > most else (text or "none")


@app.command("info")
@user_errors
def info(
    log: Annotated[Path, typer.Argument(help="The log file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print it as JSON.")] = False,
) -> None:
    """What a log holds: who wrote it, its runs by status, suites, experiments, agents, models, tasks, verdict
    batches, dates and size; and how many runs keep their task (rescored from the log alone)."""
    import json

    from rich.text import Text

    from fae.cli.console import echo, out
    from fae.store.inventory import inventory

    found = inventory(log)
    if as_json:
        echo(json.dumps(found.as_dict(), indent=2, sort_keys=True))
        return
    rows = [
        ("log", f"{found.path} ({found.size_bytes / 2**20:.1f} MiB)"),
        ("schema", f"version {found.schema_version}"),
        (
            "written by",
            ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in sorted(found.written_by.items())) or "-",
        ),
        ("runs", f"{found.runs} ({_shown(found.runs_by_status)})"),
        ("dates", f"{found.first_start or '-'} to {found.last_end or '-'}"),
        ("suites", _shown(found.suites)),
        ("experiments", _shown(found.experiments)),
        ("agents", _shown(found.agents)),
        ("models", _shown(found.models)),
        ("tasks", f"{found.tasks} tasks, {found.variations} variations"),
        (
            "judged alone",
            f"{found.runs_keeping_their_task} of {found.runs} runs keep their task in the log"
            " (the rest are judged against today's task files)",
        ),
        ("verdict batches", _shown(found.verdict_batches)),
        ("verdicts", _shown(found.judges)),
    ]
    for name, value in rows:
        out.print(Text(f"{name:<16} ") + Text(value))


@app.command("merge")
@user_errors(stopped=MERGE_STOPPED)
def merge(
    shards: Annotated[list[Path], typer.Argument(help="Shard logs to merge (each a fae DuckDB log).")],
    into: Annotated[Path, typer.Option("--into", help="The log to merge into (created if missing).")],
) -> None:
    """Merge shard logs into one: runs and events copied once, blobs deduplicated, verdicts kept (idempotent)."""
    from fae.store.merge import merge_logs

    with steps("merging") as on_step:
        done = merge_logs(shards, into, on_step=on_step)
    for item in done:
        echo(
            f"{item.shard}: {item.runs} runs ({item.skipped_runs} already there), {item.events} events, "
            f"{item.blobs} new blobs, {item.verdicts} verdicts"
        )
