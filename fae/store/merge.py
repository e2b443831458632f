"""Merging log shards into one log: what each cluster worker recorded, brought together.

Each shard is attached read-only and copied in one transaction: its runs and
their events, the fixed paraphrases the log lacks (``ParaphraseMade`` and its request, kept under ids of no
run), the blobs the log lacks (content addressed, so stored once;
a body kept in a side file has its file copied beside the log first),
and every verdict the log lacks. The log is opened locked down, able to open
the shards named and nothing else; each shard's catalogue and body hashes are
checked once attached, before anything of it is copied. Merging is idempotent: a run already in the
log with the same identity (task, variation, agent, repeat, start and event
count) is skipped, and a verdict row (or a judge's findings, fae/judge/facts.py) already there is not added twice. Two
different runs under one id stop the merge with an error before anything of
that shard is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from fae.errors import StoreError
from fae.store.bodies import bodies_dir, copy_body
from fae.store.events import PARAPHRASE_IDS
from fae.store.log import EventLog
from fae.store.names import BLOB_HASH_SQL, check_hash
from fae.store.opening import wal_of
from fae.store.schema import LATEST_VERSION
from fae.store.shape import check_shape, checked_version

_RUN_KEY = ("task_id", "variation", "agent", "repeat", "started_at")


@dataclass(frozen=True)
class Merged:
    """What one shard added: runs, events, blobs and verdicts, and the runs it already had."""

    shard: Path
    runs: int
    events: int
    blobs: int
    verdicts: int
    skipped_runs: int


def _sql_text(path: Path) -> str:
    return path.as_posix().replace("'", "''")


def _check_shard(path: Path, into: Path) -> None:
    if not path.exists():
        raise StoreError(f"no shard at {path}")
    if path.resolve() == into.resolve():
        raise StoreError(f"{path} is the log being merged into")
    with EventLog(path) as shard:  # a shard left by a killed worker: its journal moves in, its schema is brought up
        _refuse_bad_hashes(shard.con, "main", f"shard {path}")  # before the log merged into is even created


def _conflicts(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Run ids in both the log and the shard that name different runs."""
    same = " AND ".join(f"m.{c} IS NOT DISTINCT FROM s.{c}" for c in _RUN_KEY)
    rows = con.execute(
        "SELECT s.run_id FROM shard.runs s JOIN main.runs m USING (run_id)"
        f" WHERE NOT ({same}) OR (SELECT count(*) FROM shard.events e WHERE e.run_id = s.run_id)"
        " <> (SELECT count(*) FROM main.events e WHERE e.run_id = s.run_id) ORDER BY 1 LIMIT 3"
    ).fetchall()
    return [r for (r,) in rows]


