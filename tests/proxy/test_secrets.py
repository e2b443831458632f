"""Secrets sent through the proxy never reach the DuckDB file, in any byte, raw or decoded."""

from __future__ import annotations

import httpx
import pytest

from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.recorder import Recorder
from fae.recorder.redact import Redactor
from fae.store.log import EventLog
from fae.store.writer import open_writer
from fae.util.serve import serve_asgi
from tests.upstream import create_upstream

pytestmark = pytest.mark.anyio

SECRETS = {
    "authorization": "sk-live-AUTHSECRET-0123456789",
    "api-key": "azure-APIKEYSECRET-9876543210",
    "x-api-key": "anthropic-XAPIKEYSECRET-5555",
    "cookie": "session=COOKIESECRET-4444",
    "x-custom-token": "CUSTOMHEADERSECRET-3333",
}
QUERY_SECRET = "QUERYSECRET-2222"
CUSTOM_QUERY_SECRET = "CUSTOMQUERYSECRET-1111"


async def _send(path, redactor):
    log = EventLog(path)
    upstream = create_upstream()
    async with serve_asgi(upstream) as port:
        upstreams = {"llm": Upstream("llm", f"http://127.0.0.1:{port}/v1", "llm")}
        async with open_writer(log) as writer:
            async with run_proxy(upstreams, Recorder(writer, redactor)) as proxy:
                async with httpx.AsyncClient() as client:
                    url = proxy.url("r1", "agent", "llm", "chat/completions")
                    r = await client.post(
                        url,
                        params={"api-key": QUERY_SECRET, "sess": CUSTOM_QUERY_SECRET, "ok": "1"},
                        headers={**SECRETS, "authorization": "Bearer " + SECRETS["authorization"]},
                        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                    )
                    assert r.status_code == 200
                    # the upstream did get the real credentials: redaction is only for the log
                    assert upstream.state.seen_headers[0]["api-key"] == SECRETS["api-key"]
    log.close()
    return _haystack(path)


def _haystack(path) -> bytes:
    """Every byte of the log and its WAL, and what DuckDB decodes from them: payloads are stored
    compressed, so a secret would not show in the raw file's bytes alone."""
    data = path.read_bytes()
    wal = path.with_name(path.name + ".wal")
    if wal.exists():
        data += wal.read_bytes()
    with EventLog(path, read_only=True) as log:
        _, payloads = log.query("SELECT payload FROM events")
        _, blobs = log.query("SELECT data FROM blobs")
    return data + "".join(p for (p,) in payloads).encode() + b"".join(bytes(b) for (b,) in blobs)


async def test_no_secret_byte_reaches_the_log(tmp_path):
    redactor = Redactor.with_extra(headers=["x-custom-token"], query_params=["sess"])
    data = await _send(tmp_path / "log.duckdb", redactor)
    for secret in [*SECRETS.values(), QUERY_SECRET, CUSTOM_QUERY_SECRET]:
        needle = secret.split("=")[-1].encode()
        assert needle not in data, secret
    with EventLog(tmp_path / "log.duckdb", read_only=True) as log:
        _, rows = log.query("SELECT payload FROM events WHERE kind = 'HttpExchanged'")
    assert "[redacted]" in rows[0][0]


async def test_the_search_would_find_an_unredacted_secret(tmp_path):
    """Guards the test above: with redaction of the custom header off, its secret is found."""
    data = await _send(tmp_path / "log.duckdb", Redactor())
    assert SECRETS["x-custom-token"].encode() in data
    assert SECRETS["authorization"].encode() not in data
