"""If the recorder cannot write, the proxied request fails: nothing passes unrecorded."""

from __future__ import annotations

import os

import anyio
import httpx
import pytest

from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.recorder import Recorder
from fae.store.log import EventLog
from fae.store.writer import open_writer
from fae.util.serve import serve_asgi
from tests.upstream import create_upstream

pytestmark = pytest.mark.anyio


async def test_an_unwritable_journal_turns_answers_into_errors(tmp_path):
    log = EventLog(tmp_path / "log.duckdb")
    async with serve_asgi(create_upstream()) as port:
        upstreams = {"api": Upstream("api", f"http://127.0.0.1:{port}", "http")}
        async with open_writer(log) as writer:
            async with run_proxy(upstreams, Recorder(writer)) as proxy:
                async with httpx.AsyncClient() as client:
                    ok = await client.get(proxy.url("r1", "agent", "api", "first"))
                    assert ok.status_code == 200
                    # the disk fills up: /dev/full fails every write with ENOSPC, as a full disk does;
                    # after a flush the segment is sealed, so the next append goes to this descriptor
                    await writer.flush()
                    assert writer.journal._fd is None
                    writer.journal._fd = os.open("/dev/full", os.O_WRONLY)
                    lost = await client.get(proxy.url("r1", "agent", "api", "second"))
                    assert lost.status_code == 502
                    assert b"not recorded" in lost.content
                    assert "second" not in lost.text
                    refused = await client.get(proxy.url("r1", "agent", "api", "third"))
                    assert refused.status_code == 503
                    assert not writer.healthy


async def test_a_broken_database_stops_traffic_and_loses_nothing_journaled(tmp_path):
    path = tmp_path / "log.duckdb"
    log = EventLog(path)
    async with serve_asgi(create_upstream()) as port:
        upstreams = {"api": Upstream("api", f"http://127.0.0.1:{port}", "http")}
        async with open_writer(log) as writer:
            async with run_proxy(upstreams, Recorder(writer)) as proxy:
                async with httpx.AsyncClient() as client:
                    assert (await client.get(proxy.url("r1", "agent", "api", "first"))).status_code == 200
                    await writer.flush()
                    log.con.close()  # DuckDB can no longer be written
                    kept = await client.get(proxy.url("r1", "agent", "api", "second"))
                    assert kept.status_code == 200  # journaled before it was delivered
                    with anyio.fail_after(10):
                        while writer.healthy:
                            await anyio.sleep(0.01)
                    refused = await client.get(proxy.url("r1", "agent", "api", "third"))
                    assert refused.status_code == 503
    with EventLog(path) as reopened:  # the journal is moved into the log on the next open
        _, rows = reopened.query("SELECT payload->>'$.path' FROM events WHERE kind = 'HttpExchanged' ORDER BY seq")
    assert [r[0] for r in rows] == ["/first", "/second"]
