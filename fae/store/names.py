"""Values read from a log that become parts of a path, each checked against its grammar before a file is touched.

A log may come from someone else, so a blob hash, a run id or a partition value
in it is data, never a path. Each has a grammar (a body hash is 64 lowercase
hex digits, as ``hashlib.sha256().hexdigest()`` writes it; a run id is what
``fae record`` names runs); a value outside it is refused in one line, and a
path made from checked parts is resolved and must still lie inside the folder
it was made for.
"""

from __future__ import annotations

import re
from pathlib import Path

from fae.errors import StoreError

BLOB_HASH = re.compile(r"[0-9a-f]{64}")
"""A body's content address: its SHA-256 as lowercase hex."""
BLOB_HASH_SQL = "regexp_full_match(hash, '[0-9a-f]{64}')"
"""``BLOB_HASH`` over a ``hash`` column, for checking a whole table in one query."""
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""A run id as fae makes them (``task-v0-agent-r0``, ``….a2``, ``….replay1``): it is a segment of proxied URLs."""
PARTITION_MAX = 128
"""The longest suite or experiment name an export writes as a folder name (a file name's limit is 255 bytes)."""
PARTITION_SQL = (
    "(length({0}) BETWEEN 1 AND " + str(PARTITION_MAX) + " AND NOT regexp_matches({0}, '[\\x00-\\x1f\\x7f]'))"
)
"""A partition value (``{0}``: the column) fit to be a folder name: not empty, not too long, no control character."""


def shown(value: object, limit: int = 60) -> str:
    """A value from a log, quoted and cut, for an error line (never the raw bytes, which may be anything)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_hash(digest: object, where: str) -> str:
    """``digest`` when it is a body hash; else a StoreError naming ``where`` it came from."""
    if isinstance(digest, str) and BLOB_HASH.fullmatch(digest):
        return digest
    raise StoreError(f"{where} names a body {shown(digest)}, which is not a body hash (64 lowercase hex digits)")


def check_run_id(run_id: object, where: str) -> str:
    """``run_id`` when fae could have made it; else a StoreError naming ``where`` it came from."""
    if isinstance(run_id, str) and RUN_ID.fullmatch(run_id):
        return run_id
    raise StoreError(
        f"{where} holds a run id {shown(run_id)} that fae never makes (letters, digits, '.', '_' and '-', "
        "starting with a letter or digit, at most 128)"
    )


def inside(folder: Path, path: Path) -> Path:
    """``path`` when, resolved (links followed), it lies inside ``folder``; else a StoreError. Nothing is created."""
    base = folder.resolve()
    resolved = path.resolve()
    if resolved != base and base not in resolved.parents:
        raise StoreError(f"{path} lies outside {folder}; fae writes only inside it")
    return path
