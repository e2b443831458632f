"""Give freed heap memory back to the operating system (glibc's ``malloc_trim``), where the C library has it.

A large buffer that glibc placed on its heap (mitmproxy's bytearray for a
chunked body grows there) stays resident after it is freed until the heap is
trimmed, so one refused or gathered body would count against the next one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache


@cache
def _malloc_trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


def trim_heap() -> bool:
    """Return free heap pages to the OS; False where the C library cannot (not glibc)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
