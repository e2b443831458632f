"""Runs read back from a Parquet export (``fae export --parquet DIR``) instead of a log, for judging them.

An export keeps no row ids, so a run's place is the export file (``<log id>_N.parquet``) and row its events
lie in. ``locate_export`` finds, for the runs asked for, the files that hold their events, how many there are,
and the log they came from (whose ``blobs/<log id>.parquet`` holds their bodies); it refuses an export that
cannot be judged as it stands (a log's export unfinished, a run twice, a blobs file missing) before anything
is judged. ``export_runs`` reads one shard's runs with one query over those files only, in the order they
were written, and fetches each chunk's bodies in bulk, handing out the same ``RunLog`` values as the log's
own loaders.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from fae.errors import StoreError, first_line
from fae.replay.source import BodyCache, RunLog, decode_rows, needed_hashes
from fae.replay.stream import (
    CHUNK_RUNS,
    LEAN,
    BlobLocator,
    Span,
    StreamStats,
    by_variation,
    completed_runs,
    fetch_bodies,
)
from fae.store.bodies import read_body_in
from fae.store.export import refuse_unfinished

_EVENT_COLUMNS = "run_id, seq, kind, epoch_us(wall_time), mono_ns, actor, upstream, payload"


def sql_text(path: str | Path) -> str:
    return Path(path).as_posix().replace("'", "''")


def file_list(files: Iterable[str | Path]) -> str:
    """A DuckDB list literal of file paths."""
    return "[" + ", ".join(f"'{sql_text(f)}'" for f in files) + "]"


def unreadable(directory: str | Path, exc: duckdb.Error) -> StoreError:
    """One line for an export DuckDB cannot read (its message's first line: the file and what is wrong)."""
    return StoreError(f"cannot read the export {directory}: {first_line(exc)}")


def export_log_id(file: str | Path) -> str:
    """The log an export file came from: its name is ``<log id>_N.parquet`` (``fae/store/export.py``)."""
    stem = Path(file).name.removesuffix(".parquet")
    return stem.rpartition("_")[0] or stem


@dataclass(frozen=True)
class ExportShard:
    """The files one shard reads: its runs' event files, and each run's log's blobs file (paths every node sees)."""

    directory: str
    event_files: tuple[str, ...]
    run_blobs: dict[str, str]  # run id -> the blobs file of the log it came from

    @property
    def blob_files(self) -> list[str]:
        return sorted(set(self.run_blobs.values()))


@dataclass
class ExportLayout:
    """The runs to judge in the order their events were written, with the files each needs."""

    directory: Path
    spans: list[Span]
    event_files: dict[str, tuple[str, ...]] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)  # run id -> the log id it was exported from

    def shard(self, part: Sequence[Span]) -> ExportShard:
        files = sorted({f for s in part for f in self.event_files.get(s.run_id, ())})
        return ExportShard(
            str(self.directory),
            tuple(files),
            {s.run_id: str(self.directory / "blobs" / f"{self.logs[s.run_id]}.parquet") for s in part},
        )


def _glob(directory: Path, table: str) -> str:
    return f"'{sql_text(directory / table)}/**/*.parquet'"


def locate_export(
    con: duckdb.DuckDBPyConnection, directory: Path, ids: Sequence[str], *, lean: bool = True
) -> ExportLayout:
    """Where the events of these runs lie in the export at ``directory``; a StoreError for an export that
    cannot be judged as it stands."""
    refuse_unfinished(directory)
    try:
        homes = con.execute(
            "SELECT run_id, list(DISTINCT filename ORDER BY filename), bool_and(TRY_CAST(variation AS INTEGER) IS NOT"
            ' NULL AND TRY_CAST("repeat" AS INTEGER) IS NOT NULL) FROM read_parquet('
            f"{_glob(directory, 'runs')}, filename = true, union_by_name = true) WHERE run_id IN (SELECT unnest(?))"
            " GROUP BY run_id",
            [list(ids)],
        ).fetchall()
        located = con.execute(
            f"SELECT run_id, filename, count(*), min(file_row_number) FROM read_parquet({_glob(directory, 'events')},"
            " filename = true, file_row_number = true, union_by_name = true)"
            " WHERE run_id IN (SELECT unnest(?))" + (LEAN if lean else "") + " GROUP BY run_id, filename",
            [list(ids)],
        ).fetchall()
    except duckdb.Error as exc:
        raise unreadable(directory, exc) from None
    layout = ExportLayout(directory, [])
    for run_id, files, numbered in homes:
        logs = sorted({export_log_id(f) for f in files})
        if len(files) > 1:
            raise StoreError(
                f"run {run_id} is in the export {directory} more than once (from {', '.join(logs)});"
                " a run is judged from one log: export the logs into separate directories"
            )
        if not numbered:
            raise StoreError(
                f"run {run_id} in the export {directory} has no whole-number variation or repeat, so"
                " it cannot be judged: export its log again with `fae export --parquet`"
            )
        layout.logs[run_id] = logs[0]
    missing_blobs = sorted(
        {log for log in layout.logs.values() if not (directory / "blobs" / f"{log}.parquet").is_file()}
    )
    if missing_blobs:
        raise StoreError(
            f"the export {directory} has no blobs/{missing_blobs[0]}.parquet (the bodies of log "
            f"{missing_blobs[0]}'s runs): export that log again with `fae export --parquet`"
        )
    where: dict[str, list[tuple[str, int, int]]] = {}
    for run_id, filename, count, first in located:
        where.setdefault(run_id, []).append((filename, int(first), int(count)))
    order = []
    for run_id in ids:
        places = sorted(where.get(run_id, []))
        layout.event_files[run_id] = tuple(f for f, _, _ in places)
        order.append(((places[0][0], places[0][1]) if places else ("", -1), run_id, sum(c for _, _, c in places)))
    for index, (_, run_id, events) in enumerate(sorted(order)):
        layout.spans.append(Span(run_id, index, index, events))
    return layout


