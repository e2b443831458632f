"""Judging recorded runs again: the live verdict of one run, and ``fae rejudge`` over a whole log.

``rejudge`` shards the runs across worker processes (fae/judge/parallel.py)
and appends all their verdicts as one batch. Old verdicts are never touched:
a rescore is new rows, and a verdict that would come out the same stands
(fae/judge/standing.py) rather than being judged and written again.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fae.errors import JudgeError, StoreError
from fae.judge.context import TASK_SOURCES
from fae.judge.judging import DEFAULT_JUDGES, JUDGED_STATUSES, Judging, judge_run, judges_to_run, relaxed_gc  # noqa: F401
from fae.judge.parallel import ShardJob, ShardResult, insert_verdicts, spool_folder, start_workers
from fae.judge.ray_judge import judge_jobs
from fae.judge.standing import Standing, nothing_stands, standing
from fae.replay.source import load_runs, run_ids
from fae.replay.stream import CHUNK_RUNS, shards, spans
from fae.store.log import Batch, EventLog, VerdictBatchStarted, VerdictRow


def live_verdicts(log: Any, run_id: str, *, judged_at: datetime) -> list[VerdictRow]:
    """The default judges' verdicts for a run just recorded, judged against its live capture."""
    run = next(load_runs(log, [run_id], lean=True))
    return judge_run(run, judges_to_run(), source="capture", judged_at=judged_at, batch="live")


@dataclass
class RejudgeResult:
    batch: str
    runs: int
    verdicts: int
    outcomes: Counter = field(default_factory=Counter)
    shards: list[ShardResult] = field(default_factory=list)  # what each worker judged and what it cost
    rule_sets: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (judge, hash) -> its rules
    stood: dict[tuple[str, str], int] = field(default_factory=dict)  # (judge, hash) -> runs whose verdict stood
    considered: int = 0  # the runs that matched, judged or standing


def rejudge(
    log_path: str | Path,
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
    full: bool = False,
) -> RejudgeResult:
    """Judge the matching runs of a log again, on ``workers`` processes, and append the verdicts as one batch.

    Incremental unless ``full``: a (run, judge) pair whose verdict under the same rules, code version and task
    source is already in the log stands (``fae.judge.standing``) and is neither judged nor written again; the batch
    records how many stood per judge, and the result counts their outcomes with the new ones. A run no judge needs
    is not read at all. ``tasks="current"`` judges everything (today's task files may differ from the log's).

    The batch's start is committed first; its verdicts and its completion are committed together in
    one transaction, so a rejudge killed part way leaves a batch the log shows as started and never
    completed (view ``batch_status``), with no verdict of it. ``on_progress(judged, planned)`` is
    called as the rejudge starts and when its verdicts are written. ``ray``: judge the shards as tasks on the
    Ray cluster at this address instead (fae/judge/ray_judge.py); ``workers`` is then the number of shards.
    """
    if tasks not in TASK_SOURCES:
        raise JudgeError(f"--tasks is one of {', '.join(TASK_SOURCES)}, got {tasks!r}")
    judgings = judges_to_run(judge_name, overrides)
    now = (clock or (lambda: datetime.now(UTC)))()
    path = Path(log_path).resolve()  # the workers, maybe on other machines, open it by this path
    if not path.exists():
        raise StoreError(f"no log at {path}")
    check_workers(workers)
    with EventLog(path) as log:  # opened for writing first: migrates, and moves a left-over journal in
        ids = run_ids(log, runs, statuses=JUDGED_STATUSES)
        if not ids:
            raise JudgeError(f"no finished runs in {path} match {runs!r}" if runs else f"no finished runs in {path}")
        stand = nothing_stands(judgings) if full or tasks != "log" else standing(log, judgings, ids)
        groups: dict[tuple[int, ...], list[str]] = {}
        for run_id in ids:
            needed = stand.needed(judgings, run_id)
            if needed:
                groups.setdefault(needed, []).append(run_id)
        todo = sum(len(members) for members in groups.values())
        found = {needed: spans(log, members) for needed, members in groups.items()}
        events = sum(span.events for part in found.values() for span in part)
        if ray is None and todo:
            start_workers(workers, todo, events=events)
        started = batch_started(judgings, now, todo, tasks=tasks, stand=stand)
        log.write_batch(Batch(verdict_batches=[started]))
    if on_progress:
        on_progress(0, todo)

    def make_jobs(count: int, spool: str) -> list[ShardJob]:
        jobs: list[ShardJob] = []
        for needed, part_spans in found.items():
            judges = tuple((judgings[index].name, judgings[index].rules) for index in needed)
            share = max(1, round(count * len(part_spans) / todo))
            for part in shards(part_spans, share):
                jobs.append(
                    ShardJob(
                        str(path),
                        tuple(part),
                        judges,
                        now,
                        started.batch,
                        out=str(Path(spool) / f"shard-{len(jobs)}"),
                        chunk=chunk or CHUNK_RUNS,
                        tasks=tasks,
                    )
                )
        return jobs

    with spool_folder() as spool:
        if todo:
            jobs, results = judge_jobs(
                lambda count: make_jobs(count, spool),
                todo,
                workers=workers,
                ray=ray,
                command="fae rejudge --ray",
                events=events,
            )
        else:
            jobs, results = [], []
        judged = sum(r.runs for r in results)
        with EventLog(path, folders=[Path(spool)]) as log:  # the one folder it reads besides the log
            written = insert_verdicts(log, [job.out for job in jobs if job.out], completes=(started.batch, now, judged))
    if on_progress:
        on_progress(judged, todo)
    result = rejudged(started.batch, judged, written, results, judgings)
    result.stood = {(j.name, j.rules_hash): stand.stood(index) for index, j in enumerate(judgings)}
    result.outcomes.update(stand.outcomes)
    result.considered = len(ids)
    return result


def batch_started(
    judgings: Sequence[Judging], now: datetime, planned: int, *, tasks: str = "log", stand: Standing | None = None
) -> VerdictBatchStarted:
    """A new rejudge batch, named for when it started; each judge's entry says which task source it judged
    against and how many runs' verdicts stood (were not judged again)."""
    return VerdictBatchStarted(
        batch=f"rejudge-{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}",
        kind="rejudge",
        started_at=now,
        planned_runs=planned,
        judges=[
            {
                "judge": j.name,
                "rule_set": j.rules,
                "rule_set_hash": j.rules_hash,
                "tasks": tasks,
                "stood": stand.stood(index) if stand is not None else 0,
            }
            for index, j in enumerate(judgings)
        ],
    )


def check_workers(workers: int | None) -> None:
    if workers is not None and workers < 1:
        raise JudgeError(f"--workers must be at least 1, not {workers}")


def rejudged(
    batch: str, judged: int, written: int, results: list[ShardResult], judgings: Sequence[Judging] = ()
) -> RejudgeResult:
    result = RejudgeResult(
        batch=batch,
        runs=judged,
        verdicts=written,
        shards=results,
        rule_sets={(j.name, j.rules_hash): j.rules for j in judgings},
    )
    for part in results:
        result.outcomes.update(part.outcomes)
    return result
