"""Export a log to a directory of Parquet files partitioned by suite, experiment and day, and query such a directory.

Layout (Hive style, so DuckDB, Polars and Spark read it as one table each)::

    DIR/runs/part_suite=S/part_experiment=E/day=2026-12-01/<log id>_0.parquet
    DIR/events/...   DIR/verdicts/...   (the rows of a run sit in its run's partition)
    DIR/blobs/<log id>.parquet
    DIR/bodies/ab/cdef….zst   (large bodies kept in side files: their blobs rows say ``external``)

Many logs (the shards of a cluster recording, a month of suites) export into
one directory side by side: each file is named for the log it came from, so
exporting a log again replaces its own files and nobody else's. A run's day
is the day it started (UTC). ``query_parquet`` opens such a directory with the
log's own views.

An export of a log is written table by table, so a stopped one would leave some
of that log's tables new and others stale or gone. ``DIR/<log id>.unfinished``
marks it: written (one JSON line: the log, when the export began) before any
file of the log is removed, and removed only once every table and side file is
on disk. Every reader refuses a directory holding one (``refuse_unfinished``);
exporting that log again repairs it.
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from fae.errors import StoreError
from fae.store.bodies import copy_body
from fae.store.files import fsync_dir, fsync_file, keep_private, remove_stale, write_private
from fae.store.log import EventLog
from fae.store.names import BLOB_HASH_SQL, PARTITION_MAX, PARTITION_SQL, check_hash, inside, shown
from fae.store.sandbox import lock_down, run_query
from fae.store.schema import VIEWS

TABLES = ("runs", "events", "blobs", "verdicts", "verdict_batches", "task_meta", "judge_facts")
_PARTITIONED = ("runs", "events", "verdicts")
_ROW_GROUP_ROWS = 4096
_EVENT_GROUP_ROWS = 16_384  # a row group's payloads, decoded, ~13 MiB: a judging worker reads them in 128 MB
UNFINISHED = ".unfinished"
"""Suffix of the marker ``DIR/<log id>.unfinished``: that log's export into DIR began and has not finished."""


def _parts(runs: str) -> str:
    """The partition columns, from the runs table under the alias ``runs``: suite, experiment, the run's UTC day."""
    return (
        f"coalesce({runs}.suite, '-') AS part_suite, coalesce({runs}.experiment, '-') AS part_experiment,"
        f" coalesce(CAST(CAST({runs}.started_at AT TIME ZONE 'UTC' AS DATE) AS VARCHAR), '-') AS day"
    )


def log_id(log_path: str | Path) -> str:
    """A short name for a log's files in an export: its file name and a digest of its full path."""
    path = Path(log_path).resolve()
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    stem = "".join(c if c.isalnum() or c in "-_" else "_" for c in path.stem)[:40]
    return f"{stem}-{digest}"


def _sql_text(path: Path) -> str:
    return path.as_posix().replace("'", "''")


def _select(table: str) -> str:
    if table == "runs":
        return f"SELECT *, {_parts('runs')} FROM runs"
    return f"SELECT t.*, {_parts('r')} FROM {table} t JOIN runs r USING (run_id)"


def _own_parts(folder: Path, name: str) -> list[Path]:
    """A log's files in a partitioned table's folder: ``NAME_<i>.parquet`` exactly (a longer name is another log's)."""
    exact = re.compile(re.escape(name) + r"_\d+\.parquet")
    return [path for path in folder.glob(f"**/{glob.escape(name)}_*.parquet") if exact.fullmatch(path.name)]


def _log_files(directory: Path, table: str, name: str) -> list[Path]:
    """A log's files of one table: its partitions, or its one ``NAME.parquet`` (named whether or not it is there)."""
    target = directory / table
    return _own_parts(target, name) if table in _PARTITIONED else [target / f"{name}.parquet"]


def _mark_unfinished(directory: Path, name: str, log_path: Path, began: datetime) -> Path:
    """Write the log's marker, on disk before anything of the log is removed or written."""
    marker = inside(directory, directory / f"{name}{UNFINISHED}")
    line = json.dumps({"log": str(log_path.resolve()), "began": began.isoformat()}) + "\n"
    write_private(marker, line.encode())
    try:
        fsync_file(marker)
        fsync_dir(directory)
    except OSError as exc:
        raise StoreError(f"cannot write {marker}: {exc.strerror or exc}") from None
    return marker


