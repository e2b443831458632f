"""A recording proxy in its own process, for measuring its peak memory (test_body_limit.py drives it).

    python -m tests.proxy.body_limit_child LOG MAX_BODY_BYTES [--embedded-fhir]

Prints ``port PROXY_PORT PREFIX`` (PREFIX: the path of run ``r1``'s agent, its capability in it),
then answers each stdin line: ``rss`` → ``rss PEAK_KIB NOW_KIB``
(this process's peak resident size and its size now, VmHWM and VmRSS from
/proc/self/status), ``mark`` → ``marked`` once the peak is reset to the size
now (Linux's clear_refs; where that is refused the peak stays cumulative,
which only makes each step's measure stricter), ``flush`` → ``flushed``
once the log has everything, ``quit`` → exits. The upstream reads and drops
request bodies chunk by chunk, and makes up its replies a MiB at a time, so
only the proxy and the recorder hold a whole body: ``GET /bytes/N`` (N opaque
bytes), ``GET /Patient?size=N`` (a searchset Bundle of N bytes; ``&gzip=1``:
gzip-encoded; ``&chunked=1``, and on ``/bytes/N`` too: with no Content-Length),
``POST .../chat/completions?size=N`` (a completion of N bytes; ``&stream=1``:
about N bytes of server-sent events, with no Content-Length),
``POST /mcp?size=N`` (a ``tools/call`` reply of N bytes), ``GET /sse`` with
``POST /messages/?session_id=S&size=N`` (legacy MCP over SSE: that reply on the stream),
``GET /bomb/ENCODING?file=PATH``
(that file, a decompression bomb, sent with that content-encoding). It is served as four
upstreams: ``api`` (opaque), ``fhir``, ``llm`` and ``mcp``.
With ``--embedded-fhir`` the embedded FHIR server runs in a process of its
own as upstream ``real`` (kind fhir; run ``r1``'s sandbox made by its setup actor), and
``rss`` adds that process's peak and current size, so its own cost (it parses and stores what it is sent) is never
counted as the proxy's.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
import zlib
from contextlib import AsyncExitStack
from pathlib import Path
from urllib.parse import parse_qs

import anyio
import anyio.to_thread
import httpx

from fae.harness.upstream_process import upstream_process
from fae.proxy.routes import Upstream, sandbox_id
from fae.proxy.server import run_proxy
from fae.recorder.recorder import Recorder
from fae.store.log import EventLog
from fae.store.writer import open_writer
from fae.util.credentials import new_stack_key
from fae.util.serve import serve_asgi
from tests.proxy.shaped_bodies import bundle_pieces, completion_pieces, completion_stream, tool_result_pieces


async def draining_upstream(scope, receive, send) -> None:
    """Reads the whole request body without keeping it; answers how many bytes came."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["path"].startswith("/bomb/"):  # made by the driver: making one here would change this heap's state
        encoding = scope["path"].removeprefix("/bomb/")
        path = Path(scope.get("query_string", b"").decode().removeprefix("file="))
        await _send_pieces([path.read_bytes()], send, None, [(b"content-encoding", encoding.encode())])
        return
    query = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
    if scope["path"].startswith("/bytes/"):
        await _made_up_reply(int(scope["path"].removeprefix("/bytes/")), send, chunked=bool(query.get("chunked")))
        return
    if scope["path"] == "/Patient" and scope["method"] == "GET":
        if query.get("chunked"):  # no content-length: sent with chunked transfer-encoding, as many servers do
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/fhir+json")]}
            )
            for piece in bundle_pieces(int(query["size"])):
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await _bundle_reply(int(query["size"]), bool(query.get("gzip")), send)
        return
    if scope["path"] == "/sse":
        await _legacy_sse_stream(send)
        return
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    if scope["path"] == "/messages/":  # legacy MCP over SSE: accepted here, answered on the session's stream
        _SESSIONS[query["session_id"]].put_nowait(int(query.get("size", "300")))
        await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"8")]})
        await send({"type": "http.response.body", "body": b"Accepted"})
        return
    if scope["path"].endswith("/mcp"):
        reply_size = int(query.get("size", "300"))
        await _send_pieces(tool_result_pieces(reply_size), send, reply_size)
        return
    if scope["path"].endswith("/chat/completions") and query.get("stream"):  # no content-length: streamed
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for piece in completion_stream(int(query.get("size", "300"))):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return
    if scope["path"].endswith("/chat/completions"):
        reply_size = int(query.get("size", "300"))  # made a MiB at a time: a list of its pieces held it whole
        await _send_pieces(completion_pieces(reply_size), send, reply_size)
        return
    body = f'{{"received": {size}}}'.encode()
    if scope["path"][1:2].isupper():  # a FHIR create: answered with the resource's id and version
        body = b'{"resourceType":"DocumentReference","id":"d1","meta":{"versionId":"1"}}'
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


_SESSIONS: dict[str, asyncio.Queue[int]] = {}


