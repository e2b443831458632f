"""Old rules against new rules, run by run: outcome tables, flipped runs, and harms caught or missed.

Verdicts come from the log (or a Parquet export) where it holds them for this
code version (the latest row per run, judge and rule-set hash); whatever is
missing is judged now, the same way ``fae rejudge`` would (in shards on every
core, or on a Ray cluster), and not written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from fae.errors import JudgeError
from fae.judge.export_rejudge import export_jobs
from fae.judge.facts import decide_kept
from fae.judge.judging import DEFAULT_JUDGES, JUDGED_STATUSES, Judging, judge_run, judges_to_run
from fae.judge.parallel import ShardJob, ShardResult, start_workers, workers_default
from fae.judge.ray_judge import judge_jobs
from fae.judge.registry import CODE_VERSION, get_judge, unknown_rule
from fae.judge.standing import TRUSTED_BATCHES
from fae.replay.export_source import locate_export
from fae.replay.source import Queryable, load_runs, run_ids
from fae.replay.stream import shards, spans
from fae.tasks.scenarios import CASE_SEPARATOR, base_task, is_scenario_task


@dataclass(frozen=True, slots=True)
class Judged:
    outcome: str
    passed: bool | None


@dataclass
class JudgeComparison:
    """One judge under two rule sets."""

    judge: str
    old_rules: dict[str, Any]
    new_rules: dict[str, Any]
    old: dict[str, Judged]
    new: dict[str, Judged]
    transitions: Counter = field(default_factory=Counter)
    flipped: list[tuple[str, str, str]] = field(default_factory=list)
    harms: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)  # agent -> measure -> (old, new)
    case_harms: dict[tuple[str, str], dict[str, tuple[int, int]]] = field(default_factory=dict)
    """The same per (case set, agent): the reference study's table (``case_set``)."""


@dataclass
class Comparison:
    runs: int
    computed: int
    judges: list[JudgeComparison]
    shards: list[ShardResult] = field(default_factory=list)  # what each shard judging missing verdicts did
    incomplete_batches: list[tuple[str, int, int | None]] = field(default_factory=list)
    """Verdict batches that started and never completed (a killed rejudge): (batch, runs judged, planned).
    Their verdicts are left out; those runs are judged now instead."""


def incomplete_batches(log: Queryable, judgings: Sequence[Judging]) -> list[tuple[str, int, int | None]]:
    """Incomplete verdict batches holding verdicts of any judge and rule set in ``judgings``."""
    _, rows = log.query(
        "SELECT b.batch, count(DISTINCT v.run_id), any_value(b.planned_runs) FROM verdict_batches b"
        " JOIN verdicts v USING (batch) WHERE b.completed_at IS NULL"
        " AND list_contains(?, v.judge || '/' || v.rule_set_hash) GROUP BY b.batch ORDER BY b.batch",
        [[f"{j.name}/{j.rules_hash}" for j in judgings]],
    )
    return [(batch, int(judged), planned) for batch, judged, planned in rows]


