"""A recorded run read back from the log: its row, its decoded events, and its bodies.

Loading is batched: many runs' events come in one query and their bodies in
another, so rejudging ten thousand runs costs a few queries per chunk, not a
few per run. Seed bodies are shared by every repeat of a variation and are
cached across chunks.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import msgspec

from fae.errors import ReplayDrift, StoreError
from fae.store import events as ev
from fae.store.bodies import body_of

CHUNK = 400


class Queryable(Protocol):
    """What a log reader offers: EventLog and LogReader both fit (``path`` finds bodies kept in side files)."""

    @property
    def path(self) -> Path: ...

    def query(self, sql: str, params: Sequence[Any] | None = None) -> tuple[list[str], list[tuple]]: ...


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Recorded(msgspec.Struct, frozen=True):
    """One event as recorded: its seq, times and actor, and the decoded event."""

    seq: int
    wall_us: int  # wall-clock time in microseconds since the epoch (UTC)
    mono_ns: int
    actor: str | None
    upstream: str | None
    event: ev.Event

    @property
    def wall_time(self) -> datetime:
        """The wall-clock time as an aware UTC datetime (made on demand: judging never needs it)."""
        return _EPOCH + timedelta(microseconds=self.wall_us)


@dataclass(slots=True)
class RunLog:
    """Everything the log holds about one run, decoded; bodies fetched on demand."""

    run_id: str
    task_id: str
    variation: int
    agent: str
    repeat: int
    status: str
    events: list[Recorded]
    _bodies: BodyCache = field(repr=False)

    @classmethod
    def of_row(cls, row: Sequence[Any], events: list[Recorded], bodies: BodyCache) -> RunLog:
        """The run of a (run_id, task_id, variation, agent, repeat, status) row of the runs table, with its
        decoded events and where its bodies are."""
        run_id, task_id, variation, agent, repeat, status = row
        return cls(run_id, task_id, int(variation), agent, int(repeat), status, events, bodies)

    def body(self, hash_: str | None) -> bytes | None:
        """A body by its content hash (None for None)."""
        return None if hash_ is None else self._bodies.get(hash_)

    def of(self, kind: type[ev.Event]) -> list[Recorded]:
        """The events of one type, in seq order."""
        return [r for r in self.events if type(r.event) is kind]

    def first(self, kind: type[ev.Event]) -> Recorded | None:
        for recorded in self.events:
            if type(recorded.event) is kind:
                return recorded
        return None

    def last(self, kind: type[ev.Event]) -> Recorded | None:
        for recorded in reversed(self.events):
            if type(recorded.event) is kind:
                return recorded
        return None


class BodyCache:
    """Bodies by hash: the current chunk's bodies, and a bounded cache of earlier ones (seeds are shared)."""

    def __init__(self, log: Queryable, capacity: int = 4096, capacity_bytes: int = 64 << 20):
        self.log = log
        self.capacity = capacity
        self.capacity_bytes = capacity_bytes
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self._chunk: dict[str, bytes] = {}

    def keep(self, hash_: str, data: bytes) -> None:
        """Remember a body in the cache, bounded in count and in bytes (least recently used go first)."""
        old = self._cache.pop(hash_, None)
        if old is not None:
            self._bytes -= len(old)
        self._cache[hash_] = data
        self._bytes += len(data)
        while len(self._cache) > self.capacity or (self._bytes > self.capacity_bytes and len(self._cache) > 1):
            _, dropped = self._cache.popitem(last=False)
            self._bytes -= len(dropped)

    def prefetch(self, hashes: Iterable[str]) -> None:
        """Fetch a chunk's bodies in bulk; they stay at hand until the next prefetch, whatever the capacity."""
        chunk: dict[str, bytes] = {}
        wanted = []
        for hash_ in set(hashes):
            if not hash_:
                continue
            found = self._cache.get(hash_)
            if found is None:
                wanted.append(hash_)
            else:
                chunk[hash_] = found
        wanted.sort()
        for start in range(0, len(wanted), 2000):
            for hash_, _, data, external in blob_rows_by_hash(self.log, wanted[start : start + 2000]):
                chunk[hash_] = body = body_of(self.log.path, hash_, data, external)
                self.keep(hash_, body)
        self._chunk = chunk

    def cached(self, hash_: str) -> bytes | None:
        """A body already at hand (this chunk's or the bounded cache's), without a query."""
        found = self._chunk.get(hash_)
        if found is None:
            found = self._cache.get(hash_)
            if found is not None:
                self._cache.move_to_end(hash_)  # least recently used goes first: shared seeds stay
        return found

    def hold(self, chunk: dict[str, bytes]) -> None:
        """Make these bodies the current chunk's: at hand until the next chunk, whatever the capacity."""
        self._chunk = chunk

    def get(self, hash_: str) -> bytes | None:
        found = self._chunk.get(hash_)
        if found is not None:
            return found
        found = self._cache.get(hash_)
        if found is not None:
            return found
        data = self.load(hash_)
        if data is not None:
            self.keep(hash_, data)
        return data

    def load(self, hash_: str) -> bytes | None:
        """One body read from where the bodies are kept (the slow path: a query by hash)."""
        _, rows = self.log.query("SELECT data, external FROM blobs WHERE hash = ? LIMIT 1", [hash_])
        return body_of(self.log.path, hash_, *rows[0]) if rows else None


