"""Options every command spells the same way: the log, and the one run filter."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

LogOption = Annotated[Path, typer.Option("--log", "-l", help="The DuckDB event log.", envvar="FAE_LOG")]
DEFAULT_LOG = Path("fae.duckdb")

RunsOption = Annotated[
    str | None,
    typer.Option(
        "--runs",
        help="Only these runs: a run-id glob (rec-*) or key=value[,key=value] with key task, agent, "
        "status, suite, experiment, phase, variation or run.",
        show_default=False,
    ),
]

RayOption = Annotated[
    str | None,
    typer.Option(
        "--ray",
        metavar="[ADDRESS]",
        help="Run on a Ray cluster: 'auto' (also --ray alone), ray://HOST:PORT or HOST:PORT, or 'local' for Ray "
        "started on this machine (needs the ray extra; docs/scale.md).",
        show_default=False,
    ),
]
