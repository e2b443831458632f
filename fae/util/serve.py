"""Serve an ASGI app with uvicorn on 127.0.0.1 inside the caller's task group.

An embedded server is part of a larger process (``fae record``): it never
installs signal handlers, so a SIGINT or SIGTERM reaches the process's own
handling (which stops new runs and marks the ones in flight) instead of
quietly shutting the server down under runs that still need it. Its idle
keep-alive outlives the recording proxy's: the proxy pools its upstream
connections and reuses one for the next request, so the side that reuses a
connection must be the one that closes it when idle, never the server.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import anyio
import uvicorn

PROXY_IDLE_S = 600
"""The recording proxy closes a connection (and its pooled upstream ones) idle this long."""
KEEP_ALIVE_S = PROXY_IDLE_S + 60
"""An embedded server keeps an idle connection open this long: longer than any client reuses it."""


class EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves the process's signals alone."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def embedded_config(app, **options) -> uvicorn.Config:
    """uvicorn settings every embedded server shares: quiet, and an idle keep-alive past the proxy's."""
    return uvicorn.Config(app, log_level="warning", access_log=False, timeout_keep_alive=KEEP_ALIVE_S, **options)


@asynccontextmanager
async def serve_asgi(app, *, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[int]:
    """Run ``app`` until the block exits; yields the bound port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    server = EmbeddedServer(embedded_config(app, lifespan="on", timeout_graceful_shutdown=1))
    stopped = anyio.Event()

    async def serve() -> None:
        try:
            await server.serve(sockets=[sock])
        finally:
            stopped.set()

    async with anyio.create_task_group() as group:
        group.start_soon(serve)
        with anyio.fail_after(20):
            while not server.started:
                if server.should_exit:
                    break
                await anyio.sleep(0.01)
        try:
            yield bound
        finally:
            # a graceful stop, even when the block failed, so the app's lifespan ends cleanly
            server.should_exit = True
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                await stopped.wait()
    sock.close()
