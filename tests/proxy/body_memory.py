"""Drives ``body_limit_child``: sends each kind of large body through its proxy and reads the peak RSS it cost.

The test (test_body_limit.py) runs every case in one child, as a long-lived
proxy would meet them; the bench runs each in a fresh child too, so a case's
own cost is not mixed with what an earlier case left resident.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from fae.proxy.routes import sandbox_id
from tests.proxy.shaped_bodies import bomb, chat_request, document_reference, tool_call

ROOT = Path(__file__).resolve().parents[2]


def raw_post(port: int, path: str, total: int) -> bytes:
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
            pending = pending[sock.send(pending) :]
    except (BrokenPipeError, ConnectionResetError):
        return reply  # closed while the body was still coming
    finally:
        sock.close()


@dataclass
class Growth:
    """A case's peak RSS over the warmed-up baseline, and over the resident size when the case began."""

    over_baseline: int
    over_start: int
    upstream: int | None = None  # the embedded FHIR server's own peak growth, when it served the case


@dataclass
class ProxyChild:
    """A ``body_limit_child`` process and the cases it can be sent; ``answers`` keeps replies to check."""

    log: Path
    limit: int
    embedded_fhir: bool = False
    opaque: bytes = b""
    answers: dict[str, httpx.Response] = field(default_factory=dict)

    def __enter__(self) -> ProxyChild:
        args = [sys.executable, "-m", "tests.proxy.body_limit_child", str(self.log), str(self.limit)]
        self.process = subprocess.Popen(
            args + (["--embedded-fhir"] if self.embedded_fhir else []),
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        _, port, self.prefix = self._line().split()
        self.port = int(port)
        self.base = f"http://127.0.0.1:{self.port}{self.prefix}"
        self.opaque = self.opaque or os.urandom(self.limit - 1)  # the client's copy is never the child's
        for _ in range(3):  # warm every path once, so the baseline includes it
            for rest, content in (
                ("api/warm", b"w" * 65536),
                ("fhir/DocumentReference", document_reference(65536)),
                ("llm/v1/chat/completions?size=65536", chat_request(65536)),
                ("mcp/mcp?size=65536", tool_call()),
            ):
                self.sent("POST", rest, content)
            for rest in ("api/bytes/65536", "fhir/Patient?size=65536", "fhir/Patient?size=65536&gzip=1"):
                self.sent("GET", rest)
            self.legacy_sse(65536)
        assert self.ask("flush") == "flushed"
        self.baseline = self.rss()[1]  # resident now: start-up's own peak is no cushion
        return self

    def __exit__(self, *exc) -> None:
        self.ask("quit")
        self.process.wait(60)

    def _line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def ask(self, command: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self._line()

    def rss(self) -> list[int]:
        """(peak, now[, upstream peak, upstream now]) in bytes."""
        return [int(kib) * 1024 for kib in self.ask("rss").split()[1:]]

    def sent(self, method: str, rest: str, content=None) -> httpx.Response:
        reply = httpx.request(method, self.base + rest, content=content, timeout=300)
        assert reply.status_code in (200, 201), (rest, reply.status_code, reply.text[:300])
        return reply

    def measure(self, action: Callable[[], object]) -> Growth:
        """The peak resident size during ``action`` and the flush after it."""
        start = self.rss()
        assert self.ask("mark") == "marked"
        action()
        assert self.ask("flush") == "flushed"
        peak = self.rss()
        upstream = peak[2] - start[3] if len(peak) > 2 else None
        return Growth(peak[0] - self.baseline, peak[0] - start[1], upstream)

    def legacy_sse(self, size: int) -> int:
        """A legacy MCP SSE session: open its stream, POST a call to its endpoint, read the reply of ``size``
        bytes to the stream's end; the bytes read."""
        with httpx.stream("GET", self.base + "mcp/sse", timeout=300) as stream:
            chunks = stream.iter_raw()
            head = b""
            while b"\r\n\r\n" not in head:
                head += next(chunks)
            endpoint = head.split(b"data: ", 1)[1].split(b"\r\n", 1)[0].decode()
            posted = httpx.post(f"{self.base}mcp{endpoint}&size={size}", content=tool_call(), timeout=300)
            assert posted.status_code == 202, (posted.status_code, posted.text[:300])
            return len(head) + sum(len(chunk) for chunk in chunks)

    def _chunks(self) -> Iterator[bytes]:  # no content-length: httpx sends it chunked, a MiB at a time
        for start in range(0, self.limit - 1, 1 << 20):
            yield self.opaque[start : start + (1 << 20)]

    def _bombs(self) -> None:
        """Each encoding's bomb (made here, in a file the upstream sends), read raw: the client never decodes it."""
        for encoding in ("gzip", "deflate", "br", "zstd"):
            path = self.log.parent / f"bomb.{encoding}"
            if not path.exists():
                path.write_bytes(bomb(encoding)[0])
            with httpx.stream("GET", f"{self.base}api/bomb/{encoding}?file={path}", timeout=300) as reply:
                assert reply.status_code == 200 and sum(len(c) for c in reply.iter_raw()) > 0, encoding

    def _refuse(self) -> None:
        reply = raw_post(self.port, f"{self.prefix}api/refused", 4 * self.limit)
        assert not reply or reply.startswith(b"HTTP/1.1 413"), reply[:200]

    def cases(self) -> dict[str, Callable[[], object]]:
        """Each case by name: one body of ``limit - 1`` bytes kept (or one 4x the limit refused)."""
        size = self.limit - 1
        kept = self.answers.setdefault
        return {
            "opaque request": lambda: self.sent("POST", "api/kept", self.opaque),
            "opaque response": lambda: kept("bytes", self.sent("GET", f"api/bytes/{size}")),
            "FHIR JSON request": lambda: self.sent("POST", "fhir/DocumentReference", document_reference(size)),
            "FHIR JSON response": lambda: self.sent("GET", f"fhir/Patient?size={size}"),
            "opaque response, chunked": lambda: kept("chunked", self.sent("GET", f"api/bytes/{size}?chunked=1")),
            "FHIR JSON response, chunked": lambda: self.sent("GET", f"fhir/Patient?size={size}&chunked=1"),
            "LLM request": lambda: self.sent("POST", "llm/v1/chat/completions", chat_request(size)),
            "LLM response": lambda: self.sent("POST", f"llm/v1/chat/completions?size={size}", b'{"model":"m"}'),
            "MCP request": lambda: self.sent("POST", "mcp/mcp", tool_call(size)),
            "MCP response": lambda: self.sent("POST", f"mcp/mcp?size={size}", tool_call()),
            "legacy-SSE MCP reply": lambda: self.legacy_sse(size),
            "chunked request": lambda: self.sent("POST", "api/chunked", self._chunks()),
            "gzip response": lambda: kept("gzip", self.sent("GET", f"fhir/Patient?size={size}&gzip=1")),
            "refused 4x chunked request": self._refuse,
            "bombs (gzip, deflate, br, zstd)": self._bombs,
            "LLM streamed response": lambda: kept(
                "stream",
                self.sent("POST", f"llm/v1/chat/completions?size={size}&stream=1", b'{"model":"m","stream":true}'),
            ),
        }

    def real_fhir_cases(self) -> dict[str, Callable[[], object]]:
        """Through the embedded FHIR server (``embedded_fhir``): store a large DocumentReference, read it back."""

        def read_back() -> None:
            created = self.answers["real"].json()
            self.sent("GET", f"real/sandbox/{sandbox_id('r1')}/fhir/DocumentReference/{created['id']}")

        def create() -> None:
            body = document_reference(self.limit - 4096)  # the server answers it with an id and meta added
            self.answers["real"] = self.sent("POST", f"real/sandbox/{sandbox_id('r1')}/fhir/DocumentReference", body)

        return {"real FHIR create": create, "real FHIR read": read_back}
