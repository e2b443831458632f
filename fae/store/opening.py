"""The one way fae connects to a log file: in the sandbox ``fae sql`` uses, before the first statement runs.

A log may come from someone else, so every connection to one (a writer's, a
reader's, a judging worker's, a merge's, an export's) is made here and locked
down at once (``fae.store.sandbox.lock_down``): no file or network access, no
extension install or load, settings locked. What a command legitimately needs
beyond the log is granted by name before the lock, from fae's own code: the
export folder ``COPY`` writes into, the spool a rejudge's verdicts come from,
the shards a merge attaches; nothing a log holds ever names one. Settings the
caller needs (a worker's threads and memory) are set before the lock too.
``fae.store.log.EventLog`` then checks the log's catalogue (``fae.store.shape``)
before reading a row.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import duckdb

from fae.errors import LogInUse, StoreError, first_line
from fae.store.sandbox import lock_down

WAL_VANISHED_TRIES = 20
"""How often an open is tried again when the log's WAL vanished under it (50 ms apart)."""


def is_lock_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return ("lock" in text and ("conflicting" in text or "could not set" in text)) or (
        "same database file with a different configuration" in text
    )


def _wal_vanished(exc: Exception, wal: Path) -> bool:
    """DuckDB saw the log's WAL, then could not open it: another process's close removed it in between.

    Closing a log checkpoints it and deletes its WAL; an open that starts in that window finds the file
    listed and then gone (duckdb/duckdb#9342). The log is fine: the other process has just finished with it.
    """
    text = str(exc)
    return "No such file or directory" in text and str(wal) in text


def wal_of(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def _connect(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    wal = wal_of(path)
    for _ in range(WAL_VANISHED_TRIES):
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.Error as exc:
            if is_lock_error(exc):
                raise LogInUse(f"log {path} is open in another process") from None
            if not _wal_vanished(exc, wal):
                raise StoreError(f"cannot open log {path}: {first_line(exc)}") from None
        time.sleep(0.05)
    raise LogInUse(f"log {path} is being closed by another process: its WAL kept vanishing as this process opened it")


def connect_log(
    path: Path,
    *,
    read_only: bool,
    settings: Mapping[str, str | int] | None = None,
    folders: Sequence[Path] = (),
    files: Sequence[Path] = (),
) -> duckdb.DuckDBPyConnection:
    """A connection to the log at ``path``, locked down before it is returned.

    ``settings``: DuckDB settings to apply first (``threads``, ``memory_limit``). ``folders`` and ``files``: what
    this connection may still read and write besides the log; the caller chose them, never the log. In a
    process that has the log open already, DuckDB shares one database between the connections: its lock (and
    its settings) stand.
    """
    con = _connect(path, read_only)
    try:
        lock_down(con, settings=settings, folders=folders, files=files)
    except BaseException:
        con.close()
        raise
    return con
