"""Stopping a recording on SIGINT or SIGTERM without losing or mislabelling a run.

The first signal asks the suite to stop: no new run starts, the runs in flight
are cancelled and stored ``interrupted`` with the signal as reason, and the log
is flushed before the process exits 128 + the signal's number. A second signal
exits at once: everything already handed to the writer sits in the journal,
which the next open moves into the log.

One Ctrl-C can arrive twice. The terminal sends SIGINT to the whole foreground
process group, and a launcher in that group that forwards signals to its child
(``uv run`` does) sends it again, a fraction of a second later (0.2 s seen on a
loaded machine). So a SIGINT that repeats within ``SAME_PRESS_S`` of the first,
while fae's parent is in fae's own process group (it got the key press too), is
taken as the same key press; a later one, or any repeat without such a parent,
is a second signal.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
SAME_PRESS_S = 2.0
"""A SIGINT this soon after the first, with a parent in fae's process group, is the same key press forwarded."""
RESUME_HINT = "`fae record --resume` with the same options finishes the suite"


class StopRequest:
    """Set once by the first stop signal; the suite runner watches it."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.at: float | None = None  # when the first signal came (time.monotonic)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: anyio.Event | None = None

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else "a stop request"

    @property
    def reason(self) -> str:
        return f"the recording was stopped by {self.signal_name}"

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or 0)

    def bind(self) -> None:
        """Attach to the running event loop (call from inside it) so ``wait`` can wake."""
        self._loop = asyncio.get_running_loop()
        self._event = anyio.Event()
        if self.requested:
            self._event.set()

    def request(self, signum: int) -> None:
        """The first call asks the suite to stop; later calls are ignored (see ``catch_stop_signals``)."""
        if self.signum is not None:
            return
        self.signum = signum
        self.at = time.monotonic()
        # a signal after the recording's loop has closed (the summary is being printed) has nothing to wake
        if self._loop is not None and self._event is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._event.set)

    async def wait(self) -> None:
        if self._event is None:
            self.bind()
        await self._event.wait()  # type: ignore[union-attr]


def parent_shares_key_presses() -> bool:
    """Whether fae's parent is in fae's process group, so a terminal's Ctrl-C reached it too (and a launcher such
    as ``uv run`` may pass it on)."""
    try:
        return os.getpgid(os.getppid()) == os.getpgrp()
    except OSError:  # the parent is gone, or the platform has no process groups
        return False


def same_key_press(stop: StopRequest, signum: int, now: float, shared: bool) -> bool:
    """Whether a repeated signal is the first one's key press arriving again through a forwarding parent."""
    return (
        shared
        and signum == signal.SIGINT
        and stop.signum == signal.SIGINT
        and stop.at is not None
        and now - stop.at < SAME_PRESS_S
    )


def _exit_now(signum: int) -> None:
    """The second signal: leave at once; the journal holds everything recorded so far."""
    os.write(2, f"{signal.Signals(signum).name} again: exiting now; nothing recorded is lost, {RESUME_HINT}\n".encode())
    os._exit(128 + signum)


@contextmanager
def catch_stop_signals() -> Iterator[StopRequest]:
    """Turn SIGINT/SIGTERM into a ``StopRequest`` for the block; restore after.

    Only the main thread may set signal handlers: elsewhere the request is never set.
    """
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    shared = parent_shares_key_presses()

    def handle(signum: int, _frame: object) -> None:
        if stop.requested:
            if same_key_press(stop, signum, time.monotonic(), shared):
                return
            _exit_now(signum)
        stop.request(signum)
        os.write(
            2,
            f"{signal.Signals(signum).name}: stopping; no new run starts and the runs in flight "
            f"are stored interrupted (a second signal exits at once)\n".encode(),
        )

    previous = {sig: signal.signal(sig, handle) for sig in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
