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
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import batched
from pathlib import Path
from typing import Any

from fae.errors import JudgeError, StoreError
from fae.judge.context import TASK_SOURCES
from fae.judge.facts import judge_from_facts, stored_facts
from fae.judge.judging import DEFAULT_JUDGES, JUDGED_STATUSES, Judging, judge_run, judges_to_run, relaxed_gc  # noqa: F401
from fae.judge.parallel import PLANNING_MEMORY, ShardJob, ShardResult, insert_verdicts, spool_folder, start_workers
from fae.judge.ray_judge import judge_jobs
from fae.judge.standing import Standing, nothing_stands, standing
from fae.replay.source import load_runs, run_ids
from fae.replay.stream import CHUNK_RUNS, Span, shards, spans
from fae.store.log import Batch, EventLog, FactsRow, VerdictBatchStarted, VerdictRow

PLAN_WINDOW = 20_000
"""Runs whose standing verdicts and kept findings are read in one query while a rejudge is planned: a window at a
time, so the planning process holds one window's rows, not the log's."""


def live_verdicts(log: Any, run_id: str, *, judged_at: datetime) -> tuple[list[VerdictRow], list[FactsRow]]:
    """The default judges' verdicts for a run just recorded, judged against its live capture, and what the judges
    split in two found of it (the log keeps those, ``fae.judge.facts``)."""
    run = next(load_runs(log, [run_id], lean=True))
    found: list[FactsRow] = []
    rows = judge_run(run, judges_to_run(), source="capture", judged_at=judged_at, batch="live", found=found)
    return rows, found


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
    from_facts: int = 0  # the judged runs decided from the findings the log keeps, without reading them


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
    from_events: bool = False,
) -> RejudgeResult:
    """Judge the matching runs of a log again, on ``workers`` processes, and append the verdicts as one batch.

    Incremental unless ``full``: a (run, judge) pair whose verdict under the same rules, code version and task
    source is already in the log stands (``fae.judge.standing``) and is neither judged nor written again; the batch
    records how many stood per judge, and the result counts their outcomes with the new ones. A run no judge needs
    is not read at all. ``tasks="current"`` judges everything (today's task files may differ from the log's).
    A run whose every judge still to apply has its findings in the log (``fae.judge.facts``) is decided from them
    without being read; ``from_events`` reads every run instead (the findings it makes are kept, once).

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
    use_facts = not from_events and tasks == "log"
    with spool_folder() as spool:
        # opened for writing first: migrates, and moves a left-over journal in; kept open to write the verdicts
        # when no run needs reading (the workers read the log, which no process may then hold open for writing);
        # the spool is the one folder it reads besides the log
        with EventLog(path, folders=[Path(spool)], settings={"memory_limit": PLANNING_MEMORY}) as log:
            ids = run_ids(log, runs, statuses=JUDGED_STATUSES)
            if not ids:
                matching = f" match {runs!r}" if runs else ""
                raise JudgeError(f"no finished runs in {path}{matching}")
            stand, groups, from_facts = plan_rejudge(
                log, judgings, ids, stands=not full and tasks == "log", use_facts=use_facts
            )
            todo = sum(len(members) for part in (groups, from_facts) for members in part.values())
            started = batch_started(judgings, now, todo, tasks=tasks, stand=stand)
            log.write_batch(Batch(verdict_batches=[started]))
            if on_progress:
                on_progress(0, todo)
            facts_stem = str(Path(spool) / "facts")
            decided_from_facts, unread = judge_from_facts(
                log, judgings, from_facts, judged_at=now, batch=started.batch, out=facts_stem, window=PLAN_WINDOW
            )
            for needed, members in unread.items():  # findings that would not read: the events decide
                groups.setdefault(needed, []).extend(members)
            to_read = sum(len(members) for members in groups.values())
            found = {needed: spans(log, members) for needed, members in groups.items()}
            events = sum(span.events for part in found.values() for span in part)
            if ray is None and to_read:
                start_workers(workers, to_read, events=events)
            written = 0
            if not to_read:
                written = insert_verdicts(log, [facts_stem], completes=(started.batch, now, decided_from_facts.runs))

        def make_jobs(count: int) -> list[ShardJob]:
            shape = ShardJob(str(path), (), (), now, started.batch, None, chunk=chunk or CHUNK_RUNS, tasks=tasks)
            return shard_jobs(shape, found, judgings, count, spool)

        results = [decided_from_facts] if decided_from_facts.runs else []
        if to_read:
            jobs, from_runs = judge_jobs(
                make_jobs,
                to_read,
                workers=workers,
                ray=ray,
                command="fae rejudge --ray",
                events=events,
            )
            results = from_runs + results
            stems = [facts_stem, *(job.out for job in jobs if job.out)]
            with EventLog(path, folders=[Path(spool)], settings={"memory_limit": PLANNING_MEMORY}) as writing:
                written = insert_verdicts(writing, stems, completes=(started.batch, now, sum(r.runs for r in results)))
        judged = sum(r.runs for r in results)
    if on_progress:
        on_progress(judged, todo)
    result = rejudged(started.batch, judged, written, results, judgings)
    result.stood = {(j.name, j.rules_hash): stand.stood(index) for index, j in enumerate(judgings)}
    result.outcomes.update(stand.outcomes)
    result.considered = len(ids)
    result.from_facts = decided_from_facts.runs
    return result


Groups = dict[tuple[int, ...], list[str]]
"""Runs by the judgings (their indexes) each still needs."""


def plan_rejudge(
    log: EventLog, judgings: Sequence[Judging], ids: Sequence[str], *, stands: bool, use_facts: bool
) -> tuple[Standing, Groups, Groups]:
    """Which runs need which judgings, a window of ``PLAN_WINDOW`` runs at a time: (the standing verdicts' counts
    and outcomes, the runs to read, the runs to decide from the findings the log keeps). ``stands``: a verdict
    already in the log under the same rules stands; ``use_facts``: kept findings may decide a run."""
    stand = nothing_stands(judgings)  # the counts and outcomes of every window's standing verdicts
    groups: Groups = {}
    from_facts: Groups = {}
    for window in batched(ids, PLAN_WINDOW):
        here = standing(log, judgings, window) if stands else nothing_stands(judgings)
        kept = stored_facts(log, judgings, window) if use_facts else [frozenset() for _ in judgings]
        for run_id in window:
            needed = here.needed(judgings, run_id)
            if needed:
                decided = all(run_id in kept[index] for index in needed)
                (from_facts if decided else groups).setdefault(needed, []).append(run_id)
        stand.count_in(here)
    return stand, groups, from_facts


def shard_jobs(
    shape: ShardJob, found: Mapping[tuple[int, ...], list[Span]], judgings: Sequence[Judging], count: int, spool: str
) -> list[ShardJob]:
    """About ``count`` shards of the runs to read (``found``: their spans by the judgings they need), each group's
    share of shards in proportion to its runs; each job is ``shape`` with its spans, judges and spool file."""
    total = sum(len(spans_) for spans_ in found.values())
    jobs: list[ShardJob] = []
    for needed, part_spans in found.items():
        judges = tuple((judgings[index].name, judgings[index].rules) for index in needed)
        for part in shards(part_spans, max(1, round(count * len(part_spans) / total))):
            jobs.append(replace(shape, spans=tuple(part), judges=judges, out=str(Path(spool) / f"shard-{len(jobs)}")))
    return jobs


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