def _value(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    """The one value of a statement that always answers one row (an aggregate, an INSERT's row count)."""
    row = con.execute(sql).fetchone()
    if row is None:
        raise StoreError(f"no row from {sql!r}")
    return row[0]


def _check_attached(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """The attached shard is a fae log at this fae's schema, and every hash in it is a body hash.

    Checked on the attached file itself (``_check_shard`` opened it a moment before, but it is read now)."""
    version, found = checked_version(con, path, "shard")
    if version != LATEST_VERSION:
        raise StoreError(f"shard {path} has schema version {version}, the log {LATEST_VERSION}")
    check_shape(con, path, "shard", views=False, found=found)
    _refuse_bad_hashes(con, "shard", f"shard {path}")


def _refuse_bad_hashes(con: duckdb.DuckDBPyConnection, database: str, where: str) -> None:
    """A StoreError when any blob hash of ``database`` is not a body hash (it would name a side file)."""
    bad = _value(con, f"SELECT any_value(hash) FROM {database}.blobs WHERE NOT {BLOB_HASH_SQL}")
    if bad is not None:
        check_hash(bad, where)


def _merge_one(con: duckdb.DuckDBPyConnection, path: Path, into: Path) -> Merged:
    con.execute(f"ATTACH '{_sql_text(path)}' AS shard (READ_ONLY)")
    try:
        _check_attached(con, path)
        clash = _conflicts(con)
        if clash:
            raise StoreError(f"shard {path} holds run {clash[0]!r}, and the log holds a different run under that id")
        columns = ", ".join(
            c
            for (c,) in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE database_name = current_database()"
                " AND table_name = 'runs' ORDER BY column_index"
            ).fetchall()
        )
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(
                "CREATE TEMP TABLE new_runs AS SELECT run_id FROM shard.runs"
                " WHERE run_id NOT IN (SELECT run_id FROM main.runs)"
            )
            runs = _value(con, "SELECT count(*) FROM new_runs")
            total = _value(con, "SELECT count(*) FROM shard.runs")
            con.execute(
                f"INSERT INTO main.runs ({columns}) SELECT {columns} FROM shard.runs"
                " WHERE run_id IN (SELECT run_id FROM new_runs)"
            )
            # side files first: a merge stopped part way leaves a spare file, never a row without its body
            for (digest,) in con.execute(
                "SELECT hash FROM shard.blobs WHERE hash NOT IN (SELECT hash FROM main.blobs)"
                " GROUP BY hash HAVING bool_and(external)"
            ).fetchall():
                copy_body(path, bodies_dir(into), digest)
            blobs = _value(
                con,
                "INSERT INTO main.blobs SELECT hash, any_value(size), arg_min(data, external), bool_and(external)"
                " FROM shard.blobs WHERE hash NOT IN (SELECT hash FROM main.blobs) GROUP BY hash",
            )
            events = _value(  # a run's events, and fixed paraphrases (kept under ids of no run) the log lacks
                con,
                "INSERT INTO main.events SELECT * FROM shard.events WHERE run_id IN (SELECT run_id FROM new_runs)"
                f" OR (starts_with(run_id, '{PARAPHRASE_IDS}') AND run_id NOT IN (SELECT run_id FROM shard.runs)"
                "     AND run_id NOT IN (SELECT DISTINCT run_id FROM main.events))",
            )
            verdicts = _value(
                con,
                "INSERT INTO main.verdicts SELECT * FROM (SELECT * FROM shard.verdicts EXCEPT ALL"
                " SELECT * FROM main.verdicts WHERE run_id IN (SELECT run_id FROM shard.runs))",
            )
            con.execute(  # what the shard's judges found under no rule (fae/judge/facts.py), the log lacks
                "INSERT INTO main.judge_facts SELECT * FROM (SELECT * FROM shard.judge_facts EXCEPT ALL"
                " SELECT * FROM main.judge_facts WHERE run_id IN (SELECT run_id FROM shard.runs))"
            )
            con.execute("DROP TABLE new_runs")
            con.execute("COMMIT")
        except BaseException:  # a stop signal too: the shard is merged whole or not at all
            _quietly(con, "ROLLBACK")
            raise
    except BaseException:
        _quietly(con, "DETACH shard")  # the error that stopped the merge is the one to report
        raise
    con.execute("DETACH shard")
    return Merged(path, int(runs), int(events), int(blobs), int(verdicts), int(total) - int(runs))


def _quietly(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Clean up after a failed merge; a clean-up that fails too must not hide why the merge failed."""
    try:
        con.execute(sql)
    except duckdb.Error:
        pass


def merge_logs(
    shards: Sequence[str | Path], into: str | Path, on_step: Callable[[int, int, str], None] | None = None
) -> list[Merged]:
    """Merge each shard into the log ``into`` (created if missing); returns what each shard added.
    ``on_step(done, total, name)`` is told as each shard starts, and when the last is merged."""
    target = Path(into)
    paths = [Path(s) for s in shards]
    if not paths:
        raise StoreError("name at least one shard to merge")
    for path in paths:
        _check_shard(path, target)
    done = []
    told = on_step or (lambda done, total, name: None)
    # the only files it may open besides the log: the shards named, each attached read-only in turn
    with EventLog(target, files=[f for path in paths for f in (path, wal_of(path))]) as log:
        for index, path in enumerate(paths):
            told(index, len(paths), path.name)
            try:
                done.append(_merge_one(log.con, path, target))
            except duckdb.Error as exc:
                raise StoreError(f"cannot merge {path} into {target}: {exc}") from None
    told(len(paths), len(paths), "merged")
    return done
