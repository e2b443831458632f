"""Serve an ASGI app with uvicorn on 127.0.0.1 inside the caller's task group."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import uvicorn

KEEP_ALIVE_S = 600


@asynccontextmanager
async def serve_asgi(app, *, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[int]:
    """Run ``app`` until the block exits; yields the bound port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    # Idle connections stay open long: the recording proxy reuses its upstream connection for a client's
    # next request, and one the server closed meanwhile (uvicorn's default is 5 s) answers 502.
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False,
                            timeout_graceful_shutdown=1, timeout_keep_alive=KEEP_ALIVE_S)
    server = uvicorn.Server(config)
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
