"""Large bodies live in side files next to the log, so no copy of one is ever held by DuckDB.

DuckDB's ingest of one large BLOB costs several times its size in memory, and
a journal record holding it one more. A body of ``BODY_FILE_BYTES`` or more is
therefore written, scrubbed and ZSTD-compressed as it streams, to a
content-addressed file ``<log>.bodies/ab/cdef….zst`` (mode 0600, in owner-only
folders), before its events are journaled; its ``blobs`` row has empty
``data`` and ``external = true``. Readers go through ``body_of``. The SQL
sandbox cannot open these files: there a large body shows as its row only.
A hash read from a log names a side file only when it is 64 lowercase hex
digits, and the file's path must resolve inside its body folder.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import zstandard

from fae.errors import StoreError
from fae.store.files import PRIVATE_MODE, fsync_dir, refuse_link
from fae.store.names import check_hash, inside

if TYPE_CHECKING:
    from fae.store.secrets import SecretValues

BODY_FILE_BYTES = 1 << 20
"""Bodies at least this long are kept in side files (and streamed through the proxy, never joined)."""
SLICE = 1 << 20
_LEVEL = 3


@dataclass(frozen=True, slots=True)
class Pieces:
    """A body kept as the pieces it arrived in, or as one view of the map it was gathered into
    (``fae.proxy.gather``): joining them would hold it twice."""

    parts: tuple[bytes | memoryview, ...]

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def joined(self) -> bytes:
        return b"".join(self.parts)


Body = bytes | Pieces


def body_slices(body: Body) -> Iterator[bytes | memoryview]:
    """The body in slices of at most 1 MiB, without copying it."""
    for part in body.parts if isinstance(body, Pieces) else (body,):
        view = memoryview(part)
        for start in range(0, len(view), SLICE):
            yield view[start : start + SLICE]


def digest_of(body: Body) -> str:
    """The body's SHA-256, hashed piece by piece."""
    if isinstance(body, bytes):
        return hashlib.sha256(body).hexdigest()
    hasher = hashlib.sha256()
    for part in body.parts:
        hasher.update(part)
    return hasher.hexdigest()


def bodies_dir(log_path: Path) -> Path:
    return log_path.with_name(log_path.name + ".bodies")


def body_path(log_path: Path, digest: str) -> Path:
    return _in(bodies_dir(log_path), digest, f"log {log_path}")


def _in(directory: Path, digest: str, owner: str) -> Path:
    """A body's side file in ``directory``: only for a hash of its grammar, and never outside the folder."""
    check_hash(digest, owner)
    return inside(directory, directory / digest[:2] / f"{digest[2:]}.zst")


def _private_dir(path: Path) -> None:
    refuse_link(path, "the body folder")
    try:
        path.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create {path}: {exc.strerror}") from None
    if path.is_symlink() or not path.is_dir():
        raise StoreError(f"{path} is not a folder fae made; it holds the log's large bodies")


def write_body(log_path: Path, body: Body, secrets: SecretValues, *, fsync: bool = False) -> tuple[str, int]:
    """Store a body in its side file, scrubbed of ``secrets``; returns the stored content's hash and length."""
    top = bodies_dir(log_path)
    _private_dir(top)
    temporary = top / f".incoming-{uuid.uuid4().hex}"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_MODE)
    except OSError as exc:
        raise StoreError(f"cannot create {temporary}: {exc.strerror}") from None
    hasher = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(fd, "wb") as handle:
            with zstandard.ZstdCompressor(level=_LEVEL).stream_writer(handle, closefd=False) as packed:
                for piece in secrets.scrub_stream(body_slices(body)):
                    hasher.update(piece)
                    packed.write(piece)
                    size += len(piece)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        digest = hasher.hexdigest()
        final = body_path(log_path, digest)
        _private_dir(final.parent)
        os.replace(temporary, final)  # the same name always holds the same content
        if fsync:
            fsync_dir(final.parent)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise StoreError(f"cannot write a body of {log_path} to {top}: {exc.strerror or exc}") from None
    return digest, size


def read_body(log_path: Path, digest: str) -> bytes:
    """A side file's body; a missing or damaged one is a StoreError naming it."""
    return read_body_in(bodies_dir(log_path), digest, f"log {log_path}")


def read_body_in(directory: Path, digest: str, owner: str) -> bytes:
    """A body from a body folder (a log's, or an export's ``bodies/``); ``owner`` names whose it is in errors."""
    path = _in(directory, digest, owner)
    try:
        with open(path, "rb") as handle:
            data = zstandard.ZstdDecompressor().stream_reader(handle).read()
    except FileNotFoundError:
        raise StoreError(f"body {digest} of {owner} is missing: {path} is gone") from None
    except (OSError, zstandard.ZstdError) as exc:
        raise StoreError(f"cannot read body {digest} of {owner} from {path}: {exc}") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise StoreError(f"body {digest} of {owner} is damaged: {path} holds other content")
    return data


def body_of(log_path: Path, digest: str, data: bytes | None, external: bool | None) -> bytes:
    """A ``blobs`` row's body: its ``data``, or its side file's content when it is external."""
    return read_body(log_path, digest) if external else bytes(data or b"")


def copy_body(source_log: Path, target_dir: Path, digest: str, *, fsync: bool = False) -> None:
    """Copy one side file into another body folder (fresh, mode 0600); a file already there is kept.

    ``fsync``: the copy is on disk before it takes its name, and its name once this returns (a file
    already there is kept, so a torn one would never be replaced)."""
    source, target = body_path(source_log, digest), _in(target_dir, digest, f"log {source_log}")
    if target.exists():
        return
    _private_dir(target_dir)
    _private_dir(target.parent)
    temporary = target.parent / f".incoming-{uuid.uuid4().hex}"
    try:
        with open(source, "rb") as reader:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_MODE)
            with os.fdopen(fd, "wb") as writer:
                while block := reader.read(SLICE):
                    writer.write(block)
                if fsync:
                    writer.flush()
                    os.fsync(writer.fileno())
        os.replace(temporary, target)
        if fsync:
            fsync_dir(target.parent)
    except FileNotFoundError:
        temporary.unlink(missing_ok=True)
        raise StoreError(f"body {digest} of log {source_log} is missing: {source} is gone") from None
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise StoreError(f"cannot copy body {digest} to {target}: {exc.strerror or exc}") from None