def _sync_tables(directory: Path, name: str) -> None:
    """Put the log's table files, and the folders naming them, on disk (the marker goes only after them)."""
    folders = {directory}
    try:
        for table in TABLES:
            target = directory / table
            for file in _log_files(directory, table, name):
                fsync_file(file)
                folders.update(parent for parent in file.parents if parent.is_relative_to(target))
        for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):  # deepest first
            fsync_dir(folder)
    except OSError as exc:
        raise StoreError(f"cannot write the export of {name} to disk: {exc.strerror or exc}") from None


def _refuse_bad_names(log: EventLog) -> None:
    """A body hash or a partition value outside its grammar (``fae.store.names``) stops the export before any file."""
    (bad,) = log.con.execute(f"SELECT any_value(hash) FROM blobs WHERE NOT {BLOB_HASH_SQL}").fetchall()[0]
    if bad is not None:
        check_hash(bad, f"log {log.path}")
    for column in ("suite", "experiment"):
        (value,) = log.con.execute(
            f"SELECT any_value({column}) FROM runs WHERE {column} IS NOT NULL AND NOT {PARTITION_SQL.format(column)}"
        ).fetchall()[0]
        if value is not None:
            raise StoreError(
                f"log {log.path} has a run whose {column} {shown(value)} cannot name a folder of the export "
                f"(1 to {PARTITION_MAX} characters, no control characters); nothing was exported"
            )


def export_parquet(
    log_path: str | Path, directory: str | Path, on_step: Callable[[int, int, str], None] | None = None
) -> list[tuple[Path, int]]:
    """Export every table into ``directory`` (partitioned); returns (table folder, rows) for each.
    ``on_step(done, total, name)`` is told as each table (then the body files) starts.

    The log is opened able to write into ``directory`` alone; a body hash or partition value outside its grammar
    is refused before any file is touched. The log's marker (``UNFINISHED``) stays in ``directory`` from before
    its first file is replaced until its last is on disk, so a stopped or failed export is refused by every
    reader."""
    directory = Path(directory)
    name = log_id(log_path)
    written = []
    with EventLog(log_path, read_only=True, folders=[directory]) as log:
        _refuse_bad_names(log)
        keep_private()  # the exports hold every body in the log
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create {directory}: {exc.strerror}") from None
        marker = _mark_unfinished(directory, name, Path(log_path), datetime.now(UTC))
        told = on_step or (lambda done, total, name: None)
        for index, table in enumerate(TABLES):
            told(index, len(TABLES) + 1, table)
            target = directory / table
            try:
                if table in _PARTITIONED:
                    for stale in _own_parts(target, name):
                        stale.unlink()  # this log's files from an earlier export; the new ones replace them
                    log.con.execute(
                        f"COPY ({_select(table)}) TO '{_sql_text(target)}' (FORMAT parquet, COMPRESSION zstd,"
                        f" PARTITION_BY (part_suite, part_experiment, day), FILENAME_PATTERN '{name}_{{i}}',"
                        f" OVERWRITE_OR_IGNORE, WRITE_PARTITION_COLUMNS false, ROW_GROUP_SIZE {_EVENT_GROUP_ROWS})"
                    )
                else:
                    target.mkdir(exist_ok=True)
                    remove_stale(target / f"{name}.parquet")  # fresh and owner-only, never through a link
                    # small row groups: a rejudge of the export reads the few that hold a chunk's bodies
                    log.con.execute(
                        f"COPY (SELECT * FROM {table}) TO '{_sql_text(target / name)}.parquet'"
                        f" (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {_ROW_GROUP_ROWS})"
                    )
                (count,) = log.con.execute(f"SELECT count(*) FROM {table}").fetchall()[0]
            except (duckdb.Error, OSError) as exc:
                raise StoreError(f"cannot export {table}: {exc}") from None
            written.append((target, int(count)))
        told(len(TABLES), len(TABLES) + 1, "bodies")
        for (digest,) in log.con.execute("SELECT DISTINCT hash FROM blobs WHERE external").fetchall():
            copy_body(log.path, directory / "bodies", digest, fsync=True)  # the hash's grammar checked again there
    _sync_tables(directory, name)
    told(len(TABLES) + 1, len(TABLES) + 1, "written")
    try:
        marker.unlink()
    except OSError as exc:
        raise StoreError(f"cannot remove {marker}: {exc.strerror}") from None
    return written


