"""``fae paraphrase``: the fixed paraphrases of a log, written to a file another recording plays."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fae.cli.console import echo
from fae.cli.guard import user_errors
from fae.cli.options import DEFAULT_LOG, LogOption

app = typer.Typer(help="Fixed paraphrases: write a log's to a file another recording loads.", no_args_is_help=True)


@app.command("export")
@user_errors
def export(
    output: Annotated[Path, typer.Option("--output", "-o", help="The paraphrase file to write (.yaml or .json).")],
    log: LogOption = DEFAULT_LOG,
    experiment: Annotated[
        str | None, typer.Option("--experiment", "-e", help="Only the paraphrases this experiment's runs played.")
    ] = None,
) -> None:
    """Write every paraphrase the log fixed (one per task, variation, model and seed) to a paraphrase file."""
    from fae.harness.paraphrases import export_paraphrases

    count = export_paraphrases(log, output, experiment=experiment)
    echo(f"wrote {count} paraphrases to {output}; play them with --paraphrases {output}")
