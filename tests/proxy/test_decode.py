"""Compressed bodies are decoded for the log into a map bounded by the proxy's limit; a bomb is kept encoded only."""

from __future__ import annotations

import json
import resource
import zlib

import brotli
import httpx
import pytest
import zstandard
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fae.proxy.decode import decode_bounded, decodes_bounded
from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.recorder import Recorder
from fae.store.bodies import Pieces
from fae.store.log import EventLog
from fae.store.writer import open_writer
from fae.util.serve import serve_asgi
from tests.proxy.shaped_bodies import bomb

MIB = 1 << 20
TEXT = b"".join(b'{"n": %d, "word": "%s"}\n' % (n, b"x" * (n % 97)) for n in range(60_000))  # ~4 MiB


def _zlib(data: bytes, wbits: int) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


ENCODERS = {
    "gzip": lambda data: _zlib(data, 31),
    "deflate": lambda data: _zlib(data, zlib.MAX_WBITS),
    "br": lambda data: brotli.compress(data, quality=1),
    "zstd": lambda data: zstandard.ZstdCompressor(level=1).compress(data),
}


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_each_encoding_decodes_to_the_same_bytes_as_its_encoder_took(encoding):
    encoded = ENCODERS[encoding](TEXT)
    for raw in (encoded, Pieces((memoryview(encoded),))):
        decoded = decode_bounded(raw, encoding.upper(), len(TEXT))
        assert decoded is not None and decoded.joined() == TEXT, encoding
    assert decode_bounded(encoded, encoding, len(TEXT) - 1) is None, "one byte over the capacity must not fit"
    assert decodes_bounded(f" {encoding} ")


def test_the_variants_servers_send_decode_too():
    members = _zlib(TEXT[:1000], 31) + _zlib(TEXT[1000:], 31)  # gzip of two members
    assert decode_bounded(members, "gzip", MIB * 8).joined() == TEXT  # type: ignore[union-attr]
    assert decode_bounded(_zlib(TEXT, 31) + bytes(8), "x-gzip", MIB * 8).joined() == TEXT  # type: ignore[union-attr]
    trailing = _zlib(TEXT, 31) + b"<!-- a proxy's footer -->"  # bytes after the last member: ignored, as mitmproxy does
    assert decode_bounded(trailing, "gzip", MIB * 8).joined() == TEXT  # type: ignore[union-attr]
    assert decode_bounded(_zlib(TEXT, -15), "deflate", MIB * 8).joined() == TEXT  # type: ignore[union-attr]
    frames = zstandard.ZstdCompressor().compress(TEXT[:7]) + zstandard.ZstdCompressor().compress(TEXT[7:])
    assert decode_bounded(frames, "zstd", MIB * 8).joined() == TEXT  # type: ignore[union-attr]
    assert decode_bounded(_zlib(TEXT, zlib.MAX_WBITS), "gzip", MIB * 8).joined() == TEXT  # type: ignore[union-attr]


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_a_body_that_is_not_what_it_says_is_refused(encoding):
    with pytest.raises(ValueError):
        decode_bounded(b'{"not": "compressed at all"}', encoding, MIB)
    cut = ENCODERS[encoding](TEXT)[:-64]
    if encoding in ("gzip", "zstd"):  # cut short: what it holds, as mitmproxy's gzip decoder gives (zstd's reader
        decoded = decode_bounded(cut, encoding, 8 * MIB)  # stops where its input does)
        assert decoded is not None and TEXT.startswith(decoded.joined()) and len(decoded) > len(TEXT) // 2
    else:
        with pytest.raises(ValueError):
            decode_bounded(cut, encoding, 8 * MIB)


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_a_bomb_stops_at_the_capacity_without_growing_memory_past_it(encoding):
    encoded, size = bomb(encoding)
    assert len(encoded) * 500 < size
    before = _peak_rss()
    assert decode_bounded(encoded, encoding, 16 * MIB) is None
    grown = _peak_rss() - before  # the process's high-water mark: decoded whole, it would rise by `size`
    assert grown < 64 * MIB, f"{encoding}: peak RSS rose {grown / MIB:.0f} MiB decoding a bomb of {size >> 20} MiB"


def _bomb_upstream() -> Starlette:
    async def serve(request: Request) -> Response:
        encoding = request.path_params["encoding"]
        return Response(bomb(encoding)[0], media_type="application/json", headers={"content-encoding": encoding})

    async def small(request: Request) -> Response:
        encoding = request.path_params["encoding"]
        return Response(
            ENCODERS[encoding](b'{"ok": 1}'), media_type="application/json", headers={"content-encoding": encoding}
        )

    return Starlette(routes=[Route("/bomb/{encoding}", serve), Route("/small/{encoding}", small)])


@pytest.mark.anyio
async def test_a_proxy_keeps_a_bomb_encoded_only_and_says_why(tmp_path):
    """Through a real mitmproxy at a 1 MiB limit: each bomb reaches the client untouched and is recorded raw,
    with a decode_error naming the limit; a small body in the same encoding is decoded as before."""
    path = tmp_path / "log.duckdb"
    log = EventLog(path)
    for encoding in ENCODERS:
        bomb(encoding)  # made before the peak is read
    before = _peak_rss()
    async with serve_asgi(_bomb_upstream()) as port:
        async with open_writer(log) as writer:
            async with run_proxy(
                {"web": Upstream("web", f"http://127.0.0.1:{port}", "http")}, Recorder(writer), max_body_bytes=MIB
            ) as proxy:
                async with httpx.AsyncClient(timeout=120) as client:
                    for encoding in ENCODERS:
                        for kind in ("bomb", "small"):
                            async with client.stream(
                                "GET", proxy.url("r1", "agent", "web", f"{kind}/{encoding}")
                            ) as reply:
                                raw = b"".join([chunk async for chunk in reply.aiter_raw()])
                            assert reply.status_code == 200 and raw == (
                                bomb(encoding)[0] if kind == "bomb" else ENCODERS[encoding](b'{"ok": 1}')
                            )
    grown = _peak_rss() - before
    log.close()
    with EventLog(path, read_only=True) as opened:
        _, rows = opened.query("SELECT payload FROM events WHERE kind = 'HttpExchanged'")
        by_path = {event["path"]: event for event in (json.loads(p) for (p,) in rows)}
        for encoding in ENCODERS:
            kept = by_path[f"/bomb/{encoding}"]
            assert kept["decoded_blob"] is None and "limit" in kept["decode_error"], kept
            assert opened.blob(kept["response_blob"]) == bomb(encoding)[0]
            small = by_path[f"/small/{encoding}"]
            assert small["decode_error"] is None and opened.blob(small["decoded_blob"]) == b'{"ok": 1}', small
    assert grown < 128 * MIB, f"peak RSS rose {grown / MIB:.0f} MiB while the proxy met the bombs"
