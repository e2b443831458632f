"""A compressed body decoded, for the log, into a memory map bounded by the proxy's limit, whatever its ratio.

mitmproxy decodes a body whole: a few KiB of gzip, deflate, brotli or zstd can
decode to gigabytes (a decompression bomb). Each decoder here gives its output
at most a MiB at a time into one ``Gathered`` map of the limit's size and stops
as soon as the output would pass it, so the proxy never holds more than the
limit of decoded bytes.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import brotli
import zstandard

from fae.proxy.gather import Gathered
from fae.store.bodies import Body, Pieces, body_slices

_AUTO = 32 + zlib.MAX_WBITS  # a gzip or zlib header, as mitmproxy's gzip decoder accepts
_ZLIB = zlib.MAX_WBITS
_RAW = -zlib.MAX_WBITS
_READ = 1 << 20
_FEED = 1 << 16


def _zlib_stream(raw: Body, wbits: int, members: bool) -> Iterator[bytes]:
    """Decoded zlib output a MiB at a time. ``members`` (gzip): further members are decoded too, bytes after the
    last are ignored and a body cut short gives what it holds, as mitmproxy's gzip decoder does; otherwise
    (deflate) a body cut short is an error, as it is to mitmproxy's."""
    unpacker = zlib.decompressobj(wbits)
    for piece in body_slices(raw):
        data: bytes | memoryview = piece
        while data:
            if not unpacker.eof:
                yield unpacker.decompress(data, _READ)
            elif not members:
                return  # trailing bytes after the end are ignored
            else:
                unpacker = zlib.decompressobj(wbits)
                try:
                    first = unpacker.decompress(data, _READ)
                except zlib.error:
                    return  # not a further member: padding or trailing bytes, ignored
                yield first
            data = unpacker.unconsumed_tail or unpacker.unused_data
    yield unpacker.flush()
    if not members and not unpacker.eof:
        raise ValueError("the body ends before its end marker")


def _deflate_stream(raw: Body) -> Iterator[bytes]:
    """zlib-wrapped deflate, else raw deflate (some servers leave the header out), as mitmproxy decodes it."""
    head = bytes(next(body_slices(raw), b"")[:2])
    wrapped = len(head) == 2 and head[0] & 0x0F == 8 and int.from_bytes(head, "big") % 31 == 0
    return _zlib_stream(raw, _ZLIB if wrapped else _RAW, members=False)


def _brotli_stream(raw: Body) -> Iterator[bytes]:
    unpacker = brotli.Decompressor()
    for piece in body_slices(raw):
        for start in range(0, len(piece), _FEED):
            yield unpacker.process(bytes(piece[start : start + _FEED]), output_buffer_limit=_READ)
            while not unpacker.can_accept_more_data():
                yield unpacker.process(b"", output_buffer_limit=_READ)
    while not unpacker.is_finished() and (rest := unpacker.process(b"", output_buffer_limit=_READ)):
        yield rest
    if not unpacker.is_finished():
        raise ValueError("the body ends before its end marker")


def _zstd_stream(raw: Body) -> Iterator[bytes]:
    source = raw.parts[0] if isinstance(raw, Pieces) and len(raw.parts) == 1 else raw
    with zstandard.ZstdDecompressor().stream_reader(
        source if not isinstance(source, Pieces) else source.joined(), read_across_frames=True
    ) as reader:
        while chunk := reader.read(_READ):
            yield chunk


_DECODERS = {
    "gzip": lambda raw: _zlib_stream(raw, _AUTO, members=True),
    "x-gzip": lambda raw: _zlib_stream(raw, _AUTO, members=True),
    "deflate": _deflate_stream,
    "br": _brotli_stream,
    "zstd": _zstd_stream,
}


def decodes_bounded(encoding: str) -> bool:
    """Whether ``decode_bounded`` knows the content-encoding."""
    return encoding.strip().lower() in _DECODERS


def decode_bounded(raw: Body, encoding: str, capacity: int) -> Pieces | None:
    """The body decoded into a map; None if decoded it would pass ``capacity``.
    Raises ValueError where it is not valid in that encoding."""
    out = Gathered(capacity)
    try:
        for chunk in _DECODERS[encoding.strip().lower()](raw):
            if not out.add(chunk):
                return None
    except (zlib.error, brotli.error, zstandard.ZstdError) as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None
    return out.body()