def judges_for(judge_name: str | None, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The judges a comparison covers: the named one, or every default judge that takes all given rules."""
    if judge_name:
        get_judge(judge_name)
        return [judge_name]
    keys = set(old) | set(new)
    names = []
    for name, _ in DEFAULT_JUDGES:
        if name not in names and keys <= set(get_judge(name).rules) and (keys or get_judge(name).rules):
            names.append(name)
    if not names:
        known = {rule for name, _ in DEFAULT_JUDGES for rule in get_judge(name).rules}
        unknown = sorted(keys - known)
        if unknown:
            raise JudgeError(
                f"no judge takes rule {unknown[0]!r}{unknown_rule(unknown[0], [n for n, _ in DEFAULT_JUDGES])}"
            )
        raise JudgeError(f"no judge takes all of the rules {sorted(keys)}; name one with --judge")
    return names


def _stored(log: Queryable, judge: str, digest: str, ids: Sequence[str]) -> dict[str, Judged]:
    _, rows = log.query(
        "SELECT v.run_id, arg_max(v.outcome, v.judged_at), arg_max(v.passed, v.judged_at) FROM verdicts v"
        " WHERE v.judge = ? AND v.rule_set_hash = ? AND v.code_version = ? AND v.run_id IN (SELECT unnest(?))"
        f" AND {TRUSTED_BATCHES} GROUP BY v.run_id",
        [judge, digest, CODE_VERSION, list(ids)],
    )
    return {run_id: Judged(outcome, passed) for run_id, outcome, passed in rows}


JobMaker = Callable[[list[str], int, tuple[tuple[str, dict[str, Any]], ...], datetime], list[ShardJob]]
"""(runs, shards, judges, now) -> the jobs that judge those runs, for the log or the export compared."""


def log_jobs(log: Queryable, log_path: Path) -> JobMaker:
    """Jobs reading the runs from the log at ``log_path`` (each worker opens it read-only)."""
    return lambda ids, count, judges, now: [
        ShardJob(str(log_path), tuple(part), judges, now, None, out=None) for part in shards(spans(log, ids), count)
    ]


def export_jobs_for(directory: Path) -> JobMaker:
    """Jobs reading the runs from the Parquet export at ``directory``."""

    def make(
        ids: list[str], count: int, judges: tuple[tuple[str, dict[str, Any]], ...], now: datetime
    ) -> list[ShardJob]:
        reader = duckdb.connect()
        try:
            found = locate_export(reader, directory, ids)
        finally:
            reader.close()
        return export_jobs(found, count, judges, now, None, None)

    return make


def _verdicts(
    log: Queryable,
    judgings: list[Judging],
    ids: Sequence[str],
    *,
    jobs: JobMaker | None = None,
    workers: int | None = None,
    ray: str | None = None,
    in_memory: bool = True,
    findings: bool = True,
) -> tuple[dict[tuple[str, str], dict[str, Judged]], int, list[ShardResult]]:
    """(judge, hash) -> run -> verdict, from the log or judged now; how many were judged now, and by which shards.

    A judge whose findings the log keeps decides from them first (``fae.judge.facts``; not for an export, nor
    without ``findings``).
    Given ``jobs``, runs still missing a verdict are judged in shards on ``workers`` processes (default every core),
    or as tasks on the Ray cluster at ``ray``; a judge whose verdict the log already holds is judged again
    there, and the stored verdict wins. Otherwise (or on one process, when ``in_memory``) they are judged here.
    """
    found = {(j.name, j.rules_hash): _stored(log, j.name, j.rules_hash, ids) for j in judgings}
    computed = 0
    for judging in judgings if findings and (in_memory or jobs is None) else ():  # not an export's findings
        have = found[(judging.name, judging.rules_hash)]
        for run_id, verdict in decide_kept(log, judging, [r for r in ids if r not in have]).items():
            have[run_id] = Judged(verdict.outcome, verdict.passed)  # from the findings the log keeps (facts.py)
            computed += 1
    missing = sorted({run_id for j in judgings for run_id in ids if run_id not in found[(j.name, j.rules_hash)]})
    now = datetime.now(UTC)
    local = workers or workers_default(len(missing))
    if jobs is not None and missing and (ray is not None or local > 1 or not in_memory):
        if ray is None:
            start_workers(workers, len(missing))  # its import runs beside the shards' spans
        judges = tuple((j.name, j.rules) for j in judgings)
        make = jobs
        _, results = judge_jobs(
            lambda count: make(missing, count, judges, now),
            len(missing),
            workers=workers,
            ray=ray,
            command="fae compare --ray",
        )
        for result in results:
            for run_id, judge, digest, outcome, passed in result.judged:
                known = found[(judge, digest)]
                if run_id not in known:
                    known[run_id] = Judged(outcome, passed)
                    computed += 1
        return found, computed, results
    for run in load_runs(log, missing, lean=True):
        needed = [j for j in judgings if run.run_id not in found[(j.name, j.rules_hash)]]
        for row in judge_run(run, needed, judged_at=now):
            found[(row.judge, row.rule_set_hash)][row.run_id] = Judged(row.outcome, row.passed)
            computed += 1
    return found, computed, []


def stopped(judged: Judged | None) -> bool:
    """A verdict that does not let the write through: failed, or could not verify."""
    return judged is not None and judged.passed is not True and judged.outcome != "not_applicable"


def compare(
    log: Queryable,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    judge_name: str | None = None,
    runs: str | None = None,
    log_path: Path | None = None,
    workers: int | None = None,
    ray: str | None = None,
    export: Path | None = None,
    from_events: bool = False,
) -> Comparison:
    """Verdicts under old and new rules, run by run; missing ones judged now: on every core given the log's
    path (or on the Ray cluster at ``ray``), or from the Parquet export at ``export``, which ``log`` reads."""
    if workers is not None and workers < 1:
        raise JudgeError(f"--workers must be at least 1, not {workers}")
    names = judges_for(judge_name, old, new)
    ids = run_ids(log, runs, statuses=JUDGED_STATUSES)
    if not ids:
        raise JudgeError("no finished runs to compare" + (f" match {runs!r}" if runs else ""))
    _, agent_rows = log.query("SELECT run_id, agent, task_id FROM runs WHERE run_id IN (SELECT unnest(?))", [ids])
    agents = {run_id: agent for run_id, agent, _ in agent_rows}
    sets = {run_id: case_set(task_id, agent) for run_id, agent, task_id in agent_rows}
    judgings: list[Judging] = []
    pairs = []
    for name in names:
        old_judging = judges_to_run(name, old)[0]
        new_judging = judges_to_run(name, new)[0]
        pairs.append((name, old_judging, new_judging))
        judgings.extend([old_judging, new_judging])
    oracle = judges_to_run("oracle")[0]
    judgings.append(oracle)
    unique = list({(j.name, j.rules_hash): j for j in judgings}.values())
    if ray is not None and log_path is None and export is None:
        raise JudgeError("judging on Ray needs the log's path or the export's directory")
    jobs = export_jobs_for(export) if export is not None else log_jobs(log, log_path) if log_path else None
    found, computed, judged_by = _verdicts(
        log, unique, ids, jobs=jobs, workers=workers, ray=ray, in_memory=export is None, findings=not from_events
    )
    labels = found[(oracle.name, oracle.rules_hash)]
    result = Comparison(
        runs=len(ids),
        computed=computed,
        judges=[],
        shards=judged_by,
        incomplete_batches=incomplete_batches(log, unique),
    )
    for name, old_judging, new_judging in pairs:
        before, after = found[(name, old_judging.rules_hash)], found[(name, new_judging.rules_hash)]
        item = JudgeComparison(name, old_judging.rules, new_judging.rules, before, after)
        for run_id in ids:
            a, b = before.get(run_id), after.get(run_id)
            item.transitions[(a.outcome if a else "-", b.outcome if b else "-")] += 1
            if a and b and (a.outcome != b.outcome or a.passed != b.passed):
                item.flipped.append((run_id, a.outcome, b.outcome))
            label = labels.get(run_id)
            if label is None or label.outcome not in ("harmful", "harmless"):
                continue
            agent = agents.get(run_id, "?")
            rows = (
                item.harms.setdefault(agent, _no_harms()),
                item.case_harms.setdefault((sets.get(run_id, "?"), agent), _no_harms()),
            )
            for index, judged in ((0, a), (1, b)):
                measure = (
                    ("caught" if stopped(judged) else "missed")
                    if label.outcome == "harmful"
                    else ("false_stops" if stopped(judged) else None)
                )
                if measure is None:
                    continue
                for row in rows:
                    counts = list(row[measure])
                    counts[index] += 1
                    row[measure] = (counts[0], counts[1])
        result.judges.append(item)
    return result


MEASURES = ("caught", "missed", "false_stops")


def _no_harms() -> dict[str, tuple[int, int]]:
    return {"caught": (0, 0), "missed": (0, 0), "false_stops": (0, 0)}


def case_set(task_id: str, agent: str) -> str:
    """Which set of write-verification cases a run belongs to, as the reference study's table groups them: a case
    task's cases (``TASK cases``), a task's scripted scenarios (``TASK scenarios``), the scenario task as another
    agent played it (``TASK task``), or the task suite. A case task (``TASK--CASE``) and a scripted scenario's run
    are told by their ids when this machine has no scenario file that names them, so a log compared elsewhere
    groups them as where it was recorded."""
    if agent.startswith("scenario:"):
        return f"{task_id} scenarios"
    if is_scenario_task(task_id):
        base = base_task(task_id)
        return f"{base} cases" if base != task_id else f"{task_id} task"
    base, separator, _ = task_id.partition(CASE_SEPARATOR)
    return f"{base} cases" if separator else "suite"  # a case no scenario file here names


def harm_totals(item: JudgeComparison) -> dict[str, tuple[int, int]]:
    """Harms caught, missed and false stops (old, new) over every agent."""
    return {
        m: (sum(row[m][0] for row in item.harms.values()), sum(row[m][1] for row in item.harms.values()))
        for m in MEASURES
    }


def as_json(result: Comparison) -> dict[str, Any]:
    """The comparison as plain data (``fae compare --json``)."""
    return {
        "runs": result.runs,
        "computed": result.computed,
        "judges": [
            {
                "judge": item.judge,
                "old_rules": item.old_rules,
                "new_rules": item.new_rules,
                "transitions": [{"old": a, "new": b, "runs": n} for (a, b), n in sorted(item.transitions.items())],
                "flipped": [{"run": r, "old": a, "new": b} for r, a, b in item.flipped],
                "harms": {
                    agent: {m: {"old": row[m][0], "new": row[m][1]} for m in MEASURES}
                    for agent, row in sorted(item.harms.items())
                },
                "harms_all": {m: {"old": o, "new": n} for m, (o, n) in harm_totals(item).items()} if item.harms else {},
                "harms_by_case_set": [
                    {"case_set": cases, "agent": agent, **{m: {"old": row[m][0], "new": row[m][1]} for m in MEASURES}}
                    for (cases, agent), row in sorted(item.case_harms.items())
                ],
            }
            for item in result.judges
        ],
    }
