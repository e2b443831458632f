"""``fae rejudge --parquet DIR``: the runs of a Parquet export judged again, their verdicts added to the export.

The same shards, ``judge_shard`` and ``judge_run`` as a log's rejudge, locally or on Ray
(fae/judge/ray_judge.py); only the loader differs (fae/replay/export_source.py). The driver is the one
writer: it marks the batch started in the export, and once every shard is judged moves the verdict files
into ``DIR/verdicts`` and marks the batch complete (fae/store/export_verdicts.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from fae.errors import JudgeError, StoreError
from fae.judge.judging import JUDGED_STATUSES, judges_to_run
from fae.judge.parallel import ShardJob, spool_folder, start_workers
from fae.judge.ray_judge import judge_jobs
from fae.judge.rejudge import RejudgeResult, batch_started, check_workers, rejudged
from fae.replay.export_source import ExportLayout, locate_export, sql_text, unreadable
from fae.replay.source import run_ids
from fae.replay.stream import CHUNK_RUNS, ConnectionQueries, shards
from fae.store.export import refuse_unfinished
from fae.store.export_verdicts import complete_batch, start_batch


def export_jobs(
    layout: ExportLayout,
    count: int,
    judges: tuple[tuple[str, dict[str, Any]], ...],
    now: datetime,
    batch: str | None,
    spool: Path | None,
    chunk: int = CHUNK_RUNS,
) -> list[ShardJob]:
    """One job per shard of the export's runs (contiguous in the order written, about equal events)."""
    return [
        ShardJob(
            str(layout.directory),
            tuple(part),
            judges,
            now,
            batch,
            out=None if spool is None else str(spool / f"shard-{index}"),
            chunk=chunk,
            export=layout.shard(part),
        )
        for index, part in enumerate(shards(layout.spans, count))
    ]


def export_run_ids(directory: Path, runs: str | None) -> list[str]:
    """The finished runs of an export matching a ``--runs`` filter."""
    refuse_unfinished(directory)
    if not (directory / "runs").is_dir():
        raise StoreError(f"{directory} holds no fae export (no runs/ folder); `fae export --parquet` writes one")
    con = duckdb.connect()
    try:
        con.execute(
            f"CREATE VIEW runs AS SELECT * FROM read_parquet('{sql_text(directory / 'runs')}/**/*.parquet',"
            " hive_partitioning = true, union_by_name = true)"
        )
        return run_ids(ConnectionQueries(con, directory), runs, statuses=JUDGED_STATUSES)
    except duckdb.Error as exc:
        raise unreadable(directory, exc) from None
    finally:
        con.close()


def rejudge_export(
    directory: str | Path,
    *,
    judge_name: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    runs: str | None = None,
    clock: Callable[[], datetime] | None = None,
    chunk: int | None = None,
    workers: int | None = None,
    ray: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    tasks: str = "log",
) -> RejudgeResult:
    """Judge every matching run of the export at ``directory`` again and add the verdicts to it as one batch
    (``tasks`` as in ``fae.judge.rejudge.rejudge``)."""
    judgings = judges_to_run(judge_name, overrides)
    now = (clock or (lambda: datetime.now(UTC)))()
    path = Path(directory).resolve()  # the tasks, maybe on other machines, read the files by these paths
    check_workers(workers)
    ids = export_run_ids(path, runs)
    if not ids:
        raise JudgeError(
            f"no finished runs in the export {path} match {runs!r}"
            if runs
            else f"no finished runs in the export {path}"
        )
    if ray is None:
        start_workers(workers, len(ids))
    reader = duckdb.connect()
    try:
        found = locate_export(reader, path, ids)
    finally:
        reader.close()
    started = batch_started(judgings, now, len(ids))
    start_batch(path, started)
    if on_progress:
        on_progress(0, len(ids))
    judges = tuple((j.name, j.rules) for j in judgings)
    with spool_folder() as spool:
        jobs, results = judge_jobs(
            lambda count: [
                replace(job, tasks=tasks)
                for job in export_jobs(found, count, judges, now, started.batch, Path(spool), chunk or CHUNK_RUNS)
            ],
            len(ids),
            workers=workers,
            ray=ray,
            command="fae rejudge --ray",
        )
        judged = sum(r.runs for r in results)
        files = [f for job in jobs if job.out for f in sorted(Path(job.out).parent.glob(Path(job.out).name + "-*"))]
        written = complete_batch(path, started, files, now, judged)
    if on_progress:
        on_progress(judged, len(ids))
    return rejudged(started.batch, judged, written, results, judgings)
