"""The journal: where a batch is made durable before DuckDB sees it.

DuckDB is built for large transactions; a commit per proxied exchange costs
milliseconds. So the writer appends each batch to a journal segment next to
the log (one ``write`` of a length-prefixed msgpack record) and answers its
caller at once; a flusher moves the journal into DuckDB in large transactions
and deletes each segment once its transaction has committed. The segment's
name is committed with it, so a segment found again after a crash is applied
exactly once. A record cut short by a kill is ignored: its caller never got an
answer, so its client never got the upstream's reply.

Durability: an append is in the kernel's page cache when its caller is
answered, which survives the process being killed (SIGKILL, a crash, an OOM
kill) but not power loss or a kernel crash. With ``fsync=True`` every append
is fsynced first (and each new segment's directory entry with it), which
survives those too, at the cost of one disk flush per batch.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import msgspec

from fae.errors import StoreError
from fae.store.files import fsync_dir
from fae.store.log import (
    Batch,
    EventRow,
    FactsRow,
    RunRow,
    RunUpdate,
    VerdictBatchCompleted,
    VerdictBatchStarted,
    VerdictRow,
)


class _Record(msgspec.Struct, array_like=True):
    blobs: dict[str, bytes]
    runs: list[RunRow]
    events: list[EventRow]
    updates: list[RunUpdate]
    verdicts: list[VerdictRow]
    verdict_batches: list[VerdictBatchStarted] = []
    completed_batches: list[VerdictBatchCompleted] = []
    external: dict[str, int] = {}
    facts: list[FactsRow] = []


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_Record)
_PREFIX = ".journal-"


def segments(log_path: Path) -> list[Path]:
    """The journal segments of a log, oldest first; a link planted among them is never read."""
    return sorted(p for p in log_path.parent.glob(log_path.name + _PREFIX + "*") if not p.is_symlink())


def read_segment(path: Path) -> Iterator[Batch]:
    """The batches in a segment; stops quietly at a record cut short."""
    data = path.read_bytes()
    offset = 0
    while offset + 4 <= len(data):
        size = int.from_bytes(data[offset : offset + 4], "big")
        if offset + 4 + size > len(data):
            return
        try:
            record = _decoder.decode(data[offset + 4 : offset + 4 + size])
        except msgspec.DecodeError:
            return
        offset += 4 + size
        yield Batch(
            blobs=record.blobs,
            runs=record.runs,
            events=record.events,
            updates=record.updates,
            verdicts=record.verdicts,
            verdict_batches=record.verdict_batches,
            completed_batches=record.completed_batches,
            external=record.external,
            facts=record.facts,
        )


class Journal:
    """Appends batches to the current segment; ``seal`` starts a new one."""

    def __init__(self, log_path: Path, *, fsync: bool = False):
        self.log_path = log_path
        self.fsync = fsync
        self._fd: int | None = None
        self.current: Path | None = None
        self.records = 0

    def _open(self) -> None:
        name = f"{self.log_path.name}{_PREFIX}{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        self.current = self.log_path.parent / name
        try:
            self._fd = os.open(self.current, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            if self.fsync:
                fsync_dir(self.log_path.parent)
        except OSError as exc:
            raise StoreError(f"cannot write the journal of {self.log_path}: {exc.strerror}") from None
        self.records = 0

    def append(self, batch: Batch) -> None:
        if self._fd is None:
            self._open()
        payload = _encoder.encode(
            _Record(
                blobs=batch.blobs,
                runs=batch.runs,
                events=batch.events,
                updates=batch.updates,
                verdicts=batch.verdicts,
                verdict_batches=batch.verdict_batches,
                completed_batches=batch.completed_batches,
                external=batch.external,
                facts=batch.facts,
            )
        )
        prefix = len(payload).to_bytes(4, "big")
        try:  # one write of both parts, without copying a large payload into a joined record
            written = os.writev(self._fd, [prefix, payload])  # type: ignore[arg-type]
        except OSError as exc:
            raise StoreError(f"cannot write the journal of {self.log_path}: {exc.strerror}") from None
        if written != len(prefix) + len(payload):
            raise StoreError(f"the journal of {self.log_path} took a short write (disk full?)")
        if self.fsync:
            try:
                os.fsync(self._fd)  # type: ignore[arg-type]
            except OSError as exc:
                raise StoreError(f"cannot fsync the journal of {self.log_path}: {exc.strerror}") from None
        self.records += 1

    def seal(self) -> Path | None:
        """Close the current segment and return it (None if nothing was appended)."""
        if self._fd is None:
            return None
        os.close(self._fd)
        self._fd = None
        sealed, self.current = self.current, None
        return sealed

    def close(self) -> None:
        self.seal()
