"""Bodies over the proxy's limit are refused (413) and recorded without the body; memory stays bounded."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from typer.testing import CliRunner

from fae.cli.main import app
from fae.harness.suite_runner import plan_suite, record_suite
from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.recorder import Recorder
from fae.store.log import EventLog
from fae.store.writer import open_writer
from fae.util.serve import serve_asgi
from tests.proxy.body_limit_child import draining_upstream
from tests.upstream import BIG, create_upstream

LIMIT = 64 * 1024
ROOT = Path(__file__).resolve().parents[2]


def _exchanges(path: Path) -> list[tuple]:
    with EventLog(path, read_only=True) as log:
        _, rows = log.query(
            "SELECT payload->>'$.path', (payload->>'$.status')::INTEGER, payload->>'$.error',"
            " payload->>'$.request_blob', (payload->>'$.request_size')::BIGINT, payload->>'$.response_blob'"
            " FROM events WHERE kind = 'HttpExchanged' ORDER BY seq")
        _, sizes = log.query("SELECT max(size) FROM blobs")
    return rows, sizes[0][0]


@pytest.mark.anyio
async def test_bodies_at_the_limit_pass_and_over_it_are_refused_and_recorded(tmp_path):
    path = tmp_path / "log.duckdb"
    log = EventLog(path)
    async with serve_asgi(draining_upstream) as drain_port, serve_asgi(create_upstream()) as big_port:
        upstreams = {"api": Upstream("api", f"http://127.0.0.1:{drain_port}", "http"),
                     "big": Upstream("big", f"http://127.0.0.1:{big_port}", "http")}
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

                    streamed = await client.post(proxy.url("r1", "agent", "api", "chunked-under"),
                                                 content=pieces(LIMIT - 100))
                    assert streamed.status_code == 200 and streamed.json() == {"received": LIMIT - 100}
                    try:  # the proxy answers 413 and closes while the client still sends: either may be seen
                        chunked = await client.post(proxy.url("r1", "agent", "api", "chunked-over"),
                                                    content=pieces(4 * LIMIT))
                        assert chunked.status_code == 413, chunked.text
                    except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
                        pass
                    too_big_reply = await client.get(proxy.url("r1", "agent", "big", "big"))
                    assert too_big_reply.status_code == 502, too_big_reply.status_code
                    after = await client.post(proxy.url("r1", "agent", "api", "after"), content=b"x")
                    assert after.status_code == 200, after.status_code
    log.close()
    rows, biggest = _exchanges(path)
    by_path = {row[0]: row for row in rows}
    assert set(by_path) == {"/at", "/over", "/chunked-under", "/chunked-over", "/big", "/after"}, rows
    assert by_path["/at"][1] == 200 and by_path["/at"][4] == LIMIT and by_path["/at"][3]
    for refused in ("/over", "/chunked-over"):
        _, status, error, request_blob, size, _ = by_path[refused]
        assert status == 413 and request_blob is None and size == 0, by_path[refused]
        assert "limit" in error and "refused" in error, error
    assert f"of {LIMIT + 1} bytes" in by_path["/over"][2]
    assert by_path["/big"][1] is None and by_path["/big"][5] is None and "limit" in by_path["/big"][2]
    assert biggest == LIMIT, "a refused body (or the too-big response) was stored"
    assert len(BIG) > LIMIT


def _raw_post(port: int, path: str, total: int) -> bytes:
    """POST ``total`` bytes chunked (so the proxy cannot refuse from a header); stop sending once it answers."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
    pending = b""
    body = (b"z" * (1 << 20) for _ in range(total >> 20))
    done = False
    reply = b""
    try:
        while True:
            readable, writable, _ = select.select([sock], [] if done and not pending else [sock], [], 120)
            if not readable and not writable:
                raise AssertionError("the proxy neither read the body nor answered for 120 s")
            if readable:  # an answer before the body was all sent: the refusal
                chunk = sock.recv(65536)
                reply += chunk
                if not chunk or b"\r\n\r\n" in reply:
                    return reply
                continue
            if not pending:
                piece = next(body, None)
                if piece is None and done:
                    continue
                pending = b"0\r\n\r\n" if piece is None else f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
                done = piece is None
            pending = pending[sock.send(pending):]
    except (BrokenPipeError, ConnectionResetError):
        return reply  # closed while the body was still coming
    finally:
        sock.close()


