"""A run's verdicts as a reader sees them: judge, rule set, outcome and why, oldest first.

`fae show` prints them under the run's timeline; a run page of the report reads the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fae.report.reasons import one_line, verdict_reasons
from fae.report.rule_sets import rule_set_label


@dataclass(frozen=True, slots=True)
class ShownVerdict:
    """One verdict row in words."""

    judge: str
    rules: str  # ``rule_set_label``: every rule of the set, then its hash (the hash alone for no rules)
    outcome: str
    passed: bool | None
    reasons: list[str]  # ``verdict_reasons``: none for a pass
    batch: str | None
    evidence: Any = None  # as the judge wrote it (a JSON string or value), for a page that shows it whole


def run_verdicts(reader: Any, run_id: str) -> list[ShownVerdict]:
    """Every verdict of the run in the order they were judged (a rejudge appends; nothing is left out)."""
    _, rows = reader.query(
        "SELECT judge, rule_set, rule_set_hash, outcome, passed, evidence, batch FROM verdicts WHERE run_id = ?"
        " ORDER BY judged_at, rowid",  # a batch's rows share a time: then in the order they were judged
        [run_id],
    )
    shown = []
    for judge, rule_set, digest, outcome, passed, evidence, batch in rows:
        rules = json.loads(rule_set) if isinstance(rule_set, str) else (rule_set or {})
        label = rule_set_label(rules if isinstance(rules, dict) else {"rule_set": rules}, digest, empty="")
        reasons = verdict_reasons(judge, outcome, passed, evidence)
        shown.append(ShownVerdict(judge, label, outcome, passed, reasons, batch, evidence))
    return shown


def verdict_lines(reader: Any, run_id: str) -> Iterator[str]:
    """``verdict JUDGE RULES (HASH): OUTCOME``, each with its reasons indented below."""
    for verdict in run_verdicts(reader, run_id):
        yield one_line(f"verdict {verdict.judge} {verdict.rules}: {verdict.outcome}")
        for reason in verdict.reasons:
            yield f"    {reason}"


@dataclass(frozen=True, slots=True)
class RunHeadline:
    """What a list of runs shows of a run's verdicts: the strict task outcome, the failure mode, and why."""

    strict: str | None
    failure_mode: str | None
    why: str


HEADLINE_JUDGES = ("task", "failure_mode", "ensure_record")


def _chosen(rows: list[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    """Of one judge's verdicts on a run (oldest first): the newest under a rule set live judging used, else the
    newest (a rejudge under other rules does not replace the recording's own verdict)."""
    live = {row[1] for row in rows if row[6] == "live"}
    preferred = [row for row in rows if row[1] in live] or rows
    return preferred[-1] if preferred else None


def run_headlines(reader: Any, run_ids: list[str], errors: dict[str, str] | None = None) -> dict[str, RunHeadline]:
    """Per run: its strict verdict, its failure mode, and one line saying why it did not pass: the run's own
    error, else the strict verdict's first reason, else the failure mode's, else (a run with no task check,
    such as a write-verification scenario) the write verifier's; ``; …`` when there is more (`fae show`)."""
    _, rows = reader.query(
        "SELECT run_id, rule_set_hash, judge, coalesce(rule_set->>'$.mode', ''), outcome, passed, batch, evidence"
        " FROM verdicts WHERE run_id IN (SELECT unnest(?)) AND list_contains(?, judge) ORDER BY judged_at, rowid",
        [run_ids, list(HEADLINE_JUDGES)],
    )
    by_run: dict[str, dict[tuple[str, str], list[tuple[Any, ...]]]] = {}
    for row in rows:
        judge, mode = row[2], row[3]
        if judge == "task" and mode != "strict":
            continue
        by_run.setdefault(row[0], {}).setdefault((judge, mode), []).append(row)
    found = {}
    for run_id in run_ids:
        judged = {key[0]: _chosen(found_rows) for key, found_rows in by_run.get(run_id, {}).items()}
        strict, mode = judged.get("task"), judged.get("failure_mode")
        why = (errors or {}).get(run_id) or ""
        unpassed = [r for r in (strict, mode, judged.get("ensure_record")) if r is not None and r[5] is not True]
        problem = next((r for r in unpassed if r[4] != "not_applicable"), None)
        if not why and problem is not None:
            lines = verdict_reasons(problem[2], problem[4], problem[5], problem[7])
            why = lines[0] + ("; …" if len(lines) > 1 else "") if lines else ""
        found[run_id] = RunHeadline(strict[4] if strict else None, mode[4] if mode else None, why)
    return found
