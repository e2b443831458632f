"""A verdict batch written into a Parquet export: files of its own, complete only once all of them are in place.

A rejudge of an export (``fae rejudge --parquet DIR``) appends as a rejudge of a log does: never an edit.
``start_batch`` writes the batch's row, not completed, to ``DIR/verdict_batches/<batch>.parquet``;
``complete_batch`` writes the verdict rows partitioned like their runs into a folder of the batch's own
beside the tables, moves each file into ``DIR/verdicts/...`` (``<batch>_N.parquet``), and only then
replaces the batch's row with a completed one. A rejudge killed at any point leaves a batch that the
``batch_status`` view shows incomplete and ``fae compare`` leaves out, as in a log (killed between two
renames, some of its verdict files are in place already: a log would hold none). Where a log's export
into the directory has not finished (its ``.unfinished`` marker, fae/store/export.py), ``complete_batch``
refuses and the batch stays incomplete.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import duckdb

from fae.errors import StoreError, first_line
from fae.store.export import refuse_unfinished
from fae.store.files import keep_private
from fae.store.log import VerdictBatchStarted

_BATCH_COLUMNS = (
    "batch VARCHAR, kind VARCHAR, judges JSON, planned_runs INTEGER, started_at TIMESTAMPTZ,"
    " completed_at TIMESTAMPTZ, judged_runs INTEGER"
)


def _text(path: Path) -> str:
    return path.as_posix().replace("'", "''")


def _write_batch_row(
    directory: Path, started: VerdictBatchStarted, completed_at: datetime | None, judged: int | None
) -> None:
    """Write (or replace, in one rename) the batch's row in its own file under ``verdict_batches/``."""
    folder = directory / "verdict_batches"
    folder.mkdir(exist_ok=True)
    temporary = folder / f".incoming-{started.batch}"  # no .parquet suffix: readers never see it half written
    con = duckdb.connect()
    try:
        con.execute(f"CREATE TABLE batch ({_BATCH_COLUMNS})")
        con.execute(
            "INSERT INTO batch VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                started.batch,
                started.kind,
                json.dumps(started.judges, sort_keys=True),
                started.planned_runs,
                started.started_at,
                completed_at,
                judged,
            ],
        )
        con.execute(f"COPY batch TO '{_text(temporary)}' (FORMAT parquet)")
        os.replace(temporary, folder / f"{started.batch}.parquet")
    except (duckdb.Error, OSError) as exc:
        raise StoreError(f"cannot write verdict batch {started.batch} to {folder}: {first_line(exc)}") from None
    finally:
        con.close()


def start_batch(directory: str | Path, started: VerdictBatchStarted) -> None:
    """Mark a verdict batch started (and not complete) in the export, before any of its verdicts."""
    keep_private()
    _write_batch_row(Path(directory), started, None, None)


def complete_batch(
    directory: str | Path,
    started: VerdictBatchStarted,
    verdict_files: Sequence[str | Path],
    completed_at: datetime,
    judged: int,
) -> int:
    """Move the batch's verdict rows into ``DIR/verdicts`` (partitioned as their runs), then mark it complete;
    returns the rows written."""
    directory = Path(directory)
    refuse_unfinished(directory)  # a log's export began since the rejudge did: its runs are not all there
    batch = started.batch
    staging = directory / f".incoming-{batch}"
    count = 0
    if verdict_files:
        listed = "[" + ", ".join(f"'{_text(Path(f))}'" for f in verdict_files) + "]"
        runs = f"'{_text(directory / 'runs')}/**/*.parquet'"
        con = duckdb.connect()
        try:
            con.execute(
                f"CREATE TEMP TABLE homes AS SELECT DISTINCT run_id, part_suite, part_experiment, day"
                f" FROM read_parquet({runs}, hive_partitioning = true, hive_types_autocast = false,"
                " union_by_name = true)"
            )
            homed = (
                f"SELECT v.*, h.part_suite, h.part_experiment, h.day FROM read_parquet({listed}) v"
                " JOIN homes h USING (run_id)"
            )
            (count,) = con.execute(f"SELECT count(*) FROM ({homed})").fetchall()[0]
            con.execute(
                f"COPY ({homed}) TO '{_text(staging)}' (FORMAT parquet, COMPRESSION zstd,"
                f" PARTITION_BY (part_suite, part_experiment, day), FILENAME_PATTERN '{batch}_{{i}}',"
                " WRITE_PARTITION_COLUMNS false)"
            )
        except duckdb.Error as exc:
            raise StoreError(
                f"cannot write the verdicts of batch {batch} into {directory}: {first_line(exc)}"
            ) from None
        finally:
            con.close()
        try:
            for part in sorted(staging.glob("**/*.parquet")):
                target = directory / "verdicts" / part.relative_to(staging)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(part, target)
        except OSError as exc:
            raise StoreError(
                f"cannot move the verdicts of batch {batch} into {directory / 'verdicts'}: {exc}"
            ) from None
        shutil.rmtree(staging, ignore_errors=True)
    _write_batch_row(directory, started, completed_at, judged)
    return int(count)
