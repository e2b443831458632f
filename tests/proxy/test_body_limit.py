"""Bodies over the proxy's limit are refused (413) and recorded without the body; memory stays bounded."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx
import pytest
from typer.testing import CliRunner

from fae.cli.main import app
from fae.harness.config import RecordConfig, StackConfig
from fae.harness.suite_runner import record_suite
from fae.harness.worklist import suite_specs
from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.mcp_sse import STREAM_LET_GO
from fae.recorder.recorder import Recorder
from fae.store.bodies import BODY_FILE_BYTES
from fae.store.log import EventLog
from fae.store.writer import open_writer
from fae.util.serve import serve_asgi
from tests.proxy.body_limit_child import draining_upstream
from tests.proxy.body_memory import ProxyChild
from tests.proxy.shaped_bodies import bundle_entries, bundle_pieces, tool_result_pieces
from tests.upstream import BIG, create_upstream

LIMIT = 64 * 1024
ROOT = Path(__file__).resolve().parents[2]


def _exchanges(path: Path) -> list[tuple]:
    with EventLog(path, read_only=True) as log:
        _, rows = log.query(
            "SELECT payload->>'$.path', (payload->>'$.status')::INTEGER, payload->>'$.error',"
            " payload->>'$.request_blob', (payload->>'$.request_size')::BIGINT, payload->>'$.response_blob'"
            " FROM events WHERE kind = 'HttpExchanged' ORDER BY seq"
        )
        _, sizes = log.query("SELECT max(size) FROM blobs")
    return rows, sizes[0][0]


@pytest.mark.anyio
async def test_bodies_at_the_limit_pass_and_over_it_are_refused_and_recorded(tmp_path):
    path = tmp_path / "log.duckdb"
    log = EventLog(path)
    async with serve_asgi(draining_upstream) as drain_port, serve_asgi(create_upstream()) as big_port:
        upstreams = {
            "api": Upstream("api", f"http://127.0.0.1:{drain_port}", "http"),
            "big": Upstream("big", f"http://127.0.0.1:{big_port}", "http"),
        }
        async with open_writer(log) as writer:
            async with run_proxy(upstreams, Recorder(writer), max_body_bytes=LIMIT) as proxy:
                async with httpx.AsyncClient(timeout=30) as client:
                    at = await client.post(proxy.url("r1", "agent", "api", "at"), content=b"a" * LIMIT)
                    assert at.status_code == 200 and at.json() == {"received": LIMIT}, at.text
                    over = await client.post(proxy.url("r1", "agent", "api", "over"), content=b"o" * (LIMIT + 1))
                    assert over.status_code == 413, over.text

                    async def pieces(total: int):  # no content-length: mitmproxy counts as the chunks arrive
                        for start in range(0, total, 8192):
                            yield b"c" * min(8192, total - start)

                    streamed = await client.post(
                        proxy.url("r1", "agent", "api", "chunked-under"), content=pieces(LIMIT - 100)
                    )
                    assert streamed.status_code == 200 and streamed.json() == {"received": LIMIT - 100}
                    try:  # the proxy answers 413 and closes while the client still sends: either may be seen
                        chunked = await client.post(
                            proxy.url("r1", "agent", "api", "chunked-over"), content=pieces(4 * LIMIT)
                        )
                        assert chunked.status_code == 413, chunked.text
                    except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
                        pass
                    stream = await client.post(
                        proxy.url("r1", "agent", "api", "v1/chat/completions"), params={"size": 4 * LIMIT, "stream": 1}
                    )
                    assert stream.status_code == 200 and len(stream.content) > 3 * LIMIT  # it passed, whole
                    too_big_reply = await client.get(proxy.url("r1", "agent", "big", "big"))
                    assert too_big_reply.status_code == 502, too_big_reply.status_code
                    # no Content-Length: the status and headers have gone when the body passes the limit
                    with pytest.raises(httpx.RemoteProtocolError):  # cut off: never a complete (empty) body
                        await client.get(proxy.url("r1", "agent", "big", "big-chunked"))
                    under = await client.get(
                        proxy.url("r1", "agent", "big", "big-chunked"), params={"size": LIMIT - 10}
                    )
                    assert under.status_code == 200 and under.content == BIG[: LIMIT - 10]
                    after = await client.post(proxy.url("r1", "agent", "api", "after"), content=b"x")
                    assert after.status_code == 200, after.status_code
    log.close()
    rows, biggest = _exchanges(path)
    by_path = {row[0]: row for row in rows}
    assert set(by_path) == {
        "/at",
        "/over",
        "/chunked-under",
        "/chunked-over",
        "/big",
        "/after",
        "/big-chunked",
        f"/big-chunked?size={LIMIT - 10}",
        f"/v1/chat/completions?size={4 * LIMIT}&stream=1",
    }, rows
    assert by_path["/at"][1] == 200 and by_path["/at"][4] == LIMIT and by_path["/at"][3]
    for refused in ("/over", "/chunked-over"):
        _, status, error, request_blob, size, _ = by_path[refused]
        assert status == 413 and request_blob is None and size == 0, by_path[refused]
        assert "limit" in error and "refused" in error, error
    assert f"of {LIMIT + 1} bytes" in by_path["/over"][2]
    assert by_path["/big"][1] is None and by_path["/big"][5] is None and "limit" in by_path["/big"][2]
    _, status, error, _, _, response_blob = by_path["/big-chunked"]
    assert status == 200 and response_blob is None and "limit" in error and "connection was cut" in error, error
    assert by_path[f"/big-chunked?size={LIMIT - 10}"][1] == 200 and by_path[f"/big-chunked?size={LIMIT - 10}"][5]
    assert biggest == LIMIT, "a refused body (or the too-big response, or the too-long stream) was stored"
    _, status, error, _, _, response_blob = by_path[f"/v1/chat/completions?size={4 * LIMIT}&stream=1"]
    assert status == 200 and response_blob is None and "limit" in error and "chunks are recorded" in error, error
    with EventLog(path, read_only=True) as log:  # the stream's own record: every chunk, as it passed
        _, chunks = log.query("SELECT sum((payload->>'$.size')::BIGINT) FROM events WHERE kind = 'ChunkReceived'")
    assert chunks[0][0] > 3 * LIMIT, chunks
    assert len(BIG) > LIMIT


async def framing_upstream(scope, receive, send) -> None:
    """Answers with the framing headers it was sent and how many body bytes came."""
    if scope["type"] != "http":
        return
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    headers = {k.decode(): v.decode() for k, v in scope["headers"] if k in (b"content-length", b"transfer-encoding")}
    body = json.dumps({"received": size, "headers": headers}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


@pytest.mark.anyio
async def test_a_large_chunked_request_goes_on_with_its_length_and_is_recorded_as_sent(tmp_path):
    """mitmproxy buffers a chunked request; framed as chunks again on its way upstream it was copied whole once
    more (a peak of 3x its size). It goes on with a Content-Length; the log keeps the headers the client sent."""
    path = tmp_path / "log.duckdb"
    log = EventLog(path)
    body = bytes(range(256)) * (3 * BODY_FILE_BYTES // 256)

    async def pieces(data: bytes):
        for start in range(0, len(data), 100_000):
            yield data[start : start + 100_000]

    async with serve_asgi(framing_upstream) as port, open_writer(log) as writer:
        upstreams = {"api": Upstream("api", f"http://127.0.0.1:{port}", "http")}
        async with run_proxy(upstreams, Recorder(writer), max_body_bytes=8 * BODY_FILE_BYTES) as proxy:
            async with httpx.AsyncClient(timeout=60) as client:
                large = await client.post(proxy.url("r1", "agent", "api", "large"), content=pieces(body))
                small = await client.post(proxy.url("r1", "agent", "api", "small"), content=pieces(b"s" * 5000))
    log.close()
    assert large.json() == {"received": len(body), "headers": {"content-length": str(len(body))}}, large.json()
    assert small.json() == {"received": 5000, "headers": {"transfer-encoding": "chunked"}}, small.json()
    with EventLog(path, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT payload->>'$.path', payload->'$.request_headers', payload->>'$.request_blob'"
            " FROM events WHERE kind = 'HttpExchanged' ORDER BY seq"
        )
        assert opened.blob(rows[0][2]) == body
    headers = {name.lower(): value for name, value in json.loads(rows[0][1])}
    assert rows[0][0] == "/large" and headers.get("transfer-encoding") == "chunked", rows[0][:2]
    assert "content-length" not in headers, headers


def _events(path: Path, kind: str, field: str) -> dict[str, object]:
    """One payload field of each event of ``kind``, by its exchange's path."""
    with EventLog(path, read_only=True) as log:
        _, rows = log.query(
            f"SELECT h.payload->>'$.path', e.payload->'$.{field}' FROM events e JOIN events h"
            " ON h.kind = 'HttpExchanged' AND h.payload->>'$.exchange_id' = e.payload->>'$.exchange_id'"
            f" WHERE e.kind = '{kind}'"
        )
    return {path: json.loads(value) if value is not None else None for path, value in rows}