def blob_rows_at(log: Queryable, positions: Sequence[int]) -> list[tuple]:
    """(hash, row id, data, external) of the ``blobs`` rows at these row ids (sorted)."""
    if not positions:
        return []
    _, rows = log.query(
        "SELECT hash, rowid, data, external FROM blobs WHERE rowid BETWEEN ? AND ? AND rowid IN (SELECT unnest(?))",
        [positions[0], positions[-1], list(positions)],
    )
    return rows


def blob_rows_by_hash(log: Queryable, hashes: Sequence[str]) -> list[tuple]:
    """(hash, row id, data, external) of each of these bodies the log holds, once each.

    Two queries: the row ids from the hash column alone, then the rows at those ids. Matching the hashes
    and reading the bodies in one query would decompress every body's block before the join drops the
    rows (DuckDB only pushes a single ``hash = ?`` into the scan): seconds at 100,000 runs for a few bodies.
    """
    if not hashes:
        return []
    _, found = log.query("SELECT min(rowid) FROM blobs WHERE hash IN (SELECT unnest(?)) GROUP BY hash", [list(hashes)])
    return blob_rows_at(log, sorted(rowid for (rowid,) in found))


_WRITE_HINTS = ("POST", "PUT", "PATCH", "DELETE")


class _BodyRefs(msgspec.Struct):
    """The body hashes an event names, read without decoding the rest of it."""

    seed_blob: str | None = None
    task_blob: str | None = None
    state_blob: str | None = None
    method: str | None = None
    request_blob: str | None = None
    response_blob: str | None = None
    decoded_blob: str | None = None


_body_refs = msgspec.json.Decoder(_BodyRefs)


def needed_hashes(rows: Iterable[tuple]) -> Iterator[str]:
    """The bodies every judge reads — seed, the run's kept task, capture, FHIR write request and response, and
    what the verifier read back (``ensure_record`` compares it with the fold) — from raw event rows."""
    for _, _, kind, _, _, actor, upstream, payload in rows:
        if kind not in ("SandboxSeeded", "TaskRendered", "StateCaptured") and not (
            kind == "HttpExchanged" and upstream == "fhir"
        ):
            continue
        try:
            refs = _body_refs.decode(payload)
        except msgspec.DecodeError:
            continue  # the full decode of this event reports it
        if kind == "SandboxSeeded":
            if refs.seed_blob:
                yield refs.seed_blob
        elif kind == "TaskRendered":
            if refs.task_blob:
                yield refs.task_blob
        elif kind == "StateCaptured":
            if refs.state_blob:
                yield refs.state_blob
        elif refs.method in _WRITE_HINTS or actor == "verifier":
            if refs.decoded_blob or refs.response_blob:
                yield refs.decoded_blob or refs.response_blob  # type: ignore[misc]
            if refs.request_blob:
                yield refs.request_blob


def decode_rows(rows: Sequence[tuple]) -> list[Recorded]:
    """One run's raw event rows as decoded events."""
    found = []
    for run_id, seq, kind, wall_us, mono_ns, actor, upstream, payload in rows:
        try:
            event = ev.decode(payload)
        except Exception as exc:  # a payload this code cannot read is the user's to know about
            if kind not in ev.EVENT_TYPES:
                raise ReplayDrift(
                    f"event kind {kind!r} is unknown to this fae: the log was written by a newer one; upgrade fae "
                    "to read it",
                    run_id=run_id,
                    seq=seq,
                ) from None
            raise ReplayDrift(f"event payload cannot be decoded: {exc}", run_id=run_id, seq=seq) from None
        found.append(Recorded(seq, wall_us, mono_ns, actor, upstream, event))
    return found


