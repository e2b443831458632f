"""A large body gathered into one anonymous memory map as it arrives (a compressed one is decoded into another).

Pieces held in a list and joined for the parsers cost the body twice; a
buffer grown by ``+=`` may be copied on a resize. An anonymous map of the
limit's size is only address space until written, so gathering a body costs
what it holds, once, and the parsers read it in place (the recorder decodes
JSON straight from it).
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator

from fae.store.bodies import SLICE, Pieces


class Gathered:
    """Bytes appended into one map of ``capacity`` bytes; resident only as far as written."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.size = 0
        private = {"flags": mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS} if hasattr(mmap, "MAP_PRIVATE") else {}
        self._map = mmap.mmap(-1, max(capacity, 1), **private)  # private: pages given back are freed, not kept

    def add(self, data: bytes | bytearray | memoryview) -> bool:
        """Append ``data``; False (and nothing appended) if it would pass the capacity."""
        end = self.size + len(data)
        if end > self.capacity:
            return False
        self._map[self.size : end] = data
        self.size = end
        return True

    def release(self, start: int, length: int) -> None:
        """Give the pages of ``[start, start + length)`` back (``start`` page-aligned): read as zeros after."""
        if length > 0 and hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED, start, length)

    def copies(self) -> Iterator[bytes]:
        """The bytes gathered, in slices of their own, each slice's pages given back once copied: the map
        is resident only as far as it is not yet handed on."""
        view = memoryview(self._map)
        try:
            for start in range(0, self.size, SLICE):
                piece = bytes(view[start : min(start + SLICE, self.size)])
                self.release(start, len(piece))
                yield piece
        finally:
            view.release()

    def body(self) -> Pieces:
        """The bytes gathered so far, as one piece that views the map (no copy)."""
        return Pieces((memoryview(self._map)[: self.size],))