async def _legacy_sse_stream(send) -> None:
    """A legacy MCP SSE session: its endpoint event, then the reply to the one call POSTed to it (a ``tools/call``
    reply of the size that POST asked for, as one event sent a MiB at a time), then the stream ends."""
    session = uuid.uuid4().hex
    queue = _SESSIONS[session] = asyncio.Queue()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    await send(
        {
            "type": "http.response.body",
            "more_body": True,
            "body": f"event: endpoint\r\ndata: /messages/?session_id={session}\r\n\r\n".encode(),
        }
    )
    size = await queue.get()
    del _SESSIONS[session]
    await send({"type": "http.response.body", "body": b"event: message\r\ndata: ", "more_body": True})
    for piece in tool_result_pieces(size):
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b"\r\n\r\n", "more_body": False})


def _status_kib(field: str, pid: int | None = None) -> int:
    """A size from /proc/self/status (getrusage's peak is not reset by clear_refs once a thread has exited)."""
    for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


async def _made_up_reply(total: int, send, chunked: bool = False) -> None:
    """``total`` bytes that do not compress (as an already-compressed upload would not), sent a MiB at a time
    (``chunked``: with no Content-Length)."""
    length = [] if chunked else [(b"content-length", str(total).encode())]
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/octet-stream"), *length],
        }
    )
    sent = 0
    while sent < total:
        piece = os.urandom(min(1 << 20, total - sent))
        sent += len(piece)
        await send({"type": "http.response.body", "body": piece, "more_body": sent < total})


async def _bundle_reply(total: int, gzipped: bool, send) -> None:
    """A searchset Bundle of ``total`` bytes, made (and gzip-encoded: twice, to know its length) a MiB at a time."""
    if not gzipped:
        await _send_pieces(bundle_pieces(total), send, total)
        return

    def encoded():
        packer = zlib.compressobj(6, zlib.DEFLATED, 31)
        for piece in bundle_pieces(total):
            yield packer.compress(piece)
        yield packer.flush()

    length = sum(len(p) for p in encoded())
    await _send_pieces(encoded(), send, length, [(b"content-encoding", b"gzip")])


async def _send_pieces(pieces, send, length: int | None = None, extra: list | None = None) -> None:
    pieces = iter(pieces)
    headers = [(b"content-type", b"application/json"), *(extra or [])]
    if length is None:
        pieces = list(pieces)
        length = sum(len(p) for p in pieces)
        pieces = iter(pieces)
    await send(
        {"type": "http.response.start", "status": 200, "headers": [*headers, (b"content-length", str(length).encode())]}
    )
    for piece in pieces:
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def main(log_path: str, max_body: int, embedded_fhir: bool) -> None:
    log = EventLog(Path(log_path))
    async with AsyncExitStack() as stack:
        port = await stack.enter_async_context(serve_asgi(draining_upstream))
        stand_in = f"http://127.0.0.1:{port}"
        upstreams = {
            "api": Upstream("api", stand_in, "http"),
            "fhir": Upstream("fhir", stand_in, "fhir"),
            "llm": Upstream("llm", stand_in, "llm"),
            "mcp": Upstream("mcp", stand_in, "mcp"),
        }
        real_pid = None
        key = new_stack_key()
        if embedded_fhir:
            real = await stack.enter_async_context(upstream_process(serve_fhir=True, embedded=True, key=key))
            real_pid = real.pid
            upstreams["real"] = Upstream("real", f"http://127.0.0.1:{real.servers['fhir'][1]}", "fhir", embedded=True)
        writer = await stack.enter_async_context(open_writer(log))
        proxy = await stack.enter_async_context(
            run_proxy(upstreams, Recorder(writer), max_body_bytes=max_body, stack_key=key)
        )
        if embedded_fhir:
            async with httpx.AsyncClient() as client:
                made = await client.post(proxy.url("r1", "setup", "real", f"sandbox?id={sandbox_id('r1')}"))
                assert made.status_code == 201, made.text
        agent = proxy.url("r1", "agent", "api").removeprefix(proxy.base_url).removesuffix("api/")
        print(f"port {proxy.port} {agent}", flush=True)
        while True:
            line = (await anyio.to_thread.run_sync(sys.stdin.readline)).strip()
            if line == "rss":
                extra = f" {_status_kib('VmHWM', real_pid)} {_status_kib('VmRSS', real_pid)}" if real_pid else ""
                print(f"rss {_status_kib('VmHWM')} {_status_kib('VmRSS')}{extra}", flush=True)
            elif line == "mark":
                for pid in ("self", *([str(real_pid)] if real_pid else [])):
                    try:
                        Path(f"/proc/{pid}/clear_refs").write_text("5")
                    except OSError:
                        pass
                print("marked", flush=True)
            elif line == "flush":
                await writer.flush()
                print("flushed", flush=True)
            else:
                break
    log.close()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]), "--embedded-fhir" in sys.argv[3:], backend="asyncio")
