"""A large body gathered into one anonymous memory map as it arrives (a compressed one is decoded into another).

Pieces held in a list and joined for the parsers cost the body twice; a
buffer grown by ``+=`` may be copied on a resize. An anonymous map of the
limit's size is only address space until written, so gathering a body costs
what it holds, once, and the parsers read it in place (the recorder decodes
JSON straight from it).
"""

from __future__ import annotations

import mmap

from fae.store.bodies import Pieces


class Gathered:
    """Bytes appended into one map of ``capacity`` bytes; resident only as far as written."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.size = 0
        self._map = mmap.mmap(-1, max(capacity, 1))

    def add(self, data: bytes | bytearray | memoryview) -> bool:
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
