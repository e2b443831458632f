"""Judges applied to runs: the default judges, the judges to run from rules, and one run's verdict rows.

One code path for the live verdict, ``fae rejudge`` and the worker processes
that judge shards of a log (fae/judge/parallel.py).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fae.errors import FaeError, JudgeError, TaskChanged
from fae.judge.context import RunContext
from fae.judge.registry import CODE_VERSION, JudgeFn, get_judge, rule_set, rule_set_hash, unknown_rule
from fae.replay.source import RunLog
from fae.store.log import VerdictRow

# What a live recording judges, and what `fae rejudge` judges when no judge is named.
DEFAULT_JUDGES: tuple[tuple[str, dict[str, Any]], ...] = (
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


def judges_to_run(judge_name: str | None = None, overrides: Mapping[str, Any] | None = None) -> list[Judging]:
    """The judges to run: one named judge with rule overrides, or the default judges."""
    if judge_name is None:
        pairs = list(DEFAULT_JUDGES)
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
                raise JudgeError(f"no judge takes rule {unknown[0]!r}{unknown_rule(unknown[0], [n for n, _ in pairs])}")
            pairs = merged
    else:
        pairs = [(judge_name, dict(overrides or {}))]
    judgings = []
    seen = set()
    for name, given in pairs:
        rules = rule_set(name, given)
        digest = rule_set_hash(rules)
        if (name, digest) in seen:
            continue
        seen.add((name, digest))
        judgings.append(Judging(name, rules, digest, get_judge(name).factory(rules)))
    return judgings


def judge_run(
    run: RunLog,
    judgings: Sequence[Judging],
    *,
    source: str = "fold",
    judged_at: datetime,
    batch: str | None = None,
    tasks: str = "log",
) -> list[VerdictRow]:
    """Verdict rows for one run; a judge that cannot read the run gives an ``error`` verdict, and one that
    reads a task the run did not play (``TaskChanged``) a ``task_changed`` verdict."""
    ctx = RunContext(run, source, tasks)
    rows = []
    for judging in judgings:
        try:
            verdict = judging.fn(ctx)
            outcome, passed, evidence = verdict.outcome, verdict.passed, verdict.evidence
        except TaskChanged as exc:  # not the agent's doing, and no verdict on it: never scored
            outcome, passed, evidence = "task_changed", None, {"reason": str(exc)}
        except FaeError as exc:
            outcome, passed, evidence = "error", None, {"error": str(exc)}
        rows.append(
            VerdictRow(
                run_id=run.run_id,
                judge=judging.name,
                rule_set=judging.rules,
                rule_set_hash=judging.rules_hash,
                code_version=CODE_VERSION,
                outcome=outcome,
                passed=passed,
                evidence=evidence,
                judged_at=judged_at,
                batch=batch,
            )
        )
    return rows


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
