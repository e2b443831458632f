"""Keep the event loop's report of a cancelled connection out of a recording's output.

On Python before 3.12.2 (CPython gh-113538) a server connection whose handler task is
cancelled — the recording proxy's connections when a stop signal or the end of a recording
closes it — makes asyncio's ``StreamReaderProtocol`` ask the cancelled task for its
exception; that raises ``CancelledError`` inside a loop callback, and the loop prints it
with a traceback ("Exception in callback StreamReaderProtocol.connection_made...") though
nothing failed. A loop callback that raises ``CancelledError`` reports no error of anyone's,
so it is dropped; every other report goes to the handler that was there before.
"""

from __future__ import annotations

import asyncio
from typing import Any


def _is_cancellation(context: dict[str, Any]) -> bool:
    return isinstance(context.get("exception"), asyncio.CancelledError) and "handle" in context


class _Quiet:
    """The loop's exception handler: drops cancelled callbacks, hands the rest to the one before."""

    def __init__(self, previous: Any):
        self.previous = previous

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if _is_cancellation(context):
            return
        if self.previous is None:
            loop.default_exception_handler(context)
        else:
            self.previous(loop, context)


def quiet_cancellations(loop: asyncio.AbstractEventLoop) -> None:
    """From now until the loop closes, a loop callback that raises ``CancelledError`` is not reported.

    For the loop's whole life, not for a block: the callbacks of connections cancelled as a recording
    stops can run after the code that opened them has returned (``asyncio.run`` cancels the tasks left
    and runs their callbacks as it closes the loop). Installed once per loop.
    """
    if not isinstance(loop.get_exception_handler(), _Quiet):
        loop.set_exception_handler(_Quiet(loop.get_exception_handler()))
