"""The stop request: a signal that comes after the recording's event loop has closed is taken, not a traceback."""

from __future__ import annotations

import asyncio
import signal

from fae.harness.interrupt import StopRequest


def test_a_signal_after_the_loop_closed_is_taken_quietly():
    """`fae record` printing its summary gets SIGTERM: the loop the request was bound to is closed by then."""
    stop = StopRequest()

    async def bound() -> None:
        stop.bind()

    loop = asyncio.new_event_loop()
    loop.run_until_complete(bound())
    loop.close()
    stop.request(int(signal.SIGTERM))  # raised "Event loop is closed" from the signal handler before
    assert stop.requested and stop.exit_code == 128 + signal.SIGTERM


def test_a_signal_while_the_loop_runs_wakes_the_waiter():
    stop = StopRequest()

    async def wait_for_stop() -> bool:
        stop.bind()
        asyncio.get_running_loop().call_later(0.01, stop.request, int(signal.SIGINT))
        await stop.wait()
        return stop.requested

    assert asyncio.run(wait_for_stop())
    assert stop.signal_name == "SIGINT"
