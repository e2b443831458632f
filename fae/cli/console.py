"""Where the command line prints: the one output layer, and tables that stay readable at 100 columns.

Everything a command shows (tables, timelines, progress, error lines, JSON and CSV) goes through here. What
is printed is data, never instructions: no rich markup or emoji code in a value is interpreted (the consoles
have both off, whatever a caller asks), and every control, format or separator character of a value is
shown as its JSON escape (``fae.util.visible``), so an ESC, a C1 control, a carriage return or a bidi
override in an answer, a tool argument or an error cannot reach the terminal. Styling is fae's own, applied
to fae's own words (``error:`` in red). tests/cli/test_console.py checks that nothing in fae/cli,
fae/report or fae/harness prints around this module.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.style import Style
from rich.table import Table
from rich.text import Text

from fae.util.visible import visible


class Screen(Console):
    """A rich console that never reads markup or emoji codes in a string and escapes its hidden characters.

    ``render_str`` is where rich turns every string it prints into text: a printed string, a table's cells,
    title and caption, a rule's title. Markup and emoji stay off even when a caller passes ``markup=True``.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(markup=False, emoji=False, highlight=False, **options)

    def render_str(self, text: str, **options: Any) -> Text:
        options.update(markup=False, emoji=False, highlight=False)
        # tabs as spaces now: rich measures a table cell before it expands them, and would cut the value short
        return super().render_str(visible(text).expandtabs(self.tab_size), **options)


def _width(stream: Any) -> int | None:
    """The terminal's width; piped output is not folded at 80 columns unless COLUMNS says so."""
    if stream.isatty() or os.environ.get("COLUMNS"):
        return None
    return 240


out = Screen(width=_width(sys.stdout))
# messages are never folded: a path or a hint split over lines cannot be copied (the terminal wraps them)
err = Screen(stderr=True, width=_width(sys.stderr), soft_wrap=True)

ID_COLUMNS = ("run_id", "run", "task_id", "task", "batch")
"""Columns whose values are identifiers: kept on one line, never split mid-word."""

ERROR = Style(color="red")


def screen(width: int | None = None) -> Screen:
    """A console on stdout at ``width`` columns (the terminal's width at a terminal, 100 when piped, if None)."""
    if width is None:
        width = shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100
    return Screen(width=width)


def line(text: str, *, stderr: bool = False) -> None:
    """One message, never folded (a long one wraps at the terminal), its hidden characters escaped."""
    (err if stderr else out).print(text, soft_wrap=True)


def error_line(message: object) -> None:
    """``error: MESSAGE`` on stderr: the word in red, the message (which may quote data) as text."""
    err.print(Text.assemble(("error:", ERROR), " ", visible(str(message))), soft_wrap=True)


def write(text: str, *, stderr: bool = False) -> None:
    """Text written as it is but for its hidden characters: JSON, CSV and plain lines that scripts read.

    JSON stays valid and means the same (its escapes are the ones ``visible`` writes); CSV shows an escape
    where a value held a hidden character (``--json`` carries the value itself).
    """
    stream = sys.stderr if stderr else sys.stdout
    stream.write(visible(text))
    stream.flush()


def echo(text: str = "", *, stderr: bool = False, end: str = "\n") -> None:
    """``write`` of one line (``end`` after it)."""
    write(text + end, stderr=stderr)


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
        shown.add_row(*("" if value is None else str(value) for value in row))  # strings: Screen escapes them
    out.print(shown)
