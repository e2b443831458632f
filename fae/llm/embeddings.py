"""Deterministic hashed bag-of-words embeddings, so memory tests get stable vectors with no model.

Each lower-cased word is hashed (blake2b, so the same on every machine and
process) to one dimension and a sign; the counts are L2-normalised. Texts that
share words get a positive cosine; that is all these vectors promise.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import struct

DEFAULT_DIMENSIONS = 384
_WORD = re.compile(r"\w+")


def embed(text: str, dimensions: int = DEFAULT_DIMENSIONS) -> list[float]:
    """The unit vector of ``text`` (all zeros when it has no words)."""
    if dimensions < 1:
        raise ValueError("dimensions must be at least 1")
    vector = [0.0] * dimensions
    for word in _WORD.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        number = int.from_bytes(digest, "big")
        vector[number % dimensions] += 1.0 if (number >> 63) & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


def to_base64(vector: list[float]) -> str:
    """The vector as base64 of little-endian float32 (OpenAI's ``encoding_format: base64``)."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