def test_peak_memory_of_kept_and_refused_bodies_stays_under_twice_the_limit(tmp_path):
    """In a process of its own, at a 32 MiB limit: keeping a request body and then a response body one byte under
    the limit, and refusing a 4x-limit chunked body, each grows peak RSS over the warmed-up resident size by at
    most 2x the limit (measured 1.1x-1.3x: the body's pieces, held once, and the side file's compressor)."""
    limit = 32 * 1024 * 1024
    log = tmp_path / "rss.duckdb"
    child = subprocess.Popen([sys.executable, "-m", "tests.proxy.body_limit_child", str(log), str(limit)],
                             cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(command: str) -> str:
        child.stdin.write(command + "\n")
        child.stdin.flush()
        return child.stdout.readline().strip()

    def step(action) -> int:
        """The peak resident size during ``action`` (and the flush after it), over the baseline."""
        assert ask("mark") == "marked"
        action()
        assert ask("flush") == "flushed"
        return int(ask("rss").split()[1]) * 1024 - baseline

    def keep_request() -> None:
        kept = httpx.post(url + "kept", content=request_body, timeout=120)
        assert kept.status_code == 200 and kept.json() == {"received": limit - 1}, kept.text

    def keep_response() -> None:
        answered.append(httpx.get(url + f"bytes/{limit - 1}", timeout=120))
        assert answered[0].status_code == 200 and len(answered[0].content) == limit - 1

    def refuse() -> None:
        reply = _raw_post(port, "/run/r1/agent/api/refused", 4 * limit)
        assert not reply or reply.startswith(b"HTTP/1.1 413"), reply[:200]

    request_body = os.urandom(limit - 1)  # made here: the child never holds the client's copy
    answered: list[httpx.Response] = []
    try:
        port = int(child.stdout.readline().split()[1])
        url = f"http://127.0.0.1:{port}/run/r1/agent/api/"
        for _ in range(3):  # warm every path once, so the baseline includes it
            assert httpx.post(url + "warm", content=b"w" * 65536).status_code == 200
            assert httpx.get(url + "bytes/65536").status_code == 200
        assert ask("flush") == "flushed"
        baseline = int(ask("rss").split()[2]) * 1024  # resident now: start-up's own peak is no cushion
        kept_request, kept_response, refused = step(keep_request), step(keep_response), step(refuse)
    finally:
        ask("quit")
        child.wait(60)
    print(f"limit {limit >> 20} MiB, peak RSS growth over the baseline: keeping a request body of limit - 1 bytes "
          f"{kept_request / limit:.2f}x the limit, a response body {kept_response / limit:.2f}x; refusing a "
          f"{4 * limit >> 20} MiB chunked body {refused / limit:.2f}x")
    assert kept_request <= 2 * limit, f"keeping a request body grew RSS by {kept_request / limit:.2f}x the limit"
    assert kept_response <= 2 * limit, f"keeping a response body grew RSS by {kept_response / limit:.2f}x the limit"
    assert refused <= 2 * limit, f"refusing grew RSS by {refused / limit:.2f}x the limit"
    rows, biggest = _exchanges(log)
    by_path = {row[0]: row for row in rows}
    assert by_path["/refused"][1] == 413 and by_path["/refused"][3] is None, by_path["/refused"]
    assert by_path["/kept"][4] == limit - 1 and biggest == limit - 1
    with EventLog(log, read_only=True) as opened:  # both bodies are whole in the log, in side files
        assert opened.blob(by_path["/kept"][3]) == request_body
        assert opened.blob(by_path[f"/bytes/{limit - 1}"][5]) == answered[0].content
        assert opened.query("SELECT count(*) FROM blobs WHERE external AND size = ?", [limit - 1])[1] == [(2,)]


def test_a_recording_refuses_bodies_over_its_limit_and_says_so(tmp_path):
    """The limit reaches the proxy of a real recording: the seed bundle is refused, recorded, and the run fails."""
    log = tmp_path / "small.duckdb"
    specs = plan_suite(["builtin-create-patient"], [0], ["gold"], 1)
    result = anyio.run(lambda: record_suite(log, specs, max_body_bytes=200), backend="asyncio")
    assert sum(result.statuses.values()) == 1 and not result.statuses.get("finished"), result
    rows, _ = _exchanges(log)
    refused = [row for row in rows if row[1] == 413]
    assert refused and all("200 byte limit" in row[2] and row[3] is None for row in refused), rows
    assert all(row[4] <= 200 for row in rows if row[3]), "a request body over the limit was kept"


def test_fae_record_takes_max_body_mib_and_refuses_nonsense(tmp_path):
    runner = CliRunner()
    assert "--max-body-mib" in runner.invoke(app, ["record", "--help"], terminal_width=200).output
    refused = runner.invoke(app, ["record", "--log", str(tmp_path / "x.duckdb"), "--task", "builtin-create-patient",
                                  "--max-body-mib", "0"])
    assert refused.exit_code == 2 and "max-body-mib" in refused.output, refused.output
    assert not (tmp_path / "x.duckdb").exists()
