"""The single writer: batches appends from many coroutines into few transactions.

A caller's rows are made durable in the journal (fae/store/journal.py) before
``write`` returns, so a proxy hook that awaits it never lets an exchange
through unrecorded; a flusher then moves them into DuckDB, many callers per
transaction. ``flush`` waits until DuckDB has everything. If the journal or
DuckDB cannot be written, the writer refuses all further writes; rows already
journaled are moved into the log the next time it is opened for writing.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import anyio
import anyio.to_thread

from fae.errors import StoreError
from fae.store import bodies
from fae.store import events as ev
from fae.store.journal import Journal
from fae.store.log import Batch, EventLog, EventRow, FactsRow, RunRow, RunUpdate, VerdictRow
from fae.store.secrets import SecretValues


class Stamped:
    """An event with who caused it and when, before it gets its seq."""

    __slots__ = ("run_id", "event", "actor", "upstream", "wall_time", "mono_ns")

    def __init__(
        self,
        run_id: str,
        event: ev.Event,
        *,
        actor: str | None = None,
        upstream: str | None = None,
        wall_time: datetime | None = None,
        mono_ns: int | None = None,
    ):
        self.run_id = run_id
        self.event = event
        self.actor = actor
        self.upstream = upstream
        self.wall_time = wall_time or datetime.now(UTC)
        self.mono_ns = time.monotonic_ns() if mono_ns is None else mono_ns


class LogWriter:
    """Owns the log's writes; use through ``open_writer``."""

    def __init__(self, log: EventLog, *, linger_s: float = 0.005, fsync: bool = False):
        self.log = log
        self.journal = Journal(log.path, fsync=fsync)
        self.linger_s = linger_s
        self._seqs: dict[str, int] = log.last_seqs()
        self._queue: list[Batch] = []
        self._wake = anyio.Event()
        self._flushed = anyio.Event()
        self._failed: StoreError | None = None
        self._closing = False
        self._in_flight = False
        self._done = anyio.Event()
        self.batches_written = 0
        self.secrets = SecretValues()
        """Secret values scrubbed from every batch before it is journaled (the recorder shares its own)."""
        self.body_file_bytes = bodies.BODY_FILE_BYTES
        """Bodies at least this long go to side files (``fae.store.bodies``), never into the journal or DuckDB."""

    @property
    def healthy(self) -> bool:
        return self._failed is None

    def _rows(self, stamped: Iterable[Stamped]) -> list[EventRow]:
        rows = []
        for item in stamped:
            seq = self._seqs.get(item.run_id, 0) + 1
            self._seqs[item.run_id] = seq
            rows.append(
                EventRow(
                    run_id=item.run_id,
                    seq=seq,
                    kind=str(type(item.event).__struct_config__.tag),
                    wall_time=item.wall_time,
                    mono_ns=item.mono_ns,
                    actor=item.actor,
                    upstream=item.upstream,
                    payload=ev.encode(item.event),
                )
            )
        return rows

    def _side_files(self, blobs: Mapping[str, bodies.Body], every: bool) -> tuple[dict[str, bytes], dict[str, int]]:
        """(small bodies for the journal, large bodies — or ``every`` body — written to side files: hash → length)."""
        small: dict[str, bytes] = {}
        external: dict[str, int] = {}
        for digest, body in blobs.items():
            if len(body) < self.body_file_bytes and not (every and body):
                small[digest] = body.joined() if isinstance(body, bodies.Pieces) else body
                continue
            stored, size = bodies.write_body(self.log.path, body, self.secrets, fsync=self.journal.fsync)
            if stored != digest:  # a secret was scrubbed out: events name the clean body
                self.secrets.rename(digest, stored)
            external[stored] = size
        return small, external

    def submit(
        self,
        *,
        events: Iterable[Stamped] = (),
        blobs: Mapping[str, bodies.Body] | None = None,
        runs: Iterable[RunRow] = (),
        updates: Iterable[RunUpdate] = (),
        verdicts: Iterable[VerdictRow] = (),
        facts: Iterable[FactsRow] = (),
        side_files: bool = False,
    ) -> list[int]:
        """Make rows durable in the journal now (large bodies, or with ``side_files`` every body, in side files
        first); DuckDB gets them at the next flush. Returns the seqs."""
        if self._failed is not None:
            raise self._failed
        if self._closing:
            raise StoreError("the log writer is closed")
        seqs_before = dict(self._seqs)
        try:
            small, external = self._side_files(blobs or {}, side_files)
        except StoreError as exc:
            self._failed = exc
            raise
        batch = self.secrets.scrub_batch(
            Batch(
                blobs=small,
                runs=list(runs),
                events=self._rows(events),
                updates=list(updates),
                verdicts=list(verdicts),
                facts=list(facts),
                external=external,
            )
        )
        try:
            self.journal.append(batch)
        except StoreError as exc:
            self._seqs = seqs_before
            self._failed = exc
            raise
        self._queue.append(batch)
        self._wake.set()
        return [row.seq for row in batch.events]

    async def write(self, **rows) -> list[int]:
        """Like ``submit``, for async callers: returns once the rows are durable."""
        return self.submit(**rows)

    async def flush(self) -> None:
        """Wait until everything submitted so far is committed to DuckDB."""
        while (self._queue or self._in_flight) and self._failed is None:
            self._wake.set()
            await self._flushed.wait()
        if self._failed is not None:
            raise self._failed

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            if self._queue and not self._closing and self.linger_s:
                await anyio.sleep(self.linger_s)  # let a burst of exchanges share one transaction
            if self._queue and self._failed is None:
                taken, self._queue = self._queue, []
                self._in_flight = True
                segment = self.journal.seal()
                merged = Batch()
                for batch in taken:
                    merged.extend(batch)
                try:
                    await anyio.to_thread.run_sync(
                        functools.partial(self.log.write_batch, merged, segment=segment.name if segment else None)
                    )
                    self.batches_written += 1
                    if segment is not None:
                        segment.unlink(missing_ok=True)
                except StoreError as exc:
                    self._failed = exc  # the journal keeps the rows for the next open
                except Exception as exc:  # a writer bug must still stop the traffic
                    self._failed = StoreError(f"cannot write to log {self.log.path}: {exc}")
                finally:
                    self._in_flight = False
            flushed, self._flushed = self._flushed, anyio.Event()
            flushed.set()
            if self._closing and (not self._queue or self._failed is not None):
                self.journal.close()
                self._done.set()
                return

    async def _close(self) -> None:
        self._closing = True
        self._wake.set()


@asynccontextmanager
async def open_writer(log: EventLog, *, fsync: bool = False) -> AsyncIterator[LogWriter]:
    """Run a writer for ``log`` inside a task group; pending writes are flushed on exit.

    ``fsync``: each journal append is fsynced before its caller is answered.
    """
    writer = LogWriter(log, fsync=fsync)
    async with anyio.create_task_group() as group:
        group.start_soon(writer._run)
        try:
            yield writer
        finally:
            await writer._close()
            # drain even when the block failed: what was journaled belongs in the log now
            with anyio.CancelScope(shield=True), anyio.move_on_after(60):
                await writer._done.wait()
