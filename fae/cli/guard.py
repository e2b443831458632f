"""What a command's user sees when it fails or is stopped: one line on stderr, never a traceback.

A user's mistake (a ``FaeError``) becomes ``error: ...`` and exit code 1. A
stop signal (SIGINT from Ctrl-C, SIGTERM from ``kill`` or a scheduler's time
limit) becomes ``stopped by SIGNAL; what was left`` and exit code 128 + the
signal's number. A signal that lands while DuckDB runs a query does not reach
the command as a KeyboardInterrupt: DuckDB turns it into an error of its own,
which the code around the query may wrap again (a ``StoreError``). So the
guard notes the signal as it comes, and whatever leaves the command after
one is reported as the stop it is. SIGTERM is turned into an exception too,
so the command's own clean-up runs (worker processes stopped, spool folders
removed) instead of the process vanishing; a second signal exits at once.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from typer.exceptions import TyperException

from fae.cli.console import err, error_line
from fae.errors import FaeError

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(KeyboardInterrupt):
    """SIGTERM during a guarded command, raised where the command is (as SIGINT raises KeyboardInterrupt)."""


class _Seen:
    signum: int | None = None


def user_error(exc: BaseException) -> FaeError | None:
    """The FaeError behind an exception, looking inside task-group exception groups."""
    if isinstance(exc, FaeError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = user_error(inner)
            if found is not None:
                return found
    return None


@contextmanager
def noting_stops() -> Iterator[_Seen]:
    """Note the first SIGINT or SIGTERM and raise it as an exception; a second one exits at once.

    Only a signal whose handling is still Python's default is taken over (a SIGINT that a background
    job ignores stays ignored; a handler someone else installed stays theirs); the old handlers come back
    after the block. Outside the main thread nothing can be installed, and nothing is.
    """
    seen = _Seen()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def on_stop(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if seen.signum is not None:
            os.write(2, f"{name} again: exiting now\n".encode())
            os._exit(128 + signum)
        seen.signum = signum
        raise KeyboardInterrupt if signum == signal.SIGINT else Stopped(name)

    previous = {}
    for signum in STOP_SIGNALS:
        current = signal.getsignal(signum)
        if current is (signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL):
            previous[signum] = current
            signal.signal(signum, on_stop)
    try:
        yield seen
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def user_errors(fn: Callable[..., Any] | None = None, *, stopped: str | None = None) -> Any:
    """Guard a command: a user's mistake is one line and exit code 1, a stop is one line and 128 + the signal.

    ``stopped`` says what a stopped command leaves behind and how to finish it (printed after the signal).
    Use as ``@user_errors`` or ``@user_errors(stopped="...")``.
    """

    def guard(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with noting_stops() as seen:
                try:
                    return command(*args, **kwargs)
                except (typer.Exit, typer.Abort, TyperException):
                    raise
                except BaseException as exc:
                    if seen.signum is not None or isinstance(exc, KeyboardInterrupt):
                        signum = seen.signum or signal.SIGINT
                        err.print(f"stopped by {signal.Signals(signum).name}" + (f"; {stopped}" if stopped else ""))
                        raise typer.Exit(128 + signum) from None
                    found = user_error(exc)
                    if found is None:
                        raise
                    error_line(found)
                    raise typer.Exit(1) from None

        return wrapper

    return guard(fn) if fn is not None else guard
