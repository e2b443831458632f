"""A cancelled connection's loop callback is not printed as an error; every real error still is."""

from __future__ import annotations

import asyncio

from fae.util.loop_errors import quiet_cancellations


def _reports(body) -> list[dict]:
    """What the loop reported to its exception handler while ``body(loop)`` ran, with the quieting in place."""
    reports: list[dict] = []

    def keep(_loop, context) -> None:
        reports.append(context)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(keep)
        quiet_cancellations(loop)
        quieting = loop.get_exception_handler()
        quiet_cancellations(loop)  # a second stack on the same loop (a Ray actor's next shard) adds nothing
        assert loop.get_exception_handler() is quieting is not keep
        await body(loop)

    asyncio.run(main())
    return reports


async def _serve_one_waiting_connection() -> tuple[asyncio.Server, asyncio.StreamWriter, asyncio.Task]:
    """A server with one client connection, its handler waiting for the next request: (server, client, handler)."""
    handlers: list[asyncio.Task] = []

    async def handle(reader, writer):
        handlers.append(asyncio.current_task())
        try:
            await asyncio.Event().wait()  # a connection waiting for its next request
        finally:
            writer.close()  # as a proxy closes its side

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    while not handlers:
        await asyncio.sleep(0.01)
    return server, writer, handlers[0]


def test_a_callback_that_raises_cancelled_error_is_dropped_and_a_real_error_is_kept():
    async def callbacks(loop):
        def cancelled():
            raise asyncio.CancelledError

        def broken():
            raise ValueError("a real fault")

        loop.call_soon(cancelled)
        loop.call_soon(broken)
        await asyncio.sleep(0)  # both ran before this resumes: callbacks run in the order scheduled

    reports = _reports(callbacks)
    assert [type(r.get("exception")) for r in reports] == [ValueError], reports


def test_a_server_connection_cancelled_at_shutdown_reports_nothing():
    """How the recording proxy's connections end when a stop signal closes it. On Python < 3.12.2 (CPython
    gh-113538) asyncio printed "Exception in callback StreamReaderProtocol.connection_made" with a traceback:
    a loaded CI run's `fae record` showed it on SIGTERM."""

    async def cancel_a_connection(loop):
        server, writer, handler = await _serve_one_waiting_connection()
        handler.cancel()  # what a proxy's shutdown does to its connections' tasks
        await asyncio.wait([handler])
        await asyncio.sleep(0)  # the task's done-callbacks run on the loop's next turn
        writer.close()
        server.close()
        await server.wait_closed()

    assert _reports(cancel_a_connection) == []


def test_a_connection_still_open_when_the_loop_closes_reports_nothing():
    """asyncio.run cancels the tasks left when its coroutine returns and runs their callbacks as it closes the
    loop, after the code that opened the connections is done: the quieting lasts as long as the loop. (A loaded
    CI run's SIGTERM still printed the traceback when the quieting ended with the recording's stack.) On Python
    3.12.1 this fails when the handler before is put back as the coroutine returns."""
    reports: list[dict] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: reports.append(context))
        quiet_cancellations(loop)
        await _serve_one_waiting_connection()  # returns with the connection's handler still waiting

    asyncio.run(main())
    assert [r for r in reports if isinstance(r.get("exception"), asyncio.CancelledError)] == [], reports
