"""A large body gathered into one anonymous memory map as it arrives, and a gzip one decoded into another.

Pieces held in a list and joined for the parsers cost the body twice; a
buffer grown by ``+=`` may be copied on a resize. An anonymous map of the
limit's size is only address space until written, so gathering a body costs
what it holds, once, and the parsers read it in place (the recorder decodes
JSON straight from it). Decoding a compressed body into a map of its own
keeps the decoded size bounded by the proxy's limit, whatever the ratio.
"""

from __future__ import annotations

import mmap
import zlib

from fae.store.bodies import Body, Pieces, body_slices

_GZIP = 16 + zlib.MAX_WBITS
_READ = 1 << 20


class Gathered:
    """Bytes appended into one map of ``capacity`` bytes; resident only as far as written."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.size = 0
        self._map = mmap.mmap(-1, max(capacity, 1))

    def add(self, data: bytes | memoryview) -> bool:
        """Append ``data``; False (and nothing appended) if it would pass the capacity."""
        end = self.size + len(data)
        if end > self.capacity:
            return False
        self._map[self.size:end] = data
        self.size = end
        return True

    def body(self) -> Pieces:
        """The bytes gathered so far, as one piece that views the map (no copy)."""
        return Pieces((memoryview(self._map)[:self.size],))


def decodes_streaming(encoding: str) -> bool:
    return encoding.strip().lower() in ("gzip", "x-gzip")


def decode_bounded(raw: Body, capacity: int) -> Pieces | None:
    """A gzip body (of one or more members) decoded into a map; None if decoded it would pass ``capacity``.
    Raises ValueError where it is not plain valid gzip (the caller then decodes it the way mitmproxy does)."""
    out = Gathered(capacity)
    unpacker = zlib.decompressobj(_GZIP)
    try:
        for piece in body_slices(raw):
            data: bytes | memoryview = piece
            while data:
                if unpacker.eof:  # a further member, or padding
                    if not bytes(data).strip(b"\x00"):
                        break
                    unpacker = zlib.decompressobj(_GZIP)
                if not out.add(unpacker.decompress(data, _READ)):
                    return None
                data = unpacker.unconsumed_tail or unpacker.unused_data
        if not out.add(unpacker.flush()):
            return None
    except zlib.error as exc:
        raise ValueError(str(exc)) from None
    if not unpacker.eof:
        raise ValueError("the gzip body ends before its end marker")
    return out.body()
