"""The proxy's pooled upstream connection is never closed under it by an embedded server after idling."""

from __future__ import annotations

import http.client

import anyio
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.recorder import Recorder
from fae.store.log import EventLog
from fae.store.writer import open_writer
from fae.util.serve import serve_asgi

pytestmark = pytest.mark.anyio


def _peer_port_app() -> Starlette:
    """Answers with the client port it was reached from: the proxy's upstream connection."""
    return Starlette(routes=[Route("/{rest:path}", lambda request: PlainTextResponse(str(request.client.port)))])


def _get(conn: http.client.HTTPConnection, path: str) -> tuple[int, str]:
    conn.request("GET", path)
    reply = conn.getresponse()
    return reply.status, reply.read().decode()


async def test_an_idle_pooled_upstream_connection_is_reused_not_closed_by_the_server(tmp_path):
    # uvicorn's default keep-alive (5 s) closed the proxy's pooled connection while the client idled;
    # a request reaching the proxy as the server closed it got a 502. Now the proxy, which reuses the
    # connection, is the side that closes it when idle: after 6 s the same upstream connection serves.
    with EventLog(tmp_path / "log.duckdb") as log:
        async with serve_asgi(_peer_port_app()) as port, open_writer(log) as writer:
            upstreams = {"api": Upstream("api", f"http://127.0.0.1:{port}", "http")}
            async with run_proxy(upstreams, Recorder(writer)) as proxy:
                conn = http.client.HTTPConnection(proxy.host, proxy.port, timeout=30)
                path = proxy.url("r1", "agent", "api", "x").removeprefix(proxy.base_url)
                try:
                    status, first = await anyio.to_thread.run_sync(_get, conn, path)
                    assert status == 200, first
                    await anyio.sleep(6)
                    status, second = await anyio.to_thread.run_sync(_get, conn, path)
                finally:
                    conn.close()
    assert status == 200, second
    assert second == first, "the server closed the proxy's idle upstream connection; the proxy had to reconnect"