def drop_export(directory: str | Path, name: str) -> int:
    """Remove one log's files, and its marker, from an export directory; returns how many files went.

    ``name`` is the log's name in the directory (``log_id``: its files' and its marker's stem). This is how
    a directory is repaired when the log of an unfinished export is gone or has moved (exporting it from
    another path names it anew). The log's marker is there from before its first file goes until after its
    last, so a drop stopped part way is refused like an unfinished export (and finished by dropping again). Left in
    place: body side files (``bodies/``, shared by every log) and the verdicts ``fae rejudge --parquet``
    added (``<batch>_N.parquet``): they name runs the directory no longer holds, and every view joins runs.
    """
    directory = Path(directory)
    if not name or name != Path(name).name or name in (".", ".."):
        raise StoreError(
            f"{name!r} is not the name of a log's files (a log's name is the stem of its marker "
            "or of its files, e.g. fae-0123456789)"
        )
    marker = directory / f"{name}{UNFINISHED}"
    files = [path for table in TABLES for path in _log_files(directory, table, name) if path.is_file()]
    if not files and not marker.exists():
        raise StoreError(f"{directory} holds no file of a log named {name!r}")
    try:
        if not marker.exists():  # readers refuse the directory from now until the last file is gone
            write_private(marker, json.dumps({"drop": name, "began": datetime.now(UTC).isoformat()}).encode() + b"\n")
            fsync_file(marker)
            fsync_dir(directory)
        for path in files:
            path.unlink()
        for folder in sorted({path.parent for path in files}):
            fsync_dir(folder)
        marker.unlink()
        fsync_dir(directory)
    except OSError as exc:
        raise StoreError(f"cannot remove the files of {name} from {directory}: {exc.strerror or exc}") from None
    return len(files)


def refuse_unfinished(directory: str | Path) -> None:
    """A StoreError naming the log, and the command that repairs it, when ``directory`` holds an unfinished export."""
    markers = sorted(Path(directory).glob(f"*{UNFINISHED}"))
    if not markers:
        return
    marker = markers[0]
    try:
        log = json.loads(marker.read_text().splitlines()[0])["log"]
    except (OSError, ValueError, IndexError, KeyError, TypeError):
        log = None  # a marker fae did not write whole: its name still says which log
    name = marker.name.removesuffix(UNFINISHED)
    which = f"log {log}" if log else f"log {name}"
    others = f" (and {len(markers) - 1} more)" if len(markers) > 1 else ""
    raise StoreError(
        f"the export of {which} into {directory} did not finish ({marker.name} is there){others};"
        f" export it again: `fae export --parquet {directory} --log {log or 'LOG'}`, or, if that log"
        f" is gone or has moved, remove its files: `fae export --parquet {directory} --drop {name}`"
    )


def open_parquet(directory: str | Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the log's tables over an export directory, and the log's views over those."""
    directory = Path(directory)
    refuse_unfinished(directory)
    if not (directory / "runs").is_dir():
        raise StoreError(f"{directory} holds no fae export (no runs/ folder); `fae export --parquet` writes one")
    con = duckdb.connect()
    for table in TABLES:
        files = [p for p in (directory / table).glob("**/*.parquet")]
        if not files:
            raise StoreError(f"{directory / table} holds no Parquet files")
        pattern = _sql_text(directory / table) + ("/**/*.parquet" if table in _PARTITIONED else "/*.parquet")
        con.execute(
            f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{pattern}',"
            f" hive_partitioning = {'true' if table in _PARTITIONED else 'false'}, union_by_name = true)"
        )
    for view, sql in VIEWS.items():
        con.execute(f"CREATE VIEW {view} AS {sql}")
    return con


def query_parquet(directory: str | Path, sql: str, params: list[Any] | None = None) -> tuple[list[str], list[tuple]]:
    """Run one read query over an export directory, with the same views as a log, in the same sandbox.

    Only the export directory can be read (DuckDB's ``allowed_directories`` with external access
    off); the statement is checked as on a log (one query whose plan writes nothing).
    """
    con = open_parquet(directory)
    try:
        lock_down(con, "1GB", folders=[Path(directory)])
        return run_query(con, sql, params, None)
    except duckdb.Error as exc:
        raise StoreError(f"bad SQL: {exc}") from None
    finally:
        con.close()
