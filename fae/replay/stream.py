"""Reading many runs in one pass over the log: cost grows with the runs read, not with the log.

The chunked loader (``load_runs``) asks for each chunk's events and bodies by
run id and hash, and each of those queries scans a column of the whole log.
Here the events are streamed once, in the order they were written (a run's
events lie close together), and a run is handed out as soon as all of its
events have arrived. Bodies are found by position: a second stream walks the
blob hashes in the order they were written, which is about the order of the
events that name them, and a chunk's bodies are then read by row id. A body
stored long before (a seed bundle shared by every repeat) is kept in the
shared cache or, failing that, looked up by hash. Memory holds the runs in
flight and a window of hashes, never the log.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fae.errors import StoreError
from fae.replay.source import BodyCache, Queryable, RunLog, blob_rows_at, blob_rows_by_hash, decode_rows, needed_hashes
from fae.store.bodies import body_of

CHUNK_RUNS = 512
"""Runs read together: their bodies fetched in one query, handed out grouped by variation (``by_variation``), and
their verdicts spilled as one part. Where a suite's 147 variations take turns, 256 runs held under two of each
(1.03x the runs per CPU-second of no grouping), 512 three or four (1.09x), 1,024 no more gain (docs/scale.md)."""

LEAN = " AND NOT (kind = 'ChunkReceived' OR (kind = 'HttpExchanged' AND upstream IS DISTINCT FROM 'fhir'))"
_RUN_COLUMNS = "run_id, task_id, variation, agent, repeat, status"


@dataclass(frozen=True, slots=True)
class Span:
    """Where a run's (lean) events lie in the events table, and how many there are."""

    run_id: str
    first: int
    last: int
    events: int


def spans(log: Queryable, ids: Sequence[str], *, lean: bool = True) -> list[Span]:
    """The runs' event spans in the order they were written; runs without events come first with an empty span."""
    _, rows = log.query(
        "SELECT r.run_id, min(e.rowid), max(e.rowid), count(e.rowid) FROM (SELECT unnest(?) AS run_id) r"
        " LEFT JOIN (SELECT rowid, run_id FROM events WHERE true" + (LEAN if lean else "") + ") e USING (run_id)"
        " GROUP BY r.run_id ORDER BY min(e.rowid) NULLS FIRST, r.run_id",
        [list(ids)],
    )
    return [
        Span(run_id, -1 if first is None else int(first), -1 if last is None else int(last), int(count))
        for run_id, first, last, count in rows
    ]


