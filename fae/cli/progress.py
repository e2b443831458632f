"""Progress for long commands: a bar on a terminal, a periodic one-line report on stderr otherwise."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from fae.cli.console import err
from fae.util.visible import visible

EVERY_S = 10.0
"""How often a non-terminal report is printed (and once at the end)."""

Advance = Callable[..., None]


@contextmanager
def progress(label: str, total: int, *, every_s: float = EVERY_S) -> Iterator[Advance]:
    """Yields ``advance(count=1, last="", total=None)``: a bar on a terminal, else a line every ``every_s``.

    ``total`` may be 0 when it is not known yet; an ``advance(..., total=N)`` sets it.
    """
    if err.is_terminal:
        bar = Progress(
            TextColumn(label, markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[last]}", markup=False),  # a run id or a status: data
            console=err,
            transient=True,
        )
        with bar:
            task = bar.add_task(label, total=total or None, last="")

            def update(count: int = 1, last: str = "", total: int | None = None) -> None:
                bar.update(task, total=total, advance=count, last=visible(last))  # total None: unchanged

            yield update
        return
    done, known = 0, total
    reported = time.monotonic()
    if total:
        err.print(f"{label}: 0/{total}", soft_wrap=True)

    def advance(count: int = 1, last: str = "", total: int | None = None) -> None:
        nonlocal done, reported, known
        done += count
        known = total if total is not None else known
        now = time.monotonic()
        if now - reported >= every_s or done == known:
            reported = now
            percent = 100 * done // known if known else 100
            err.print(f"{label}: {done}/{known} ({percent}%)" + (f" {last}" if last else ""), soft_wrap=True)

    yield advance
