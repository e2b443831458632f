"""fae record warns when more runs go at once than the model server serves (llama.cpp's /props total_slots).

The server here is a stand-in on real HTTP that answers ``GET /props`` the way llama.cpp's ``llama-server``
does (no llama.cpp build nor model can be fetched offline): only the route and field fae reads.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from typer.testing import CliRunner

from fae.cli.main import app
from fae.harness.model_server import parallel_slots, props_url, serial_warning


@contextmanager
def model_server(props: Any, status: int = 200) -> Iterator[str]:
    """A server whose /props answers ``props`` (bytes as they are, else JSON); its /v1 base URL."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            body = props if isinstance(props, bytes) else json.dumps(props).encode()
            self.send_response(status if self.path == "/props" else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
    assert seen in ([], ["/props"]), seen  # asked once, at the server's root


def test_props_is_asked_at_the_servers_root():
    assert props_url("http://h:8080/v1") == props_url("http://h:8080/v1/") == "http://h:8080/props"
    assert props_url("http://h:8080") == "http://h:8080/props"


@pytest.mark.parametrize(
    ("props", "status", "slots"),
    [
        ({"total_slots": 1, "model_path": "m.gguf"}, 200, 1),
        ({"total_slots": 4}, 200, 4),
        ({"total_slots": 0}, 200, None),
        ({"total_slots": True}, 200, None),
        ({"total_slots": "1"}, 200, None),
        ([1, 2], 200, None),
        (b"not json", 200, None),
        ({"total_slots": 1}, 500, None),
        ({}, 200, None),
    ],
)
def test_the_slot_count_is_read_only_where_the_server_states_it(props, status, slots):
    with model_server(props, status) as url:
        assert parallel_slots(url) == slots


def test_no_warning_when_the_server_serves_as_many_or_says_nothing():
    with model_server({"total_slots": 4}) as url:
        assert serial_warning(url, 4) is None
    with model_server({"total_slots": 1}) as url:
        assert serial_warning(url, 1) is None  # one run at a time: nothing queues
    with model_server({}, 404) as url:
        assert serial_warning(url, 8) is None  # an API with no /props (OpenAI, vLLM, Ollama)
    assert serial_warning("http://127.0.0.1:9/v1", 8) is None  # down: the runs will say so themselves
    assert serial_warning(None, 8) is None


def test_fae_record_warns_before_the_runs_when_runs_would_queue(tmp_path):
    with model_server({"total_slots": 1}) as url:
        done = CliRunner().invoke(
            app,
            ["record", "--log", str(tmp_path / "l.duckdb"), "--task", "rec-create-patient", "--agent", "gold"]
            + ["--llm-url", url, "--concurrency", "3"],
        )
    assert done.exit_code == 0, done.output
    assert "serves 1 request(s) at a time" in done.output, done.output
    assert "--concurrency 1" in done.output and "llama-server --parallel 3" in done.output
    assert done.output.index("serves 1 request(s)") < done.output.index("recorded into")