PROCESSES = (
    (
        "opaque request",
        "opaque response",
        "opaque response, chunked",
        "refused 4x chunked request",
        "LLM request",
        "LLM response",
        "MCP request",
        "MCP response",
        "legacy-SSE MCP reply",
        "FHIR JSON request",
        "LLM streamed response",
    ),
    ("FHIR JSON response",),
    ("FHIR JSON response, chunked",),
    ("gzip response",),
)
"""The cases the test holds to 2x, each group in a fresh proxy process. One after another in one process, what
a case leaves resident counts against the next: a refused body's buffer (mitmproxy's, let go only when the
cyclic garbage collector frees its connection, then resident on the C heap until trimmed) made a JSON request
after it read 2.10x (alone 1.16x) until the proxy collected and trimmed after it. The JSON response still
leaves its parse's objects resident (a gzip response after it read 1.99x), so those two keep a process each.
A streamed response read 3.1-4.5x while each of its ~500 chunks' blobs went into DuckDB; past its first MiB they
now go to side files. Not yet bounded, measured by bench/bench_proxy.py only: a chunked request (mitmproxy joins
the pieces it buffered into one more copy, ~2.0x: docs/log.md says why it is not streamed)."""


def test_peak_memory_of_kept_and_refused_bodies_stays_under_twice_the_limit(tmp_path):
    """In the proxy processes of PROCESSES, at a 32 MiB limit: keeping each kind of body one byte under the limit
    (opaque both ways, FHIR JSON both ways, an LLM's long history, long answer and long streamed answer, an MCP
    tool's long argument and long result, a gzip response) and refusing
    a 4x-limit chunked body each grows peak RSS by at most 2x the limit over the warmed-up resident size."""
    limit = 32 * 1024 * 1024
    log = tmp_path / "rss.duckdb"  # the processes take turns writing it
    growth = {}
    answers: dict[str, httpx.Response] = {}
    opaque = b""
    for names in PROCESSES:
        with ProxyChild(log, limit, opaque=opaque, answers=answers) as child:
            cases = child.cases()
            growth.update((name, child.measure(cases[name])) for name in names)
            opaque = child.opaque
    print(
        f"limit {limit >> 20} MiB, peak RSS growth over the baseline, keeping a body of limit - 1 bytes: "
        + ", ".join(f"{name} {grown.over_baseline / limit:.2f}x" for name, grown in growth.items())
    )
    over = {
        name: round(grown.over_baseline / limit, 2) for name, grown in growth.items() if grown.over_baseline > 2 * limit
    }
    assert not over, f"peak RSS grew by more than 2x the limit: {over}"
    rows, biggest = _exchanges(log)
    by_path = {row[0]: row for row in rows}
    assert by_path["/refused"][1] == 413 and by_path["/refused"][3] is None, by_path["/refused"]
    assert by_path["/kept"][4] == limit - 1 and biggest == limit - 1
    with EventLog(log, read_only=True) as opened:  # the bodies are whole in the log, in side files
        assert opened.blob(by_path["/kept"][3]) == opaque
        assert opened.blob(by_path[f"/bytes/{limit - 1}"][5]) == answers["bytes"].content
        assert opened.blob(by_path[f"/bytes/{limit - 1}?chunked=1"][5]) == answers["chunked"].content
        _, decoded = opened.query(
            "SELECT payload->>'$.decoded_blob' FROM events WHERE kind = 'HttpExchanged'"
            " AND payload->>'$.path' LIKE '%gzip=1' AND payload->>'$.path' LIKE '%size=3%'"
        )
        assert opened.blob(decoded[0][0]) == answers["gzip"].content == b"".join(bundle_pieces(limit - 1))
    _every_chunk_is_read_back(log, answers["stream"].content, limit)
    found = _events(log, "FhirInteracted", "search_ids")
    for rest in (
        f"/Patient?size={limit - 1}",
        f"/Patient?size={limit - 1}&gzip=1",
        f"/Patient?size={limit - 1}&chunked=1",
    ):
        assert len(found[rest]) == bundle_entries(limit - 1) and found[rest][0] == "Patient/p000000001", rest
    assert _events(log, "FhirInteracted", "resource_id")["/DocumentReference"] == "d1"
    long_history = _events(log, "LlmCalled", "message_count")["/v1/chat/completions"]
    assert long_history and long_history > 10_000, long_history  # counted, not held (test_llm_large reads it)
    assert _events(log, "LlmCalled", "finish_reason")[f"/v1/chat/completions?size={limit - 1}"] == "stop"
    assert _events(log, "ToolCalled", "arguments")["/mcp"] == {"id": "n1"}  # the long note is in the body
    assert _events(log, "ToolCalled", "is_error")[f"/mcp?size={limit - 1}"] is False
    _the_legacy_sse_reply_is_stored_whole(log, limit)


