"""Verdicts from findings the log keeps: a rejudge under new rules that does not read the run again.

A judge split in two (``fae.judge.registry.register_facts``; among fae's own, ``ensure_record``) first finds what
it can of a run without reading any rule value (for ``ensure_record``: the trail, the window, the record under check,
every rule that reads no value applied), then decides under its rules. Live judging and every rejudge that reads
a run keep those findings in the log's ``judge_facts`` table: JSON text, with the judge, the ``inputs`` (the rules
that change what is found, ``evidence=proxy``) and the code version. A later rejudge that needs, for a run, only
judges whose findings are kept for its rules' inputs under this code version, against the log's own tasks,
decides from the text and never loads the run: ``fae rejudge --rule accept_corrections=false`` reads one short
row a run. The events stay the source of truth: ``--from-events`` ignores the findings, and gives the same
verdicts (a judge's own function decides through the same text).

Findings are trusted as a log's standing verdicts are (``fae.judge.standing``): whoever can write the log can
write either. A log you did not record yourself is rejudged ``--from-events --full``. Text that does not decode
(cut, damaged, or not of the judge's shape) or is larger than ``MAX_FACTS_CHARS`` sends its run back to the events.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from itertools import batched

from fae.judge.judging import Judging, verdict_row
from fae.judge.parallel import ShardResult, VerdictSpool
from fae.judge.registry import CODE_VERSION, Verdict
from fae.replay.source import Queryable
from fae.store.log import EventLog, VerdictRow

MAX_FACTS_CHARS = 1 << 20
"""Findings longer than this are not read (a run's are ~0.6 KiB): its run is judged from its events."""

FETCH_ROWS = 4_096

_KEPT = (
    "SELECT run_id, judge || '/' || inputs, CASE WHEN strlen(facts) <= ? THEN facts END FROM judge_facts"
    " WHERE code_version = ? AND list_contains(?, judge || '/' || inputs) AND run_id IN (SELECT unnest(?))"
)
"""(run, judge/inputs, findings or None when too long) kept under a code version, of some keys, for some runs."""


def _keys(judgings: Sequence[Judging]) -> list[str]:
    return [f"{j.name}/{j.finding.inputs}" if j.finding is not None else "" for j in judgings]


def stored_facts(log: Queryable, judgings: Sequence[Judging], ids: Sequence[str]) -> list[frozenset[str]]:
    """For each of ``judgings``, the runs among ``ids`` whose findings for its inputs the log keeps, from this code
    version (none for a judge that is not split in two)."""
    keys = _keys(judgings)
    wanted = [key for key in keys if key]
    if not wanted:
        return [frozenset() for _ in judgings]
    _, rows = log.query(
        "SELECT DISTINCT judge || '/' || inputs, run_id FROM judge_facts WHERE code_version = ?"
        " AND list_contains(?, judge || '/' || inputs) AND run_id IN (SELECT unnest(?))",
        [CODE_VERSION, wanted, list(ids)],
    )
    found: dict[str, set[str]] = {key: set() for key in wanted}
    for key, run_id in rows:
        found[key].add(run_id)
    return [frozenset(found.get(key, ())) for key in keys]


def decide_kept(log: Queryable, judging: Judging, ids: Sequence[str]) -> dict[str, Verdict]:
    """``judging``'s verdicts of the runs among ``ids`` whose findings the log keeps (those that do not read are
    left out, for their events to decide)."""
    finding = judging.finding
    if finding is None or not ids:
        return {}
    _, rows = log.query(_KEPT, [MAX_FACTS_CHARS, CODE_VERSION, [f"{judging.name}/{finding.inputs}"], list(ids)])
    decided = {}
    for run_id, _, text in rows:
        if text is None or run_id in decided:  # too long; or the same findings kept twice
            continue
        try:
            decided[run_id] = finding.decide(text)
        except Exception:  # text of any other shape: its events decide
            continue
    return decided


def judge_from_facts(
    log: EventLog,
    judgings: Sequence[Judging],
    groups: Mapping[tuple[int, ...], Sequence[str]],
    *,
    judged_at: datetime,
    batch: str,
    out: str,
    window: int,
) -> tuple[ShardResult, dict[tuple[int, ...], list[str]]]:
    """Verdict rows, spooled at ``out`` as a shard's, for each group of runs from the findings kept for the
    judgings the group needs; and, by group, the runs whose findings could not be read (judge them from events).

    A run is decided as its findings arrive from the log, ``window`` runs' a query, so memory holds the runs seen,
    not their findings (a group needing two judges' findings holds those of a run until it has both)."""
    started = time.process_time()
    result = ShardResult(began=time.monotonic(), pid=os.getpid())
    spool = VerdictSpool(out, judgings, result)
    unread: dict[tuple[int, ...], list[str]] = {}
    keys = _keys(judgings)
    for needed, group in groups.items():
        wanted = sorted({keys[index] for index in needed})
        for members in batched(group, window):
            waiting: dict[str, dict[str, str | None]] = {}
            decided: set[str] = set()
            for run_id, key, text in _kept_texts(log, wanted, members):
                if run_id in decided:
                    continue  # the same findings kept twice (two merges of one shard)
                texts = waiting.setdefault(run_id, {})
                texts.setdefault(key, text)
                if len(texts) < len(wanted):
                    continue
                del waiting[run_id]
                decided.add(run_id)
                rows = _decided(run_id, judgings, needed, keys, texts, judged_at, batch)
                if rows is None:
                    unread.setdefault(needed, []).append(run_id)
                    continue
                result.runs += 1
                spool.add(rows)
            unread.setdefault(needed, []).extend(r for r in members if r not in decided)
    spool.close()
    result.cpu_s = time.process_time() - started
    result.ended = time.monotonic()
    return result, {needed: runs for needed, runs in unread.items() if runs}


def _kept_texts(log: EventLog, wanted: Sequence[str], members: Sequence[str]) -> Iterator[tuple[str, str, str | None]]:
    """(run, judge/inputs, findings) kept under this code version for these runs, fetched a batch at a time;
    findings longer than ``MAX_FACTS_CHARS`` come as None."""
    cursor = log.con.cursor()
    try:
        cursor.execute(_KEPT, [MAX_FACTS_CHARS, CODE_VERSION, list(wanted), list(members)])
        while fetched := cursor.fetchmany(FETCH_ROWS):
            yield from fetched
    finally:
        cursor.close()


def _decided(
    run_id: str,
    judgings: Sequence[Judging],
    needed: tuple[int, ...],
    keys: Sequence[str],
    texts: Mapping[str, str | None],
    judged_at: datetime,
    batch: str,
) -> list[VerdictRow] | None:
    """The run's verdict rows from its findings, or None when one of them is missing or cannot be read."""
    rows = []
    for index in needed:
        judging = judgings[index]
        text = texts.get(keys[index])
        if text is None or judging.finding is None:
            return None
        try:
            verdict = judging.finding.decide(text)
        except Exception:  # text of any other shape (the log may be someone else's): its events decide
            return None
        rows.append(verdict_row(run_id, judging, verdict, judged_at, batch))
    return rows
