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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def _is_cancellation(context: dict[str, Any]) -> bool:
    return isinstance(context.get("exception"), asyncio.CancelledError) and "handle" in context


@contextmanager
def quiet_cancellations(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """For the block, a loop callback that raises ``CancelledError`` is not reported."""
    previous = loop.get_exception_handler()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if _is_cancellation(context):
            return
        if previous is None:
            loop.default_exception_handler(context)
        else:
            previous(loop, context)

    loop.set_exception_handler(handle)
    try:
        yield
    finally:
        loop.set_exception_handler(previous)