def _the_legacy_sse_reply_is_stored_whole(log: Path, limit: int) -> None:
    """The long reply on a legacy-SSE stream is a body of its own, which its ToolCalled names; the stream says
    why its whole body is not kept (its chunks are)."""
    blobs = {
        path: blob
        for path, blob in _events(log, "ToolCalled", "response_blob").items()
        if path.startswith("/messages/") and path.endswith(f"&size={limit - 1}")
    }
    assert len(blobs) == 1 and all(blobs.values()), blobs
    assert not any(_events(log, "ToolCalled", "result")[path] for path in blobs)  # left out of the event
    with EventLog(log, read_only=True) as opened:
        assert opened.blob(next(iter(blobs.values()))) == b"".join(tool_result_pieces(limit - 1))
        _, streams = opened.query(
            "SELECT payload->>'$.error' FROM events WHERE kind = 'HttpExchanged' AND payload->>'$.path' = '/sse'"
        )
    assert STREAM_LET_GO in [error for (error,) in streams], streams


def _every_chunk_is_read_back(log: Path, streamed: bytes, limit: int) -> None:
    """A long stream's chunks past its first MiB are in side files, and every chunk still reads back, in order."""
    with EventLog(log, read_only=True) as opened:
        _, chunks = opened.query(
            "SELECT c.payload->>'$.blob', b.external FROM events c JOIN blobs b ON b.hash = c.payload->>'$.blob'"
            " JOIN events h ON h.kind = 'HttpExchanged' AND h.payload->>'$.exchange_id' = c.payload->>'$.exchange_id'"
            f" WHERE c.kind = 'ChunkReceived' AND h.payload->>'$.path' LIKE '%size={limit - 1}&stream=1'"
            " ORDER BY (c.payload->>'$.index')::INTEGER"
        )
        read = [opened.blob(digest) for digest, _ in chunks]
        _, others = opened.query(  # what another stream stored: the same bytes (a short event) are stored once
            "SELECT c.payload->>'$.blob' FROM events c JOIN events h ON h.kind = 'HttpExchanged'"
            " AND h.payload->>'$.exchange_id' = c.payload->>'$.exchange_id' WHERE c.kind = 'ChunkReceived'"
            f" AND h.payload->>'$.path' NOT LIKE '%size={limit - 1}&stream=1'"
        )
    elsewhere = {digest for (digest,) in others}
    assert b"".join(read) == streamed and len(streamed) > limit // 2
    before, inside = 0, set()
    for (digest, outside), data in zip(chunks, read, strict=True):  # the first MiB stays in DuckDB, as a short one
        if before < BODY_FILE_BYTES:
            assert not outside or digest in elsewhere, (digest, before)
            inside.add(digest)
        else:  # the same bytes as a chunk of the first MiB are stored once, in DuckDB
            assert outside or digest in inside or digest in elsewhere, (digest, before)
        before += len(data)
    assert sum(outside for _, outside in chunks) > len(chunks) // 2, "the long stream's chunks went into DuckDB"


