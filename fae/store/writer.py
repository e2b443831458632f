"""The single writer: batches appends from many coroutines into few transactions.

Callers ``await writer.write(...)`` and return only once their rows are
committed, so a proxy hook that awaits it never lets an exchange through
unrecorded. Whatever is queued while a transaction runs goes into the next
one, so batches grow with load. If a write fails, every waiter gets the
StoreError and the writer refuses further writes.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import anyio
import anyio.to_thread

from fae.errors import StoreError
from fae.store import events as ev
from fae.store.log import Batch, EventLog, EventRow, RunRow, RunUpdate, VerdictRow


class Stamped:
    """An event with who caused it and when, before it gets its seq."""

    __slots__ = ("run_id", "event", "actor", "upstream", "wall_time", "mono_ns")

    def __init__(self, run_id: str, event: ev.Event, *, actor: str | None = None,
                 upstream: str | None = None, wall_time: datetime | None = None,
                 mono_ns: int | None = None):
        self.run_id = run_id
        self.event = event
        self.actor = actor
        self.upstream = upstream
        self.wall_time = wall_time or datetime.now(UTC)
        self.mono_ns = time.monotonic_ns() if mono_ns is None else mono_ns


class _Pending:
    __slots__ = ("batch", "done", "error")

    def __init__(self, batch: Batch):
        self.batch = batch
        self.done = anyio.Event()
        self.error: BaseException | None = None


class LogWriter:
    """Owns the log's writes; use through ``open_writer``."""

    def __init__(self, log: EventLog):
        self.log = log
        self._seqs: dict[str, int] = log.last_seqs()
        self._queue: list[_Pending] = []
        self._wake = anyio.Event()
        self._failed: StoreError | None = None
        self._closing = False
        self.batches_written = 0

    @property
    def healthy(self) -> bool:
        return self._failed is None

    def _rows(self, stamped: Iterable[Stamped]) -> list[EventRow]:
        rows = []
        for item in stamped:
            seq = self._seqs.get(item.run_id, 0) + 1
            self._seqs[item.run_id] = seq
            rows.append(EventRow(
                run_id=item.run_id, seq=seq, kind=type(item.event).__struct_config__.tag,
                wall_time=item.wall_time, mono_ns=item.mono_ns, actor=item.actor,
                upstream=item.upstream, payload=ev.encode(item.event),
            ))
        return rows

    def submit(self, *, events: Iterable[Stamped] = (), blobs: dict[str, bytes] | None = None,
               runs: Iterable[RunRow] = (), updates: Iterable[RunUpdate] = (),
               verdicts: Iterable[VerdictRow] = ()) -> _Pending:
        """Queue rows without waiting; seqs are fixed now, in call order."""
        if self._failed is not None:
            raise self._failed
        if self._closing:
            raise StoreError("the log writer is closed")
        batch = Batch(blobs=dict(blobs or {}), runs=list(runs), events=self._rows(events),
                      updates=list(updates), verdicts=list(verdicts))
        pending = _Pending(batch)
        self._queue.append(pending)
        self._wake.set()
        return pending

    async def write(self, **rows) -> list[int]:
        """Queue rows and wait until they are committed; returns the events' seqs."""
        pending = self.submit(**rows)
        await pending.done.wait()
        if pending.error is not None:
            raise pending.error
        return [row.seq for row in pending.batch.events]

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            if not self._queue:
                if self._closing:
                    return
                continue
            taken, self._queue = self._queue, []
            merged = Batch()
            for pending in taken:
                merged.extend(pending.batch)
            error: BaseException | None = None
            try:
                await anyio.to_thread.run_sync(self.log.write_batch, merged)
                self.batches_written += 1
            except StoreError as exc:
                error = exc
                self._failed = exc
            except Exception as exc:  # a writer bug must still reach every waiter
                error = StoreError(f"cannot write to log {self.log.path}: {exc}")
                self._failed = error  # type: ignore[assignment]
            for pending in taken:
                pending.error = error
                pending.done.set()
            if self._closing and not self._queue:
                return

    async def _close(self) -> None:
        self._closing = True
        self._wake.set()


@asynccontextmanager
async def open_writer(log: EventLog) -> AsyncIterator[LogWriter]:
    """Run a writer for ``log`` inside a task group; pending writes are flushed on exit."""
    writer = LogWriter(log)
    async with anyio.create_task_group() as group:
        group.start_soon(writer._run)
        try:
            yield writer
        finally:
            await writer._close()