def run_ids(log: Queryable, pattern: str | None = None, *, statuses: Sequence[str] | None = None) -> list[str]:
    """Run ids in a stable order, optionally filtered (see ``runs_filter``)."""
    where, params = runs_filter(pattern)
    if statuses:
        where.append("status IN (SELECT unnest(?))")
        params.append(list(statuses))
    sql = "SELECT run_id FROM runs" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY run_id"
    _, rows = log.query(sql, params)
    return [r for (r,) in rows]


_FILTER_KEYS = {
    "task": "task_id",
    "agent": "agent",
    "status": "status",
    "suite": "suite",
    "experiment": "experiment",
    "phase": "phase",
    "variation": "variation",
    "run": "run_id",
}


def runs_filter(pattern: str | None) -> tuple[list[str], list[Any]]:
    """SQL conditions for a --runs filter: a run-id glob (``rec-*``), or ``key=value[,key=value]``."""
    if not pattern:
        return [], []
    where: list[str] = []
    params: list[Any] = []
    if "=" not in pattern:
        where.append("run_id GLOB ?")
        params.append(pattern)
        return where, params
    for part in pattern.split(","):
        key, _, value = part.partition("=")
        column = _FILTER_KEYS.get(key.strip())
        if column is None or not value.strip():
            raise StoreError(
                f"--runs {pattern!r}: use a run-id glob or key=value with key one of {', '.join(sorted(_FILTER_KEYS))}"
            )
        if column == "variation":
            try:
                params.append(int(value))
            except ValueError:
                raise StoreError(f"--runs {pattern!r}: variation must be a number") from None
            where.append("variation = ?")
        else:
            where.append(f"{column} GLOB ?")
            params.append(value.strip())
    return where, params


def load_runs(
    log: Queryable, ids: Sequence[str], *, chunk: int = CHUNK, bodies: BodyCache | None = None, lean: bool = False
) -> Iterator[RunLog]:
    """The runs with these ids, in the given order, loaded a chunk at a time.

    A chunk costs three queries: its runs, its events, and the bodies judges read
    (found from the raw events without decoding them). Each run's events are
    decoded only when the run is handed out, so a chunk's decoded events are never
    all alive at once (which keeps the garbage collector's passes short).

    ``lean`` leaves out what judges never read: the HTTP envelopes of MCP and LLM
    exchanges (their ToolCalled and LlmCalled events stay) and streamed chunks.
    """
    skip = (
        " AND NOT (kind = 'ChunkReceived' OR (kind = 'HttpExchanged' AND upstream IS DISTINCT FROM 'fhir'))"
        if lean
        else ""
    )
    cache = bodies or BodyCache(log)
    for start in range(0, len(ids), chunk):
        part = list(ids[start : start + chunk])
        _, run_rows = log.query(
            "SELECT run_id, task_id, variation, agent, repeat, status FROM runs WHERE run_id IN (SELECT unnest(?))",
            [part],
        )
        rows_by_id = {row[0]: row for row in run_rows}
        # the rows' ids from the narrow columns first: matching run ids in the query that reads the payloads
        # would decompress every event's payload in the log (as with bodies, ``blob_rows_by_hash``)
        _, found = log.query("SELECT rowid FROM events WHERE run_id IN (SELECT unnest(?))" + skip, [part])
        positions = sorted(rowid for (rowid,) in found)
        _, event_rows = (
            log.query(
                "SELECT run_id, seq, kind, epoch_us(wall_time), mono_ns, actor, upstream, payload FROM events"
                " WHERE rowid BETWEEN ? AND ? AND rowid IN (SELECT unnest(?)) ORDER BY run_id, seq",
                [positions[0], positions[-1], positions],
            )
            if positions
            else ([], [])
        )
        cache.prefetch(needed_hashes(event_rows))
        by_run: dict[str, tuple[int, int]] = {}  # run id -> its rows' slice (rows come ordered by run id)
        first = 0
        for index in range(1, len(event_rows) + 1):
            if index == len(event_rows) or event_rows[index][0] != event_rows[first][0]:
                by_run[event_rows[first][0]] = (first, index)
                first = index
        for run_id in part:
            row = rows_by_id.get(run_id)
            if row is None:
                raise StoreError(f"no run {run_id!r} in the log")
            low, high = by_run.get(run_id, (0, 0))
            yield RunLog.of_row(row, decode_rows(event_rows[low:high]), cache)


def load_run(log: Queryable, run_id: str) -> RunLog:
    """One run."""
    return next(load_runs(log, [run_id]))
