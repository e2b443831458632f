"""Bind a server's listening socket up front, so a bad or busy port is one clear error, not a traceback."""

from __future__ import annotations

import socket

import uvicorn

from fae.errors import FaeError

MAX_PORT = 65535


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``, or a FaeError that says why it cannot be had."""
    if not 0 <= port <= MAX_PORT:
        raise FaeError(f"cannot listen on {host}:{port}: a port is a number from 0 to {MAX_PORT}")
    try:
        return socket.create_server((host, port))
    except OSError as exc:
        raise FaeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def serve_forever(app: object, listener: socket.socket, *, lifespan: str = "on") -> None:
    """Serve ``app`` with uvicorn on an already bound ``listener`` until interrupted."""
    config = uvicorn.Config(app, log_level="warning", lifespan=lifespan)  # type: ignore[arg-type]
    with listener:
        uvicorn.Server(config).run(sockets=[listener])
