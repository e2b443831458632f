"""A real mitmproxy in front of a real HTTP server on 127.0.0.1, recording into a real DuckDB file."""

from __future__ import annotations

import gzip
import json
import socket

import anyio
import httpx
import pytest

from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.recorder import Recorder
from fae.store.log import EventLog
from fae.store.writer import open_writer
from fae.util.serve import serve_asgi
from tests.upstream import BIG, create_upstream

pytestmark = pytest.mark.anyio


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _record(tmp_path, body):
    """Run ``body(proxy, client)`` with the whole stack up; return the log path."""
    path = tmp_path / "log.duckdb"
    log = EventLog(path)
    async with serve_asgi(create_upstream()) as port:
        upstreams = {
            "api": Upstream("api", f"http://127.0.0.1:{port}/base", "http"),
            "raw": Upstream("raw", f"http://127.0.0.1:{port}", "http"),
            "down": Upstream("down", f"http://127.0.0.1:{_free_port()}", "http"),
        }
        async with open_writer(log) as writer:
            async with run_proxy(upstreams, Recorder(writer)) as proxy:
                async with httpx.AsyncClient(timeout=30) as client:
                    await body(proxy, client)
    log.close()
    return path


def _exchanges(path, run_id=None):
    with EventLog(path, read_only=True) as log:
        where = "WHERE kind = 'HttpExchanged'" + (" AND run_id = ?" if run_id else "")
        _, rows = log.query(
            f"SELECT run_id, seq, actor, payload FROM events {where} ORDER BY run_id, seq", [run_id] if run_id else []
        )
        blobs = {h: log.blob(h) for (h,) in log.query("SELECT hash FROM blobs")[1]}  # large ones are side files
    return [(r, s, a, json.loads(p)) for r, s, a, p in rows], blobs


async def test_concurrent_runs_are_attributed_in_order_with_bodies_byte_equal(tmp_path):
    runs = [f"run-{i}" for i in range(6)]

    async def body(proxy, client):
        async def one_run(run_id):
            for n in range(5):
                actor = "agent" if n % 2 == 0 else "harness"
                payload = json.dumps({"run": run_id, "n": n}).encode()
                r = await client.post(proxy.url(run_id, actor, "api", f"items/{n}"), content=payload)
                assert r.status_code == 200
                assert r.json()["path"] == f"/base/items/{n}"

        async with anyio.create_task_group() as group:
            for run_id in runs:
                group.start_soon(one_run, run_id)

    path = await _record(tmp_path, body)
    for run_id in runs:
        exchanges, blobs = _exchanges(path, run_id)
        assert [e[1] for e in exchanges] == sorted(e[1] for e in exchanges)
        assert len(exchanges) == 5
        for n, (_, _, actor, event) in enumerate(exchanges):
            assert actor == ("agent" if n % 2 == 0 else "harness")
            assert event["path"] == f"/items/{n}"
            assert blobs[event["request_blob"]] == json.dumps({"run": run_id, "n": n}).encode()
            echoed = json.loads(blobs[event["response_blob"]])
            assert echoed["headers"]["x-fae-run"] == run_id


async def test_awkward_bodies_are_kept_raw_and_decoded_defensively(tmp_path):
    seen = {}

    async def body(proxy, client):
        seen["gzip"] = await client.get(proxy.url("r1", "agent", "raw", "gzip"))
        async with client.stream("GET", proxy.url("r1", "agent", "raw", "mislabelled")) as stream:
            seen["mislabelled"] = b"".join([chunk async for chunk in stream.aiter_raw()])
        seen["big"] = await client.get(proxy.url("r1", "agent", "raw", "big"))
        async with client.stream("GET", proxy.url("r1", "agent", "raw", "sse")) as stream:
            seen["sse_chunks"] = [chunk async for chunk in stream.aiter_raw()]
        seen["error"] = await client.get(proxy.url("r1", "agent", "raw", "error-page"))
        seen["down"] = await client.get(proxy.url("r1", "agent", "down", "anything"))

    path = await _record(tmp_path, body)
    exchanges, blobs = _exchanges(path, "r1")
    by_path = {e[3]["path"]: e[3] for e in exchanges}

    gz = by_path["/gzip"]
    assert gzip.decompress(blobs[gz["response_blob"]]) == b'{"ok": true, "gzip": "yes"}'
    assert blobs[gz["decoded_blob"]] == b'{"ok": true, "gzip": "yes"}'

    bad = by_path["/mislabelled"]
    assert blobs[bad["response_blob"]] == b'{"not": "gzip at all"}'
    assert bad["decode_error"] and bad["decoded_blob"] is None
    assert seen["mislabelled"] == b'{"not": "gzip at all"}'

    assert blobs[by_path["/big"]["response_blob"]] == BIG
    assert seen["big"].content == BIG

    stream = by_path["/sse"]
    assert stream["streamed"] and stream["chunk_count"] >= 1
    assert blobs[stream["response_blob"]] == b"".join(seen["sse_chunks"])
    assert b"data: [DONE]" in blobs[stream["response_blob"]]
    with EventLog(path, read_only=True) as log:
        _, chunk_rows = log.query("SELECT payload FROM events WHERE kind = 'ChunkReceived' ORDER BY seq")
    chunks = [json.loads(p) for (p,) in chunk_rows]
    assert [c["index"] for c in chunks] == list(range(stream["chunk_count"]))
    assert b"".join(blobs[c["blob"]] for c in chunks) == blobs[stream["response_blob"]]

    page = by_path["/error-page"]
    assert page["status"] == 502 and b"nginx" in blobs[page["response_blob"]]

    down = by_path["/anything"]
    assert down["status"] is None and down["error"]
    assert seen["down"].status_code == 502


async def test_unroutable_paths_are_refused_not_forwarded(tmp_path):
    async def body(proxy, client):
        for bad in ("/elsewhere", "/run/r1/robot/api/x", "/run/r1/agent/nope/x", "/run/r1/agent/api/../x"):
            r = await client.get(proxy.base_url + bad)
            assert r.status_code == 404, bad
            assert b"fae proxy" in r.content

    path = await _record(tmp_path, body)
    exchanges, _ = _exchanges(path)
    assert exchanges == []
