"""Judging recorded runs: one code path for the live verdict and for ``fae rejudge``.

``judge_run`` turns one run into verdict rows for a list of (judge, rule set)
pairs; ``rejudge`` does it for many runs of a log and appends the rows in
batches. Old verdicts are never touched: a rescore is new rows.
"""

from __future__ import annotations

import gc
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fae.errors import FaeError, JudgeError, StoreError
from fae.judge.context import RunContext
from fae.judge.registry import CODE_VERSION, JudgeFn, get_judge, rule_set, rule_set_hash
from fae.replay.source import BodyCache, RunLog, load_runs, run_ids
from fae.store.log import Batch, EventLog, VerdictBatchCompleted, VerdictBatchStarted, VerdictRow

# What a live recording judges, and what `fae rejudge` judges when no judge is named.
DEFAULT_PLAN: tuple[tuple[str, dict[str, Any]], ...] = (
    ("task", {"mode": "strict"}),
    ("task", {"mode": "light"}),
    ("failure_mode", {}),
    ("state_drift", {}),
    ("ensure_record", {}),
    ("oracle", {}),
)
JUDGED_STATUSES = ("finished", "errored")


@dataclass(frozen=True)
class Judging:
    """One judge built for one rule set."""

    name: str
    rules: dict[str, Any]
    rules_hash: str
    fn: JudgeFn


def build_plan(judge_name: str | None = None, overrides: Mapping[str, Any] | None = None) -> list[Judging]:
    """The judges to run: one named judge with rule overrides, or the default plan."""
    if judge_name is None:
        pairs = list(DEFAULT_PLAN)
        if overrides:
            applied = set()
            merged = []
            for name, base in pairs:
                known = get_judge(name).rules
                mine = {k: v for k, v in overrides.items() if k in known}
                applied |= set(mine)
                merged.append((name, {**base, **mine}))
            unknown = sorted(set(overrides) - applied)
            if unknown:
                raise JudgeError(f"no judge takes rule {unknown[0]!r}; name a judge with --judge")
            pairs = merged
    else:
        pairs = [(judge_name, dict(overrides or {}))]
    plan = []
    seen = set()
    for name, given in pairs:
        rules = rule_set(name, given)
        digest = rule_set_hash(rules)
        if (name, digest) in seen:
            continue
        seen.add((name, digest))
        plan.append(Judging(name, rules, digest, get_judge(name).factory(rules)))
    return plan


def judge_run(run: RunLog, plan: Sequence[Judging], *, source: str = "fold", judged_at: datetime,
              batch: str | None = None) -> list[VerdictRow]:
    """Verdict rows for one run; a judge that cannot read the run gives an ``error`` verdict."""
    ctx = RunContext(run, source)
    rows = []
    for judging in plan:
        try:
            verdict = judging.fn(ctx)
            outcome, passed, evidence = verdict.outcome, verdict.passed, verdict.evidence
        except FaeError as exc:
            outcome, passed, evidence = "error", None, {"error": str(exc)}
        rows.append(VerdictRow(run_id=run.run_id, judge=judging.name, rule_set=judging.rules,
                               rule_set_hash=judging.rules_hash, code_version=CODE_VERSION, outcome=outcome,
                               passed=passed, evidence=evidence, judged_at=judged_at, batch=batch))
    return rows


def live_verdicts(log: Any, run_id: str, *, judged_at: datetime) -> list[VerdictRow]:
    """The default plan's verdicts for a run just recorded, judged against its live capture."""
    run = next(load_runs(log, [run_id], lean=True))
    return judge_run(run, build_plan(), source="capture", judged_at=judged_at, batch="live")


@dataclass
class RejudgeResult:
    batch: str
    runs: int
    verdicts: int
    outcomes: Counter = field(default_factory=Counter)


@contextmanager
def relaxed_gc(young: int = 50_000) -> Iterator[None]:
    """Fewer garbage-collector passes while many short-lived runs are judged.

    Judging allocates many small containers per run that die with the run; the default
    young-generation threshold (700) makes the collector walk them over and over. Objects
    alive on entry (the task suite, the spec data) are frozen out of those walks. Verdicts
    cannot depend on this: it only changes when memory is reclaimed.
    """
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(young, before[1], before[2])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def rejudge(log_path: str | Path, *, judge_name: str | None = None, overrides: Mapping[str, Any] | None = None,
            runs: str | None = None, clock: Callable[[], datetime] | None = None,
            chunk: int = 500, on_progress: Callable[[int, int], None] | None = None) -> RejudgeResult:
    """Judge every matching run of a log again and append the verdicts as one batch.

    The batch's start is committed first and its completion with its last verdicts, so a
    rejudge killed part way leaves a batch the log shows as incomplete (view ``batch_status``).
    ``on_progress(judged, planned)`` is called after each committed chunk of ``chunk`` runs.
    """
    plan = build_plan(judge_name, overrides)
    now = (clock or (lambda: datetime.now(UTC)))()
    batch = f"rejudge-{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
    path = Path(log_path)
    if not path.exists():
        raise StoreError(f"no log at {path}")
    with EventLog(path) as log:
        ids = run_ids(log, runs, statuses=JUDGED_STATUSES)
        if not ids:
            raise JudgeError(f"no finished runs in {path} match {runs!r}" if runs else f"no finished runs in {path}")
        log.write_batch(Batch(verdict_batches=[VerdictBatchStarted(
            batch=batch, kind="rejudge", started_at=now, planned_runs=len(ids),
            judges=[{"judge": j.name, "rule_set": j.rules, "rule_set_hash": j.rules_hash} for j in plan])]))
        result = RejudgeResult(batch=batch, runs=0, verdicts=0)
        pending: list[VerdictRow] = []
        bodies = BodyCache(log)
        with relaxed_gc():
            for run in load_runs(log, ids, bodies=bodies, lean=True):
                rows = judge_run(run, plan, judged_at=now, batch=batch)
                pending.extend(rows)
                result.runs += 1
                result.outcomes.update((r.judge, r.rule_set_hash, r.outcome) for r in rows)
                if len(pending) >= chunk * len(plan) and result.runs < len(ids):
                    log.write_batch(Batch(verdicts=pending))
                    result.verdicts += len(pending)
                    pending = []
                    if on_progress:
                        on_progress(result.runs, len(ids))
        log.write_batch(Batch(verdicts=pending, completed_batches=[VerdictBatchCompleted(
            batch=batch, completed_at=now, judged_runs=result.runs)]))
        result.verdicts += len(pending)
        if on_progress:
            on_progress(result.runs, len(ids))
    return result
