"""Progress for long commands on stderr: a bar at a terminal; elsewhere quiet, or a periodic line for the commands
that run agents for minutes or hours (record, demo, curate, train-memory), so a CI log shows they are alive."""

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
def progress(label: str, total: int, *, every_s: float = EVERY_S, lines: bool = False) -> Iterator[Advance]:
    """Yields ``advance(count=1, last="", total=None)``: a bar at a terminal; off one, nothing, or with ``lines``
    a line every ``every_s`` (and at the end).

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
    if not lines:
        yield _quiet
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


def _quiet(count: int = 1, last: str = "", total: int | None = None) -> None:
    """Progress off a terminal for a command whose output is what is read: nothing."""


@contextmanager
def steps(label: str) -> Iterator[Callable[[int, int, str], None]]:
    """``progress`` for a library function that reports ``on_step(done, total, name)`` as each step starts."""
    with progress(label, 0) as advance:
        seen = [0]

        def on_step(done: int, total: int, name: str) -> None:
            advance(done - seen[0], name, total=total)
            seen[0] = done

        yield on_step
