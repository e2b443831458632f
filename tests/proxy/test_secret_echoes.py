"""Secrets an upstream echoes back are scrubbed too: from bodies, chunks, gzip, events, run errors and exports.

A real upstream on 127.0.0.1 echoes whatever credentials it was sent, in every
shape we could think of; then every place a byte of the recording can land is
searched, decoded where it is compressed (DuckDB's own storage, gzip blobs and
Parquet are read back through DuckDB, so a compressed copy cannot hide a leak).
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, quote_plus

import duckdb
import httpx
import pytest
import uvicorn
import zstandard
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from typer.testing import CliRunner

from fae.cli.main import app
from fae.proxy.exchange import Chunk, Exchange
from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.recorder import Recorder
from fae.recorder.redact import Redactor
from fae.store import events as ev
from fae.store.export import export_parquet
from fae.store.log import EventLog, RunRow, RunUpdate
from fae.store.secrets import SecretValues
from fae.store.writer import LogWriter, Stamped, open_writer
from fae.util.serve import serve_asgi

BEARER = "sk-live-BEARERSECRET-0001"
API_KEY_HEADER = "azure-APIKEYHEADER-0002"
X_API_KEY = "anthropic-XAPIKEY-0003"
COOKIE_A = "COOKIESESSION-0004"
COOKIE_B = "COOKIECSRF-0005"
BASIC_USER, BASIC_PASS = "alice", "BASICPASSWORD-0006"
ACCESS_TOKEN = "ACCESSTOKEN-0007"
API_KEY_PARAM = "APIKEYPARAM-0008"
SEMICOLON_KEY = "SEMICOLONKEY-0009"
ENCODED_TOKEN = "ENC/TOKEN+0010 with=odd&chars"
CUSTOM_HEADER = "CUSTOMHEADER-0011"
JSON_ESCAPED = 'QUOTE"BACK\\SLASH-0012'
SSE_KEY = "sk-live-SSESECRET-0013"
GZIP_KEY = "sk-live-GZIPSECRET-0014"
LOCATION_TOKEN = "LOCATIONTOKEN-0015"
CONFIGURED_KEY = "sk-proj-CONFIGUREDKEY-0016"
SET_COOKIE = "SETCOOKIESESSION-0017"
BASIC_B64 = base64.b64encode(f"{BASIC_USER}:{BASIC_PASS}".encode()).decode()

# every secret form that must not be found anywhere; each is sent once and echoed back at least once
FORMS = [
    BEARER,
    API_KEY_HEADER,
    X_API_KEY,
    COOKIE_A,
    COOKIE_B,
    BASIC_PASS,
    f"{BASIC_USER}:{BASIC_PASS}",
    BASIC_B64,
    ACCESS_TOKEN,
    API_KEY_PARAM,
    SEMICOLON_KEY,
    ENCODED_TOKEN,
    quote(ENCODED_TOKEN, safe=""),
    quote_plus(ENCODED_TOKEN),
    CUSTOM_HEADER,
    JSON_ESCAPED,
    json.dumps(JSON_ESCAPED)[1:-1],
    SSE_KEY,
    GZIP_KEY,
    LOCATION_TOKEN,
    CONFIGURED_KEY,
    SET_COOKIE,
]


def _echo_payload(request: Request, body: bytes) -> dict:
    payload = {
        "url": str(request.url),
        "query": request.url.query,
        "params": dict(request.query_params),
        "headers": dict(request.headers),
        "body": body.decode("utf-8", "replace"),
    }
    scheme, _, credential = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "basic":  # as a server that says who it refused does
        user_pass = base64.b64decode(credential).decode()
        payload["refused"] = {"credentials": user_pass, "password": user_pass.partition(":")[2]}
    return payload


async def echo(request: Request) -> Response:
    return JSONResponse(
        _echo_payload(request, await request.body()), headers={"set-cookie": f"session={SET_COOKIE}; HttpOnly"}
    )


async def openai_401(request: Request) -> Response:
    key = request.headers.get("authorization", "").removeprefix("Bearer ")
    return JSONResponse(
        {
            "error": {
                "message": f"Incorrect API key provided: {key}. You can find your API key at "
                f"https://platform.example/account/api-keys.",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        },
        status_code=401,
    )


async def fhir_search(request: Request) -> Response:
    return JSONResponse(
        {
            "resourceType": "Bundle",
            "type": "searchset",
            "total": 0,
            "link": [{"relation": "self", "url": str(request.url)}],
        }
    )


async def sse_echo(request: Request) -> StreamingResponse:
    key = request.headers.get("x-api-key", "")

    async def chunks():
        for piece in ("You sent ", key, " as your key"):
            yield f"data: {json.dumps({'choices': [{'delta': {'content': piece}}]})}\n\n".encode()
            await asyncio.sleep(0.005)
        yield b"data: [DONE]\n\n"

    return StreamingResponse(chunks(), media_type="text/event-stream")


async def gzip_echo(request: Request) -> Response:
    body = json.dumps(_echo_payload(request, await request.body())).encode()
    return Response(gzip.compress(body), media_type="application/json", headers={"content-encoding": "gzip"})


async def redirect(request: Request) -> Response:
    token = request.query_params.get("token", "")
    return Response(status_code=302, headers={"location": f"http://127.0.0.1/next?token={token}&page=2"})


async def mcp(request: Request) -> Response:
    call = json.loads(await request.body())
    text = json.dumps({"echo": call["params"]["arguments"]})
    return JSONResponse(
        {"jsonrpc": "2.0", "id": call["id"], "result": {"content": [{"type": "text", "text": text}], "isError": False}}
    )


def echoing_upstream() -> Starlette:
    return Starlette(
        routes=[
            Route("/v1/chat/completions", openai_401, methods=["POST"]),
            Route("/fhir/Patient", fhir_search),
            Route("/sse", sse_echo, methods=["POST"]),
            Route("/gzip", gzip_echo),
            Route("/redirect", redirect),
            Route("/mcp", mcp, methods=["POST"]),
            Route("/{path:path}", echo, methods=["GET", "POST"]),
        ]
    )


async def _traffic(client: httpx.AsyncClient, proxy) -> None:
    def url(upstream: str, rest: str) -> str:
        return proxy.url("r1", "agent", upstream, rest)

    sent = [
        client.post(
            url("llm", "chat/completions"),
            headers={"authorization": f"Bearer {BEARER}"},
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        ),
        client.get(
            url("web", "echo"),
            headers={
                "api-key": API_KEY_HEADER,
                "x-api-key": X_API_KEY,
                "cookie": f"session={COOKIE_A}; csrf={COOKIE_B}",
                "x-custom-token": CUSTOM_HEADER,
            },
        ),
        client.get(url("web", "echo"), auth=(BASIC_USER, BASIC_PASS)),
        client.get(url("fhir", f"fhir/Patient?name=x&access_token={ACCESS_TOKEN}")),
        client.get(url("web", f"echo?api_key={API_KEY_PARAM}&ok=1")),
        client.get(url("web", f"echo?a=1;key={SEMICOLON_KEY};b=2")),
        client.get(url("web", "echo"), params={"token": ENCODED_TOKEN}),
        client.get(url("web", "echo"), headers={"x-api-key": JSON_ESCAPED}),
        client.post(url("web", "sse"), headers={"x-api-key": SSE_KEY}, content=b"{}"),
        client.get(url("web", "gzip"), headers={"authorization": f"Bearer {GZIP_KEY}"}),
        client.get(url("web", f"redirect?token={LOCATION_TOKEN}")),
    ]
    for request in sent:  # one at a time: each later echo may rely on a secret learned earlier
        reply = await request
        assert reply.status_code in (200, 302, 401), reply.text
    # an agent passes a token it was given to a tool: the tool call is stored with it scrubbed
    reply = await client.post(
        url("mcp", "mcp"),
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "fetch",
                "arguments": {"url": f"https://x.example/?access_token={ACCESS_TOKEN}", "bearer": BEARER},
            },
        },
    )
    assert reply.status_code == 200, reply.text


async def _record(path: Path, scrub: bool) -> tuple[Path, Path]:
    """Record the echoing traffic and a harness-style run failure; export Parquet. Returns (log, parquet dir)."""
    path.parent.mkdir()
    log = EventLog(path)
    redactor = Redactor.with_extra(headers=["x-custom-token"], values=[CONFIGURED_KEY])
    async with serve_asgi(echoing_upstream()) as port:
        base = f"http://127.0.0.1:{port}"
        upstreams = {
            "llm": Upstream("llm", f"{base}/v1", "llm"),
            "web": Upstream("web", base, "http"),
            "fhir": Upstream("fhir", base, "fhir"),
            "mcp": Upstream("mcp", base, "mcp"),
        }
        async with open_writer(log) as writer:
            recorder = Recorder(writer, redactor)
            if not scrub:
                writer.secrets = SecretValues()  # the guard: what leaks without the writer's scrub
            await writer.write(runs=[RunRow("r1", "t", 0, "langchain", 0, started_at=datetime.now(UTC))])
            async with run_proxy(upstreams, recorder) as proxy:
                async with httpx.AsyncClient() as client:
                    await _traffic(client, proxy)
            # what the harness writes when the agent's LLM client fails: the key the upstream echoed
            reason = f"Error code: 401 - Incorrect API key provided: {BEARER}; configured key {CONFIGURED_KEY}"
            await writer.write(
                events=[Stamped("r1", ev.RunFailed(status="errored", reason=reason))],
                updates=[RunUpdate("r1", "errored", ended_at=datetime.now(UTC), error=reason)],
            )
    log.close()
    parquet = path.parent / "parquet"
    export_parquet(path, parquet)
    return path, parquet


def _texts(log: Path, parquet: Path) -> dict[str, bytes]:
    """Every place a secret could be, as bytes: raw files, and their decoded contents."""
    found: dict[str, bytes] = {}
    for file in log.parent.rglob("*"):
        if file.is_file():
            found[f"file {file.name}"] = file.read_bytes()
    con = duckdb.connect(str(log), read_only=True)
    for (table,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall():
        rows = con.execute(f'SELECT * FROM "{table}"').fetchall()
        found[f"table {table}"] = repr(rows).encode()
    for (data,) in con.execute("SELECT data FROM blobs").fetchall():
        data = bytes(data)
        if data[:2] == b"\x1f\x8b":
            found.setdefault("gunzipped blobs", b"")
            found["gunzipped blobs"] += gzip.decompress(data)
    con.close()
    reader = duckdb.connect()
    for file in parquet.glob("*.parquet"):
        found[f"parquet {file.name}"] = repr(reader.execute(f"SELECT * FROM '{file.as_posix()}'").fetchall()).encode()
    reader.close()
    return found


def _leaks(places: dict[str, bytes]) -> list[tuple[str, str]]:
    leaks = []
    for form in FORMS:
        needles = {form.encode(), form.encode("unicode_escape")}
        for place, data in places.items():
            if any(n in data for n in needles):
                leaks.append((form, place))
    return leaks


@pytest.mark.anyio
async def test_no_echoed_secret_is_stored_anywhere(tmp_path):
    log, parquet = await _record(tmp_path / "rec" / "log.duckdb", scrub=True)
    places = _texts(log, parquet)
    assert not _leaks(places), _leaks(places)
    # what was recorded is still useful: the echoes are there, with the marker where secrets were
    with EventLog(log, read_only=True) as done:
        _, llm = done.query("SELECT status, error FROM llm_calls")
        _, tools = done.query("SELECT arguments, result FROM tool_calls")
        _, runs = done.query("SELECT status, error FROM runs")
        _, chunks = done.query("SELECT count(*) FROM events WHERE kind = 'ChunkReceived'")
    assert llm[0][0] == 401 and "Incorrect API key provided: [redacted]" in llm[0][1], llm
    assert "[redacted]" in tools[0][0] and "x.example" in tools[0][0], tools
    assert runs[0][0] == "errored" and "[redacted]" in runs[0][1], runs
    assert chunks[0][0] >= 3, chunks
    assert b"[redacted]" in places["gunzipped blobs"] and b'"headers"' in places["gunzipped blobs"]


@pytest.mark.anyio
async def test_the_search_finds_echoed_secrets_without_the_writer_scrub(tmp_path):
    """Guards the test above: header and query redaction alone leave the echoes in the log."""
    log, parquet = await _record(tmp_path / "rec" / "log.duckdb", scrub=False)
    leaked = {form for form, _ in _leaks(_texts(log, parquet))}
    # the Location header is redacted as a header and the gzip body re-encoded by the recorder; the
    # %20 and raw forms of the odd secrets are not what this upstream echoes; the rest only the writer catches
    unechoed = {LOCATION_TOKEN, GZIP_KEY, quote(ENCODED_TOKEN, safe=""), JSON_ESCAPED}
    assert leaked == set(FORMS) - unechoed, sorted(set(FORMS) - unechoed - leaked)


def test_the_journal_holds_no_secret(tmp_path):
    """A batch is scrubbed before it is journaled, not only before DuckDB gets it."""
    log = EventLog(tmp_path / "j.duckdb")
    writer = LogWriter(log)  # no flusher: the rows stay in the journal segment
    writer.secrets.add(BEARER)
    body = json.dumps({"error": f"key {BEARER}"}).encode()
    writer.submit(
        events=[Stamped("r1", ev.AnswerGiven(text=f"the key is {BEARER}"))],
        blobs={"0" * 64: body},
        updates=[RunUpdate("r1", "errored", error=f"401 {BEARER}")],
    )
    writer.journal.close()
    (segment,) = [p for p in tmp_path.iterdir() if ".journal-" in p.name]
    data = segment.read_bytes()
    assert BEARER.encode() not in data and b"[redacted]" in data
    log.close()
    with EventLog(tmp_path / "j.duckdb") as reopened:  # the journal is applied on open
        _, rows = reopened.query("SELECT payload FROM events")
        _, blobs = reopened.query("SELECT hash, data FROM blobs")
    assert "[redacted]" in rows[0][0] and BEARER not in rows[0][0]
    assert blobs and all(BEARER.encode() not in bytes(d) for _, d in blobs)
    assert "0" * 64 not in {h for h, _ in blobs}, "a scrubbed body keeps the hash of its secret-bearing original"


@pytest.fixture
def refusing_llm() -> Iterator[str]:
    """An OpenAI-compatible server on 127.0.0.1, in its own thread, that refuses every key by echoing it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(
            Starlette(routes=[Route("/v1/chat/completions", openai_401, methods=["POST"])]),
            log_level="warning",
            access_log=False,
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(2000):
        if server.started:
            break
        time.sleep(0.01)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    server.should_exit = True
    thread.join(10)


@pytest.mark.parametrize("how", ["option", "env"])
def test_the_configured_api_key_echoed_in_an_llm_error_reaches_neither_log_nor_output(tmp_path, refusing_llm, how):
    log = tmp_path / "cli" / "log.duckdb"
    log.parent.mkdir()
    runner = CliRunner()
    args = [
        "record",
        "--log",
        str(log),
        "--task",
        "builtin-create-patient",
        "--agent",
        "langchain:baseline@some-model",
        "--llm-url",
        refusing_llm,
    ]
    env = {"OPENAI_API_KEY": CONFIGURED_KEY} if how == "env" else {}
    recorded = runner.invoke(app, args + (["--api-key", CONFIGURED_KEY] if how == "option" else []), env=env)
    assert recorded.exit_code == 0, recorded.output
    outputs = [recorded.output]
    for command in (
        ["sql", "--log", str(log), "SELECT status, error FROM runs"],
        ["sql", "--log", str(log), "--json", "SELECT payload FROM events WHERE kind = 'RunFailed'"],
        ["sql", "--log", str(log), "--json", "SELECT error FROM llm_calls"],
        ["export", "--log", str(log), "--parquet", str(tmp_path / "cli" / "parquet")],
    ):
        shown = runner.invoke(app, command)
        assert shown.exit_code == 0, shown.output
        outputs.append(shown.output)
    assert "errored" in outputs[1] and "Incorrect API key provided: [redacted]" in outputs[1], outputs[1]
    places = _texts(log, tmp_path / "cli" / "parquet")
    places.update({f"output {i}": text.encode() for i, text in enumerate(outputs)})
    leaks = [place for place, data in places.items() if CONFIGURED_KEY.encode() in data]
    assert not leaks, leaks


def test_a_long_streams_chunks_in_side_files_hold_no_secret(tmp_path):
    """Past a stream's first MiB its chunks go to side files: scrubbed as the journal is, and read back whole."""
    log = EventLog(tmp_path / "s.duckdb")
    writer = LogWriter(log)  # no flusher: the journal is applied when the log is opened again
    recorder = Recorder(writer)  # the writer scrubs what the recorder's redactor knows
    writer.secrets.add(BEARER)
    exchange = Exchange(
        exchange_id="e1",
        run_id="r1",
        actor="agent",
        upstream="llm",
        kind="llm",
        method="POST",
        url="http://u/v1/chat/completions",
        path="/v1/chat/completions",
        request_headers=[],
        request_body=None,
        started_at=time.time(),
        started_mono_ns=time.monotonic_ns(),
    )
    pieces = [f"data: {index} the key is {BEARER}\n\n".encode() + b"x" * 300_000 for index in range(6)]
    for index, piece in enumerate(pieces, start=1):  # index 0 would learn the request's secrets: none here
        recorder.chunk(exchange, index, Chunk(offset_ms=index, data=piece))
        exchange.chunk_bytes += len(piece)
    writer.journal.close()
    log.close()
    with EventLog(tmp_path / "s.duckdb") as reopened:  # the journal is applied on open
        _, rows = reopened.query(
            "SELECT c.payload->>'$.blob', b.external FROM events c JOIN blobs b ON b.hash = c.payload->>'$.blob'"
            " WHERE c.kind = 'ChunkReceived' ORDER BY (c.payload->>'$.index')::INTEGER"
        )
        read = [reopened.blob(digest) for digest, _ in rows]
    assert [outside for _, outside in rows] == [False] * 4 + [True] * 2, rows  # 4 x 300 KB pass the first MiB
    assert read == [piece.replace(BEARER.encode(), b"[redacted]") for piece in pieces]
    side_files = list((tmp_path / "s.duckdb.bodies").rglob("*.zst"))
    unpacked = [zstandard.ZstdDecompressor().stream_reader(p.read_bytes()).read() for p in side_files]
    assert len(unpacked) == 2 and all(b"[redacted]" in u and BEARER.encode() not in u for u in unpacked)
