"""The DuckDB event log: open and migrate a file, write batches, run queries.

One process writes a log at a time (DuckDB holds a file lock). A batch is
written in one transaction with DuckDB's appender; blobs are content
addressed and written once per hash.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import duckdb

from fae.errors import LogInUse, StoreError, first_line
from fae.store import schema, shape
from fae.store.bodies import Body, body_of, digest_of
from fae.store.files import keep_private, make_private, refuse_link
from fae.store.opening import connect_log, is_lock_error, wal_of

RUN_STATUSES = ("running", "finished", "failed", "errored", "interrupted")


def blob_hash(data: Body) -> str:
    """The content address of a body."""
    return digest_of(data)


@dataclass(frozen=True, slots=True)
class EventRow:
    """One event as stored: its key, its times, who caused it and its encoded payload."""

    run_id: str
    seq: int
    kind: str
    wall_time: datetime
    mono_ns: int
    actor: str | None
    upstream: str | None
    payload: bytes


@dataclass(frozen=True, slots=True)
class RunRow:
    run_id: str
    task_id: str
    variation: int
    agent: str
    repeat: int
    suite: str | None = None
    agent_config: dict[str, Any] = field(default_factory=dict)
    status: str = "running"
    started_at: datetime | None = None
    experiment: str | None = None
    """The experiment the run belongs to (``fae experiment run``), if any."""
    phase: str | None = None
    """The experiment's phase: ``train`` or ``eval``."""


@dataclass(frozen=True, slots=True)
class RunUpdate:
    run_id: str
    status: str
    ended_at: datetime | None = None
    stop_reason: str | None = None
    error: str | None = None
    cause: str | None = None
    """Who ended a run that did not finish: ``agent``, ``harness``, ``stack`` or ``signal``."""


@dataclass(frozen=True, slots=True)
class VerdictRow:
    run_id: str
    judge: str
    rule_set: dict[str, Any]
    rule_set_hash: str
    code_version: str
    outcome: str
    passed: bool | None
    evidence: dict[str, Any]
    judged_at: datetime
    batch: str | None = None


@dataclass(frozen=True, slots=True)
class FactsRow:
    """What a judge found of a run under no rule (``fae.judge.facts``): JSON text, for the rule sets whose
    ``inputs`` are these, from this code version."""

    run_id: str
    judge: str
    inputs: str
    code_version: str
    facts: str


@dataclass(frozen=True, slots=True)
class VerdictBatchStarted:
    """A verdict batch (a ``fae rejudge``) began: until it is completed, its verdicts are partial."""

    batch: str
    kind: str
    started_at: datetime
    planned_runs: int
    judges: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class VerdictBatchCompleted:
    """A verdict batch wrote its last verdicts (in the same transaction as this row)."""

    batch: str
    completed_at: datetime
    judged_runs: int


@dataclass(slots=True)
class Batch:
    """Everything one transaction writes."""

    blobs: dict[str, bytes] = field(default_factory=dict)
    runs: list[RunRow] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    updates: list[RunUpdate] = field(default_factory=list)
    verdicts: list[VerdictRow] = field(default_factory=list)
    verdict_batches: list[VerdictBatchStarted] = field(default_factory=list)
    completed_batches: list[VerdictBatchCompleted] = field(default_factory=list)
    external: dict[str, int] = field(default_factory=dict)
    """Bodies already in side files (``fae.store.bodies``): hash → length; their rows get no data."""
    facts: list[FactsRow] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(
            self.blobs
            or self.runs
            or self.events
            or self.updates
            or self.verdicts
            or self.verdict_batches
            or self.completed_batches
            or self.external
            or self.facts
        )

    def extend(self, other: Batch) -> None:
        self.blobs.update(other.blobs)
        self.runs.extend(other.runs)
        self.events.extend(other.events)
        self.updates.extend(other.updates)
        self.verdicts.extend(other.verdicts)
        self.verdict_batches.extend(other.verdict_batches)
        self.completed_batches.extend(other.completed_batches)
        self.external.update(other.external)
        self.facts.extend(other.facts)


def fae_version() -> str:
    """This fae's release, as its package metadata says (``fae 0.1.0``)."""
    try:
        return f"fae {metadata.version('fae')}"
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "fae (not installed)"


