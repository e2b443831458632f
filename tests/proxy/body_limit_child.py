"""A recording proxy in its own process, for measuring its peak memory (test_body_limit.py drives it).

    python -m tests.proxy.body_limit_child LOG MAX_BODY_BYTES

Prints ``port PROXY_PORT``, then answers each stdin line: ``rss`` → ``rss PEAK_KIB NOW_KIB``
(this process's peak resident size and its size now, VmHWM and VmRSS from
/proc/self/status), ``mark`` → ``marked`` once the peak is reset to the size
now (Linux's clear_refs; where that is refused the peak stays cumulative,
which only makes each step's measure stricter), ``flush`` → ``flushed``
once the log has everything, ``quit`` → exits. The upstream reads and drops
request bodies chunk by chunk, and makes up ``GET /bytes/N`` replies (N bytes
with a Content-Length) a MiB at a time, so only the proxy and the recorder
hold a whole body.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import anyio.to_thread

from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.recorder import Recorder
from fae.store.log import EventLog
from fae.store.writer import open_writer
from fae.util.serve import serve_asgi


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
    if scope["path"].startswith("/bytes/"):
        await _made_up_reply(int(scope["path"].removeprefix("/bytes/")), send)
        return
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = f'{{"received": {size}}}'.encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _status_kib(field: str) -> int:
    """A size from /proc/self/status (getrusage's peak is not reset by clear_refs once a thread has exited)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


async def _made_up_reply(total: int, send) -> None:
    """``total`` bytes that do not compress (as an already-compressed upload would not), sent a MiB at a time."""
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/octet-stream"),
                            (b"content-length", str(total).encode())]})
    sent = 0
    while sent < total:
        piece = os.urandom(min(1 << 20, total - sent))
        sent += len(piece)
        await send({"type": "http.response.body", "body": piece, "more_body": sent < total})


async def main(log_path: str, max_body: int) -> None:
    log = EventLog(Path(log_path))
    async with serve_asgi(draining_upstream) as port:
        upstreams = {"api": Upstream("api", f"http://127.0.0.1:{port}", "http")}
        async with open_writer(log) as writer:
            async with run_proxy(upstreams, Recorder(writer), max_body_bytes=max_body) as proxy:
                print(f"port {proxy.port}", flush=True)
                while True:
                    line = (await anyio.to_thread.run_sync(sys.stdin.readline)).strip()
                    if line == "rss":
                        print(f"rss {_status_kib('VmHWM')} {_status_kib('VmRSS')}", flush=True)
                    elif line == "mark":
                        try:
                            Path("/proc/self/clear_refs").write_text("5")
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
    anyio.run(main, sys.argv[1], int(sys.argv[2]), backend="asyncio")
