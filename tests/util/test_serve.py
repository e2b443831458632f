"""Embedded servers leave the process's signals alone and never close an idle connection before the proxy does."""

from __future__ import annotations

import http.client
import signal

import anyio
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from fae.llm.app import create_app as create_llm_app
from fae.llm.server import LlmServer
from fae.util.serve import KEEP_ALIVE_S, PROXY_IDLE_S, serve_asgi


def _app() -> Starlette:
    return Starlette(routes=[Route("/", lambda request: PlainTextResponse("ok"))])


@pytest.mark.anyio
async def test_serving_installs_no_signal_handler():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    async with serve_asgi(_app()):
        during = {sig: signal.getsignal(sig) for sig in before}
    assert during == before


def test_the_embedded_llm_server_keeps_idle_connections_past_the_proxy():
    assert KEEP_ALIVE_S > PROXY_IDLE_S
    with LlmServer(create_llm_app()) as server:
        assert server._server.config.timeout_keep_alive == KEEP_ALIVE_S


def _get(conn: http.client.HTTPConnection) -> tuple[int, bytes]:
    conn.request("GET", "/")
    reply = conn.getresponse()
    return reply.status, reply.read()


@pytest.mark.anyio
async def test_an_idle_connection_outlives_uvicorns_default_keep_alive():
    # uvicorn's default closes an idle connection after 5 s: a client (the proxy) that reuses one
    # at that moment gets "server closed connection". Idle 6 s, then reuse the same socket.
    async with serve_asgi(_app()) as port:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            assert await anyio.to_thread.run_sync(_get, conn) == (200, b"ok")
            first = conn.sock
            await anyio.sleep(6)
            try:
                again = await anyio.to_thread.run_sync(_get, conn)
            except (http.client.RemoteDisconnected, ConnectionError) as exc:
                pytest.fail(f"the server closed the idle connection: {exc!r}")
            assert again == (200, b"ok") and conn.sock is first
        finally:
            conn.close()
