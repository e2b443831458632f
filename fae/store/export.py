"""Export a log's tables and views to Parquet."""

from __future__ import annotations

from pathlib import Path

import duckdb

from fae.errors import StoreError
from fae.store.files import keep_private, remove_stale
from fae.store.log import EventLog
from fae.store.schema import VIEWS

TABLES = ("runs", "events", "blobs", "verdicts", "verdict_batches")


def export_parquet(log_path: str | Path, directory: str | Path) -> list[tuple[Path, int]]:
    """Write one Parquet file per table and view; returns (file, rows) for each."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create {directory}: {exc.strerror}") from None
    keep_private()  # the exports hold every body in the log
    written = []
    with EventLog(log_path, read_only=True) as log:
        for name in (*TABLES, *VIEWS):
            target = directory / f"{name}.parquet"
            remove_stale(target)  # a fresh owner-only file: never an old file's mode, never through a link
            try:
                log.con.execute(f"COPY (SELECT * FROM {name}) TO '{target.as_posix()}' (FORMAT parquet)")
                (count,) = log.con.execute(f"SELECT count(*) FROM {name}").fetchone()
            except duckdb.Error as exc:
                raise StoreError(f"cannot export {name}: {exc}") from None
            written.append((target, int(count)))
    return written
