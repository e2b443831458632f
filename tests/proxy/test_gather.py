"""The map a large body is gathered into: bounded by its capacity, read in place, and handed on a slice at a time."""

from __future__ import annotations

import mmap
import os

import pytest

from fae.proxy.gather import Gathered
from fae.store.bodies import SLICE


def test_a_body_is_gathered_up_to_its_capacity_and_read_in_place():
    gathered = Gathered(10)
    assert gathered.add(b"abcd") and gathered.add(bytearray(b"efgh")) and gathered.add(memoryview(b"ij"))
    assert not gathered.add(b"k") and gathered.size == 10  # past the capacity: refused, nothing appended
    [view] = gathered.body().parts
    assert isinstance(view, memoryview) and bytes(view) == b"abcdefghij"


@pytest.mark.skipif(not hasattr(mmap, "MADV_DONTNEED"), reason="the pages can be given back only with madvise")
def test_copies_hand_the_body_on_in_slices_and_give_each_slice_s_pages_back():
    data = os.urandom(3 * SLICE + 12345)
    gathered = Gathered(4 * SLICE)
    gathered.add(data)
    [view] = gathered.body().parts
    copies = gathered.copies()
    first = next(copies)
    assert first == data[:SLICE] and isinstance(first, bytes)
    assert bytes(view[:16]) == bytes(16) and bytes(view[SLICE : SLICE + 16]) == data[SLICE : SLICE + 16]  # given back
    rest = list(copies)
    assert b"".join([first, *rest]) == data and [len(p) for p in rest] == [SLICE, SLICE, 12345]
    assert bytes(view[-12345:]) == bytes(12345)  # every page, the last partial one too