class EventLog:
    """An open log file. Writes go through ``write_batch`` on one thread; reads use cursors.

    Opened through ``fae.store.opening`` (locked down: no file or network access, settings locked) and checked
    against fae's catalogue (``fae.store.shape``) before anything in it is read; opened for writing, an older
    log is migrated first. ``settings``, ``folders`` and ``files``: what the caller needs set or reachable besides
    the log (``connect_log``)."""

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool = False,
        settings: Mapping[str, str | int] | None = None,
        folders: Sequence[Path] = (),
        files: Sequence[Path] = (),
    ):
        self.path = Path(path)
        self.read_only = read_only
        if read_only and not self.path.exists():
            raise StoreError(f"no log at {self.path}")
        wal = wal_of(self.path)
        if not read_only:
            refuse_link(self.path, "log")
            refuse_link(wal, "the log's WAL")
            keep_private()  # DuckDB re-creates the WAL after each checkpoint
        self.con = connect_log(self.path, read_only=read_only, settings=settings, folders=folders, files=files)
        self._lock = threading.Lock()
        try:
            if not read_only:
                make_private(self.path)
                make_private(wal)
            (self.database,) = self.con.execute("SELECT current_database()").fetchall()[0]
            self._migrate()
            self._known: set[str] | None = None  # the stored blob hashes, read at the first write that has blobs
            if not read_only:
                self._sign()
                self.replay_journal()
        except duckdb.Error as exc:
            self.con.close()
            if is_lock_error(exc):  # its WAL, held by a writer that opened the log after this connection did
                raise LogInUse(f"log {self.path} is open in another process") from None
            raise StoreError(f"log {self.path} is unreadable: {first_line(exc)}") from None
        except StoreError:
            self.con.close()
            raise

    # -- schema -------------------------------------------------------------------------

    def schema_version(self) -> int:
        """The log's schema version, its catalogue checked (``fae.store.shape``) as it is read."""
        return shape.checked_version(self.con, self.path, self.database)[0]

    def _migrate(self) -> None:
        version, found = shape.checked_version(self.con, self.path, self.database, views=self.read_only)
        if self.read_only:
            if version < schema.LATEST_VERSION:
                raise StoreError(
                    f"log {self.path} has schema version {version}, older than this fae's "
                    f"({schema.LATEST_VERSION}); run `fae migrate --log {self.path}` while nothing records"
                )
            shape.check_shape(self.con, self.path, self.database, views=True, found=found)
            return
        if version == 0:
            self.con.execute(shape.VERSION_TABLE)
        for number in range(version + 1, schema.LATEST_VERSION + 1):
            self.con.execute("BEGIN TRANSACTION")
            try:
                self.con.execute(schema.MIGRATIONS[number - 1])
                self.con.execute("INSERT INTO schema_version VALUES (?, ?)", [number, datetime.now(UTC)])
                self.con.execute("COMMIT")
            except duckdb.Error:
                self.con.execute("ROLLBACK")
                raise
        unchanged = found if version == schema.LATEST_VERSION else None
        shape.check_shape(self.con, self.path, self.database, views=False, found=unchanged)
        for name, sql in schema.VIEWS.items():
            self.con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")

    def _sign(self) -> None:
        """Note in ``log_info`` which fae created the log and which wrote to it last (``fae log info`` shows it)."""
        version = fae_version()
        self.con.execute("INSERT INTO log_info VALUES ('created_by', ?) ON CONFLICT DO NOTHING", [version])
        self.con.execute(
            "INSERT INTO log_info VALUES ('last_written_by', ?) ON CONFLICT DO UPDATE SET value = excluded.value",
            [version],
        )

    # -- writing ------------------------------------------------------------------------

    def replay_journal(self) -> int:
        """Move journal segments left by a process that stopped into the log; returns how many."""
        from fae.store.journal import read_segment, segments

        moved = 0
        for segment in segments(self.path):
            _, done = self.query("SELECT 1 FROM journal_applied WHERE segment = ?", [segment.name])
            if not done:
                merged = Batch()
                for batch in read_segment(segment):
                    merged.extend(batch)
                self.write_batch(merged, segment=segment.name)
                moved += 1
            segment.unlink()
        return moved

    def _known_blobs(self) -> set[str]:
        """Hashes already stored (blobs are written once per hash); read once, when a write first needs them."""
        if self._known is None:
            self._known = {h for (h,) in self.con.execute("SELECT hash FROM blobs").fetchall()}
        return self._known

    def write_batch(self, batch: Batch, *, segment: str | None = None) -> None:
        """Write one batch atomically (with the journal segment it empties); raises StoreError if it cannot."""
        if self.read_only:
            raise StoreError(f"log {self.path} is open read-only")
        with self._lock:
            con = self.con
            try:
                con.execute("BEGIN TRANSACTION")
                known = self._known_blobs() if batch.blobs or batch.external else set()
                new_blobs = [(h, len(d), d, False) for h, d in batch.blobs.items() if h not in known]
                new_blobs += [
                    (h, size, b"", True)
                    for h, size in batch.external.items()
                    if h not in known and h not in batch.blobs
                ]
                if new_blobs:
                    with con.appender("blobs") as appender:
                        appender.append_rows(new_blobs)
                for run in batch.runs:
                    con.execute(
                        "INSERT INTO runs (run_id, suite, task_id, variation, agent, agent_config, repeat,"
                        " status, started_at, experiment, phase) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [
                            run.run_id,
                            run.suite,
                            run.task_id,
                            run.variation,
                            run.agent,
                            json.dumps(run.agent_config, sort_keys=True),
                            run.repeat,
                            run.status,
                            run.started_at,
                            run.experiment,
                            run.phase,
                        ],
                    )
                if batch.events:
                    with con.appender("events") as appender:
                        appender.append_rows(
                            (
                                e.run_id,
                                e.seq,
                                e.kind,
                                e.wall_time,
                                e.mono_ns,
                                e.actor,
                                e.upstream,
                                e.payload.decode("utf-8"),
                            )
                            for e in batch.events
                        )
                for update in batch.updates:
                    con.execute(
                        "UPDATE runs SET status = ?, ended_at = coalesce(?, ended_at),"
                        " stop_reason = coalesce(?, stop_reason), error = coalesce(?, error),"
                        " cause = coalesce(?, cause) WHERE run_id = ?",
                        [update.status, update.ended_at, update.stop_reason, update.error, update.cause, update.run_id],
                    )
                for started in batch.verdict_batches:
                    con.execute(
                        "INSERT INTO verdict_batches (batch, kind, judges, planned_runs, started_at)"
                        " VALUES (?, ?, ?, ?, ?)",
                        [
                            started.batch,
                            started.kind,
                            json.dumps(started.judges, sort_keys=True),
                            started.planned_runs,
                            started.started_at,
                        ],
                    )
                if batch.verdicts:
                    with con.appender("verdicts") as appender:
                        appender.append_rows(
                            (
                                v.run_id,
                                v.judge,
                                json.dumps(v.rule_set, sort_keys=True),
                                v.rule_set_hash,
                                v.code_version,
                                v.outcome,
                                v.passed,
                                json.dumps(v.evidence, sort_keys=True),
                                v.judged_at,
                                v.batch,
                            )
                            for v in batch.verdicts
                        )
                if batch.facts:
                    with con.appender("judge_facts") as appender:
                        appender.append_rows(
                            (f.run_id, f.judge, f.inputs, f.code_version, f.facts) for f in batch.facts
                        )
                for completed in batch.completed_batches:
                    con.execute(
                        "UPDATE verdict_batches SET completed_at = ?, judged_runs = ? WHERE batch = ?",
                        [completed.completed_at, completed.judged_runs, completed.batch],
                    )
                if segment is not None:
                    con.execute("INSERT INTO journal_applied VALUES (?, ?)", [segment, datetime.now(UTC)])
                con.execute("COMMIT")
            except (duckdb.Error, OSError, ValueError, TypeError) as exc:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:
                    pass
                raise StoreError(f"cannot write to log {self.path}: {exc}") from None
            if new_blobs:
                self._known_blobs().update(h for h, _, _, _ in new_blobs)

    # -- reading ------------------------------------------------------------------------

    def query(self, sql: str, params: Sequence[Any] | None = None) -> tuple[list[str], list[tuple]]:
        """Run one read query on its own cursor (a consistent snapshot while writes go on)."""
        cursor = self.cursor()
        try:
            result = cursor.execute(sql, params or [])
            columns = [d[0] for d in result.description or []]
            return columns, result.fetchall()
        finally:
            cursor.close()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of the caller's own on the shared connection (never made while a batch is mid-write;
        temp tables made on it live as long as it, so close it after use)."""
        with self._lock:
            return self.con.cursor()

    def blob(self, hash_: str) -> bytes | None:
        _, rows = self.query("SELECT data, external FROM blobs WHERE hash = ? LIMIT 1", [hash_])
        return body_of(self.path, hash_, *rows[0]) if rows else None

    def last_seqs(self) -> dict[str, int]:
        _, rows = self.query("SELECT run_id, max(seq) FROM events GROUP BY run_id")
        return {run_id: int(seq) for run_id, seq in rows}

    def close(self) -> None:
        with self._lock:
            try:
                self.con.close()
            except duckdb.Error:
                pass

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
