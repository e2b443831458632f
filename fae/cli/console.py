"""Where the command line prints, and tables that stay readable at 100 columns."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text


def _width(stream: Any) -> int | None:
    """The terminal's width; piped output is not folded at 80 columns unless COLUMNS says so."""
    if stream.isatty() or os.environ.get("COLUMNS"):
        return None
    return 240


out = Console(highlight=False, width=_width(sys.stdout))
# messages are never folded: a path or a hint split over lines cannot be copied (the terminal wraps them)
err = Console(stderr=True, highlight=False, emoji=False, width=_width(sys.stderr), soft_wrap=True)

ID_COLUMNS = ("run_id", "run", "task_id", "task", "batch")
"""Columns whose values are identifiers: kept on one line, never split mid-word."""


def table(columns: Sequence[str], title: str | None = None) -> Table:
    """A table whose identifier columns never wrap and whose text columns wrap at spaces."""
    shown = Table(title=title, title_justify="left")
    for column in columns:
        if column in ID_COLUMNS:
            shown.add_column(column, no_wrap=True, overflow="ellipsis")
        else:
            shown.add_column(column, overflow="fold" if column in ("error", "reason") else "ellipsis")
    return shown


def print_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> None:
    shown = table(columns, title)
    for row in rows:
        shown.add_row(*(Text("" if value is None else str(value)) for value in row))  # data is never markup
    out.print(shown)


def rules_label(rules: dict[str, Any]) -> str:
    """A rule set named by its rules (``accept_corrections=false``), ``defaults`` when it has none set."""
    if not rules:
        return "defaults"
    return ",".join(
        f"{key}={str(value).lower() if isinstance(value, bool) else value}" for key, value in sorted(rules.items())
    )
