"""`fae view`: the report and every run's page served from the log on 127.0.0.1, each run page built when asked.

Why a server and not one file: a page per run is tens of kilobytes (its timeline, bodies and state diff), so a
file holding every run grows with the log (100k runs: gigabytes), and a page opened from disk cannot query
the log for just the run asked for. The server keeps the report page as `fae report` writes it (computed once,
at start) and answers ``/runs?…`` (a cell's runs, a page at a time) and ``/run/ID`` from the log on demand:
its memory and each answer stay the size of one page whatever the log's size. It binds 127.0.0.1, answers
only a Host naming that address (no DNS rebinding), only GET, and sends every page under the explorer's
Content-Security-Policy.
"""

from __future__ import annotations

import html
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from fae.report.explorer.markup import POLICY, page
from fae.report.explorer.run_page import run_page
from fae.report.explorer.runs_page import runs_page


class Explorer:
    """What the server answers, apart from HTTP: a path and its query → (status, page)."""

    def __init__(self, reader: Any, index: str, log_name: str):
        self.reader = reader
        self.index = index
        self.log_name = log_name

    def answer(self, target: str) -> tuple[int, str]:
        parts = urlsplit(target)
        if parts.path in ("/", "/index.html"):
            return 200, self.index
        if parts.path == "/runs":
            return 200, runs_page(self.reader, dict(parse_qsl(parts.query)), log_name=self.log_name)
        if parts.path.startswith("/run/"):
            run_id = unquote(parts.path[len("/run/") :])
            found = run_page(self.reader, run_id, log_name=self.log_name)
            if found is not None:
                return 200, found
            return 404, page("no such run", "no such run", "", f"<p>The log has no run {html.escape(run_id)}.</p>")
        return 404, page("not found", "not found", "", '<p><a href="/">the report</a></p>')


def serve(explorer: Explorer, host: str = "127.0.0.1", port: int = 0) -> HTTPServer:
    """A server bound to ``host:port`` (0: a free port) answering from ``explorer``; the caller runs it."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "fae-view"
        sys_version = ""

        def do_GET(self) -> None:
            port = self.server.server_address[1]  # type: ignore[index]
            allowed = {f"{host}:{port}", f"localhost:{port}"}
            if self.headers.get("Host") not in allowed:
                self._send(421, page("refused", "refused", "", "<p>This server answers its own address only.</p>"))
                return
            try:
                status, body = explorer.answer(self.path)
            except Exception as exc:  # one page fails, the server goes on
                message = html.escape(f"{type(exc).__name__}: {exc}")
                status, body = 500, page("error", "error", "", f"<p>This page could not be built: {message}</p>")
            self._send(status, body)

        def _send(self, status: int, body: str) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Content-Security-Policy", POLICY)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a request is not news; errors are pages

    server = ThreadingHTTPServer((host, port), Handler)  # a browser holds idle preconnected sockets open
    server.daemon_threads = True
    return server


def port_of(server: HTTPServer) -> int:
    """The port the server listens on (the one chosen, for port 0)."""
    return int(server.server_address[1])
