"""Files that hold bodies: readable by their owner only, never written through a planted link.

The log, its WAL, journal segments, Parquet exports and ``<log>.live.json`` hold
request and response bodies or a query token. DuckDB creates its WAL afresh
after every checkpoint with the process's umask, so a process that writes a log
narrows its umask to owner-only; files fae creates itself are opened with
``O_EXCL | O_NOFOLLOW`` after any stale file or link at the path is removed.
"""

from __future__ import annotations

import os
from pathlib import Path

from fae.errors import StoreError

PRIVATE_MODE = 0o600


def keep_private() -> None:
    """From now on this process creates files only its owner can read or write (umask |= 077)."""
    previous = os.umask(0o077)
    os.umask(previous | 0o077)


def refuse_link(path: Path, what: str) -> None:
    """A symbolic link where fae writes is refused: it could point anywhere."""
    if path.is_symlink():
        raise StoreError(f"{what} {path} is a symbolic link; fae writes only to a real file there")


def make_private(path: Path) -> None:
    """Narrow an existing file (not a link) to owner-only; a missing file is fine."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"cannot open {path}: {exc.strerror}") from None
    try:
        os.fchmod(fd, PRIVATE_MODE)
    finally:
        os.close(fd)


def remove_stale(path: Path) -> None:
    """Remove whatever is at ``path`` (a file or a link, never its target) so it can be created fresh."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise StoreError(f"cannot remove the stale {path}: {exc.strerror}") from None


def write_private(path: Path, data: bytes) -> None:
    """Create ``path`` fresh with mode 0600 and write ``data``: never through a link, never an old file's mode."""
    remove_stale(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_MODE)
    except OSError as exc:
        raise StoreError(f"cannot create {path}: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def fsync_dir(directory: Path) -> None:
    """Make a new file's directory entry durable."""
    _fsync(directory, os.O_RDONLY)


def fsync_file(path: Path) -> None:
    """Make a written file's content durable (opened anew, never through a link)."""
    _fsync(path, os.O_RDONLY | os.O_NOFOLLOW)


def _fsync(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
