"""Judges applied to runs: the default judges, the judges to run from rules, and one run's verdict rows.

One code path for the live verdict, ``fae rejudge`` and the worker processes
that judge shards of a log (fae/judge/parallel.py).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fae.errors import FaeError, JudgeError, TaskChanged
from fae.judge.context import RunContext
from fae.judge.registry import (
    CODE_VERSION,
    JudgeFn,
    Verdict,
    facts_of,
    get_judge,
    rule_set,
    rule_set_hash,
    unknown_rule,
)
from fae.replay.source import RunLog
from fae.store.log import FactsRow, VerdictRow

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
class Finding:
    """How one judging finds a run's facts and decides on them (a judge split in two, ``register_facts``)."""

    inputs: str
    find: Callable[[RunContext], str]
    decide: Callable[[str], Verdict]


@dataclass(frozen=True)
class Judging:
    """One judge built for one rule set (``finding``: its two halves, where the judge has them)."""

    name: str
    rules: dict[str, Any]
    rules_hash: str
    fn: JudgeFn
    finding: Finding | None = None


def judging_for(name: str, rules: dict[str, Any]) -> Judging:
    """Judge ``name`` built for a full rule set (``rule_set``)."""
    halves = facts_of(name)
    finding = None
    if halves is not None:
        finding = Finding(halves.inputs(rules), halves.find(rules), halves.decide(rules))
    return Judging(name, rules, rule_set_hash(rules), get_judge(name).factory(rules), finding)


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
        judgings.append(judging_for(name, rules))
    return judgings


def judge_run(
    run: RunLog,
    judgings: Sequence[Judging],
    *,
    source: str = "fold",
    judged_at: datetime,
    batch: str | None = None,
    tasks: str = "log",
    found: list[FactsRow] | None = None,
) -> list[VerdictRow]:
    """Verdict rows for one run; a judge that cannot read the run gives an ``error`` verdict, and one that
    reads a task the run did not play (``TaskChanged``) a ``task_changed`` verdict. Given ``found``, a judge
    split in two (``Judging.finding``) adds what it found there, for the log to keep, when the run was judged
    against the task its log keeps (findings from today's task files would not be the log's)."""
    ctx = RunContext(run, source, tasks)
    rows = []
    for judging in judgings:
        try:
            if found is not None and judging.finding is not None:
                verdict = _found(ctx, judging.name, judging.finding, found)
            else:
                verdict = judging.fn(ctx)
            outcome, passed, evidence = verdict.outcome, verdict.passed, verdict.evidence
        except TaskChanged as exc:  # not the agent's doing, and no verdict on it: never scored
            outcome, passed, evidence = "task_changed", None, {"reason": str(exc)}
        except FaeError as exc:
            outcome, passed, evidence = "error", None, {"error": str(exc)}
        rows.append(verdict_row(run.run_id, judging, Verdict(outcome, passed, evidence), judged_at, batch))
    return rows


def verdict_row(run_id: str, judging: Judging, verdict: Verdict, judged_at: datetime, batch: str | None) -> VerdictRow:
    """The log's row for a verdict of ``judging`` on a run, judged by this code version."""
    return VerdictRow(
        run_id=run_id,
        judge=judging.name,
        rule_set=judging.rules,
        rule_set_hash=judging.rules_hash,
        code_version=CODE_VERSION,
        outcome=verdict.outcome,
        passed=verdict.passed,
        evidence=verdict.evidence,
        judged_at=judged_at,
        batch=batch,
    )


def _found(ctx: RunContext, name: str, finding: Finding, found: list[FactsRow]) -> Verdict:
    """The verdict through the judge's findings, which join ``found`` once per run and ``inputs``."""
    key = ("findings", name, finding.inputs)
    text = ctx.memo.get(key)
    if text is None:
        text = ctx.memo[key] = finding.find(ctx)
        if ctx.kept is not None:
            found.append(FactsRow(ctx.run.run_id, name, finding.inputs, CODE_VERSION, text))
    return finding.decide(text)


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