def shards(found: Sequence[Span], count: int) -> list[list[Span]]:
    """Split spans (in written order) into ``count`` contiguous shards of about equally many events."""
    total = sum(max(s.events, 1) for s in found)
    parts: list[list[Span]] = [[] for _ in range(max(1, min(count, len(found))))]
    done = 0
    for span in found:
        index = min(len(parts) - 1, done * len(parts) // max(total, 1))
        parts[index].append(span)
        done += max(span.events, 1)
    return [part for part in parts if part]


class BlobLocator:
    """Row ids of blobs by hash, found by walking the hash column forward from where the bodies lie.

    The walk starts at the middle of the first bodies a shard asks for, and moves (``seek``) to where
    bodies looked up by hash turned out to lie when it has drifted away from them, so a walk that began
    in the wrong place costs one chunk of slow lookups, not all of them.
    """

    def __init__(self, con: Any, *, window: int = 65_536, look_ahead: int = 20_000):
        self.con = con
        self.window = window
        self.look_ahead = look_ahead
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._cursor: Any = None
        self._done = False
        self.position = -1  # the last row id walked
        self.start = 0  # where the walk began
        self.scanned = 0
        self.seeks = 0

    def seek(self, rowid: int) -> None:
        """Walk on from a little before this row id."""
        if self._cursor is not None:
            self._cursor.close()
        start = max(0, rowid - self.look_ahead // 2)
        self._cursor = self.con.cursor()
        self._cursor.execute("SELECT rowid, hash FROM blobs WHERE rowid >= ?", [start])
        self._done = False
        self.position = start - 1
        self.start = start
        self.seeks += 1

    def drifted(self, positions: Sequence[int], *, served: int = 0) -> None:
        """Bodies the walk missed lie at these row ids: move the walk there if they are out of its reach.

        ``served``: how many of the same chunk's bodies the walk found itself. When it found at least as many
        as it missed, it is where the chunk's bodies are and stays: the few it missed were stored long before
        (each repeat's seed bundle, at the log's start), are cached from now on, and moving the walk back to
        them would leave every later body to a lookup by hash.
        """
        if not positions or served >= len(positions):
            return
        middle = sorted(positions)[len(positions) // 2]
        # behind the walk's start nothing was seen, however near (an export's events may wrap around)
        if middle > self.position + self.look_ahead or middle < max(self.start, self.position - self.window):
            self.seek(middle)

    def find(self, hashes: Iterable[str]) -> dict[str, int]:
        """Row ids of as many of these hashes as lie near the walk; the rest are left out."""
        wanted = set(hashes)
        if self._cursor is None:
            if not wanted:
                return {}
            rows = self.con.execute(
                "SELECT rowid FROM blobs WHERE hash IN (SELECT unnest(?)) ORDER BY rowid", [sorted(wanted)]
            ).fetchall()
            self.seek(rows[len(rows) // 2][0] if rows else 0)
        found = {h: self._seen[h] for h in wanted if h in self._seen}
        missing = wanted - found.keys()
        since_last = 0
        cursor: Any = self._cursor
        while missing and not self._done and since_last < self.look_ahead:
            rows = cursor.fetchmany(4096)
            if not rows:
                self._done = True
                break
            self.scanned += len(rows)
            since_last += len(rows)
            self.position = rows[-1][0]
            for rowid, hash_ in rows:
                self._seen[hash_] = rowid
                if hash_ in missing:
                    missing.discard(hash_)
                    found[hash_] = rowid
                    since_last = 0
            while len(self._seen) > self.window:
                self._seen.popitem(last=False)
        return found

    def close(self) -> None:
        if self._cursor is not None:
            self._cursor.close()


@dataclass
class StreamStats:
    """What a pass cost: bodies read by position, from the cache, and by hash (the slow path)."""

    runs: int = 0
    by_position: int = 0
    by_hash: int = 0
    cached: int = 0
    hashes_walked: int = 0
    seeks: int = 0


BodyReader = Callable[[str, Any, Any], bytes]
"""A body from its ``blobs`` row: (hash, data, external) -> the body (a large one from its side file)."""


def fetch_bodies(
    con: Any, read: BodyReader, cache: BodyCache, locator: BlobLocator, hashes: set[str], stats: StreamStats
) -> dict[str, bytes]:
    """These bodies: from the cache, by position near the locator's walk, and the rest by hash (``blobs`` on
    ``con``, with row ids); the caller makes them the cache's current chunk."""
    chunk: dict[str, bytes] = {}
    unknown = []
    for hash_ in hashes:
        found = cache.cached(hash_)
        if found is None:
            unknown.append(hash_)
        else:
            chunk[hash_] = found
    stats.cached += len(chunk)
    located = locator.find(unknown)
    queries = ConnectionQueries(con, Path())  # a path for side-file bodies, never used: ``read`` finds those
    if located:
        rows = blob_rows_at(queries, sorted(located.values()))
        for hash_, _, data, external in rows:
            chunk[hash_] = body = read(hash_, data, external)
            cache.keep(hash_, body)
        stats.by_position += len(rows)
    rest = [h for h in unknown if h not in chunk]
    if rest:
        rows = blob_rows_by_hash(queries, rest)
        for hash_, _, data, external in rows:
            chunk[hash_] = body = read(hash_, data, external)
            cache.keep(hash_, body)
        stats.by_hash += len(rest)
        locator.drifted([rowid for _, rowid, _, _ in rows], served=len(located))
    return chunk


def stream_runs(
    con: Any,
    log_path: Path,
    part: Sequence[Span],
    *,
    lean: bool = True,
    chunk: int = CHUNK_RUNS,
    stats: StreamStats | None = None,
    window: int = 65_536,
    needed: Callable[[list[tuple]], Iterable[str]] = needed_hashes,
) -> Iterator[RunLog]:
    """The runs of one shard of the log at ``log_path`` (open on ``con``), each handed out once all its events
    are read (in about the order written). ``needed``: the bodies to fetch with a chunk, from its raw event rows
    (the ones judges read by default); any other body is read when a run asks for it."""
    stats = stats if stats is not None else StreamStats()
    ids = [s.run_id for s in part]
    meta = {
        row[0]: row
        for row in con.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id IN (SELECT unnest(?))", [ids]).fetchall()
    }
    for run_id in ids:
        if run_id not in meta:
            raise StoreError(f"no run {run_id!r} in the log")
    expected = {s.run_id: s.events for s in part}
    cache = BodyCache(ConnectionQueries(con, log_path))
    locator = BlobLocator(con, window=window, look_ahead=min(window, 20_000))
    empty = [s.run_id for s in part if s.events == 0]
    spanned = [s for s in part if s.events]

    def emit(batch: list[tuple[str, list[tuple]]]) -> Iterator[RunLog]:
        batch = by_variation(batch, meta)
        hashes = {h for _, rows in batch for h in needed(rows)}
        cache.hold(
            fetch_bodies(
                con, lambda h, data, external: body_of(log_path, h, data, external), cache, locator, hashes, stats
            )
        )
        for run_id, rows in batch:
            rows.sort(key=lambda r: r[1])
            row = meta[run_id]
            stats.runs += 1
            yield RunLog.of_row(row, decode_rows(rows), cache)

    yield from emit([(run_id, []) for run_id in empty])
    if spanned:
        cursor = con.cursor()
        try:
            cursor.execute(
                "SELECT run_id, seq, kind, epoch_us(wall_time), mono_ns, actor, upstream, payload FROM events"
                " WHERE rowid BETWEEN ? AND ?" + (LEAN if lean else ""),
                [min(s.first for s in spanned), max(s.last for s in spanned)],
            )
            for complete in completed_runs(cursor, expected, chunk):
                yield from emit(complete)
        finally:
            cursor.close()
            locator.close()
    stats.hashes_walked += locator.scanned
    stats.seeks += locator.seeks


def by_variation(batch: list[tuple[str, list[tuple]]], meta: dict[str, tuple]) -> list[tuple[str, list[tuple]]]:
    """A chunk's runs with each task variation's runs next to each other (each variation's in the order given).

    Runs of one variation share its seed and its rendered task, and judging them one after another finds
    those in the processor's caches: about a tenth less time per run than judging them in the order
    written, where a suite's variations take turns. Every run is judged alone, so verdicts do not change.
    """
    # as text: only equal keys need to meet, and a foreign export's run without a task id must not stop the sort
    return sorted(batch, key=lambda item: (str(meta[item[0]][1]), str(meta[item[0]][2])))


def completed_runs(cursor: Any, expected: dict[str, int], chunk: int) -> Iterator[list[tuple[str, list[tuple]]]]:
    """Event rows read in the order written, gathered by run: about ``chunk`` runs at a time, each run handed
    on once all ``expected[run]`` of its rows arrived (rows of runs not expected are skipped); the rest last."""
    pending: dict[str, list[tuple]] = {}
    complete: list[tuple[str, list[tuple]]] = []
    while True:
        rows = cursor.fetchmany(4096)
        if not rows:
            break
        for row in rows:
            run_rows = pending.get(row[0])
            if run_rows is None:
                if row[0] not in expected:
                    continue  # another shard's run, or one not asked for
                run_rows = pending[row[0]] = []
            run_rows.append(row)
            if len(run_rows) == expected[row[0]]:
                complete.append((row[0], pending.pop(row[0])))
        if len(complete) >= chunk:
            yield complete
            complete = []
    complete.extend(pending.items())
    yield complete


class ConnectionQueries:
    """A DuckDB connection seen as a ``Queryable`` (the shared body cache's slow path)."""

    def __init__(self, con: Any, path: Path):
        self.con = con
        self.path = path

    def query(self, sql: str, params: Sequence[Any] | None = None) -> tuple[list[str], list[tuple]]:
        result = self.con.execute(sql, params or [])
        return [d[0] for d in result.description or []], result.fetchall()
