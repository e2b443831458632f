"""``fae log``: work on log files as a whole (merge the shards of a cluster recording)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fae.cli.console import echo
from fae.cli.guard import user_errors

MERGE_STOPPED = (
    "the shard being merged was rolled back (shards merged before it stay); the same command finishes the merge"
)

app = typer.Typer(help="Log files as a whole: merge shards.", no_args_is_help=True)


@app.command("merge")
@user_errors(stopped=MERGE_STOPPED)
def merge(
    shards: Annotated[list[Path], typer.Argument(help="Shard logs to merge (each a fae DuckDB log).")],
    into: Annotated[Path, typer.Option("--into", help="The log to merge into (created if missing).")],
) -> None:
    """Merge shard logs into one: runs and events copied once, blobs deduplicated, verdicts kept (idempotent)."""
    from fae.store.merge import merge_logs

    done = merge_logs(shards, into)
    for item in done:
        echo(
            f"{item.shard}: {item.runs} runs ({item.skipped_runs} already there), {item.events} events, "
            f"{item.blobs} new blobs, {item.verdicts} verdicts"
        )