class ExportBodies(BodyCache):
    """Bodies from an export's blobs files, found as a log's are (``fetch_bodies``): walking each file's hashes
    near where the shard's bodies lie, then reading only the row groups that hold them; large ones from
    ``DIR/bodies/``."""

    def __init__(self, shard: ExportShard, stats: StreamStats, memory: str):
        super().__init__(log=None)  # type: ignore[arg-type]  # never queried: ``load`` reads the export
        self.shard = shard
        self.stats = stats
        self.owner = f"the export {shard.directory}"
        self.readers: dict[str, tuple[duckdb.DuckDBPyConnection, BlobLocator]] = {}
        for blob_file in shard.blob_files:
            con = reading_connection(memory=memory)
            columns = {
                row[0]
                for row in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{sql_text(blob_file)}')").fetchall()
            }
            external = "external" if "external" in columns else "false"  # exported before large bodies had files
            con.execute(
                f"CREATE VIEW blobs AS SELECT file_row_number AS rowid, hash, data, {external} AS external"
                f" FROM read_parquet('{sql_text(blob_file)}', file_row_number = true)"
            )
            self.readers[blob_file] = (con, BlobLocator(con))

    def _read(self, hash_: str, data: bytes | None, external: bool | None) -> bytes:
        if external:
            return read_body_in(Path(self.shard.directory) / "bodies", hash_, self.owner)
        return bytes(data or b"")

    def fetch(self, wanted: dict[str, set[str]]) -> None:
        """A chunk's bodies at hand; ``wanted``: run id -> the hashes it names."""
        by_file: dict[str, set[str]] = {}
        for run_id, hashes in wanted.items():
            by_file.setdefault(self.shard.run_blobs[run_id], set()).update(hashes)
        chunk: dict[str, bytes] = {}
        for blob_file, hashes in by_file.items():
            con, locator = self.readers[blob_file]
            chunk.update(fetch_bodies(con, self._read, self, locator, hashes - chunk.keys(), self.stats))
        self.hold(chunk)

    def load(self, hash_: str) -> bytes | None:
        for con, _ in self.readers.values():
            row = con.execute("SELECT data, external FROM blobs WHERE hash = ? LIMIT 1", [hash_]).fetchone()
            if row is not None:
                return self._read(hash_, *row)
        return None

    def close(self) -> None:
        for con, locator in self.readers.values():
            self.stats.hashes_walked += locator.scanned
            self.stats.seeks += locator.seeks
            locator.close()
            con.close()


def export_runs(
    con: duckdb.DuckDBPyConnection,
    shard: ExportShard,
    part: Sequence[Span],
    *,
    lean: bool = True,
    chunk: int = CHUNK_RUNS,
    stats: StreamStats | None = None,
    memory: str = "128MB",
) -> Iterator[RunLog]:
    """The runs of one shard of an export, each handed out once all its events are read (``con`` reads the
    events; each blobs file gets a connection of its own, with ``memory`` as its limit)."""
    stats = stats if stats is not None else StreamStats()
    ids = [s.run_id for s in part]
    directory = Path(shard.directory)
    bodies: ExportBodies | None = None
    try:
        meta = {
            row[0]: row
            for row in con.execute(
                "SELECT run_id, task_id, variation, agent, repeat, status FROM read_parquet("
                f"{_glob(directory, 'runs')}, union_by_name = true) WHERE run_id IN (SELECT unnest(?))",
                [ids],
            ).fetchall()
        }
        for run_id in ids:
            if run_id not in meta:
                raise StoreError(f"no run {run_id!r} in the export {directory}")
        bodies = ExportBodies(shard, stats, memory)
        expected = {s.run_id: s.events for s in part}
        found = bodies

        def emit(batch: list[tuple[str, list[tuple]]]) -> Iterator[RunLog]:
            batch = by_variation(batch, meta)
            found.fetch({run_id: set(needed_hashes(rows)) for run_id, rows in batch})
            for run_id, rows in batch:
                if len(rows) != expected[run_id]:
                    raise StoreError(
                        f"the export {directory} changed while it was judged: run {run_id} has "
                        f"{len(rows)} events, {expected[run_id]} when the rejudge began"
                    )
                rows.sort(key=lambda r: r[1])
                row = meta[run_id]
                stats.runs += 1
                yield RunLog.of_row(row, decode_rows(rows), found)

        yield from emit([(s.run_id, []) for s in part if s.events == 0])
        spanned = {s.run_id: s.events for s in part if s.events}
        if spanned:
            with con.cursor() as cursor:
                cursor.execute(
                    f"SELECT {_EVENT_COLUMNS} FROM read_parquet({file_list(shard.event_files)},"
                    " union_by_name = true) WHERE run_id IN (SELECT unnest(?))" + (LEAN if lean else ""),
                    [list(spanned)],
                )
                for complete in completed_runs(cursor, spanned, chunk):
                    yield from emit(complete)
    except duckdb.Error as exc:
        raise unreadable(directory, exc) from None
    finally:
        if bodies is not None:
            bodies.close()


def reading_connection(threads: int = 1, memory: str = "128MB") -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB for reading an export: one thread (one worker, one core), bounded memory."""
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute(f"SET memory_limit = '{memory}'")
    return con