def test_a_recording_refuses_bodies_over_its_limit_and_says_so(tmp_path):
    """The limit reaches the proxy of a real recording: the seed bundle is refused, recorded, and the run fails."""
    log = tmp_path / "small.duckdb"
    specs = suite_specs(["builtin-create-patient"], [0], ["gold"], 1)
    result = anyio.run(
        lambda: record_suite(log, specs, RecordConfig(stack=StackConfig(max_body_bytes=200))), backend="asyncio"
    )
    assert sum(result.statuses.values()) == 1 and not result.statuses.get("finished"), result
    rows, _ = _exchanges(log)
    refused = [row for row in rows if row[1] == 413]
    assert refused and all("200 byte limit" in row[2] and row[3] is None for row in refused), rows
    assert all(row[4] <= 200 for row in rows if row[3]), "a request body over the limit was kept"


def test_fae_record_takes_max_body_mib_and_refuses_nonsense(tmp_path):
    runner = CliRunner()
    assert "--max-body-mib" in runner.invoke(app, ["record", "--help"], terminal_width=200).output
    refused = runner.invoke(
        app, ["record", "--log", str(tmp_path / "x.duckdb"), "--task", "builtin-create-patient", "--max-body-mib", "0"]
    )
    assert refused.exit_code == 2 and "max-body-mib" in refused.output, refused.output
    assert not (tmp_path / "x.duckdb").exists()
