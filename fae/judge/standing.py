"""Which verdicts a rejudge need not compute again: they stand.

A verdict depends on the run's events (never changed once the run ended), the judge's rules, the judge code
(``CODE_VERSION``) and the task the run is judged against. So a run that already has a verdict of a judge under the
same rule-set hash, from this code version, judged against the task its log keeps, in the live batch or a completed
rejudge batch, would get the same verdict again: an incremental rejudge leaves it standing and judges only the
(run, judge) pairs that have none. ``fae rejudge --full`` judges everything again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from fae.judge.judging import Judging
from fae.judge.registry import CODE_VERSION
from fae.replay.source import Queryable

TRUSTED_BATCHES = (
    "(v.batch = 'live' OR v.batch IN (SELECT batch FROM verdict_batches WHERE completed_at IS NOT NULL"
    " AND json_extract_string(judges, '$[0].tasks') = 'log'))"
)
"""Batches whose verdicts stand: the live one, and completed rejudges that say they read the log's tasks (one that
judged against today's task files, or that predates the saying, may differ and is judged again)."""


@dataclass
class Standing:
    """For each of the judgings, the runs whose verdict stands; and the outcomes of those verdicts."""

    runs: list[frozenset[str]]
    outcomes: Counter = field(default_factory=Counter)

    def needed(self, judgings: Sequence[Judging], run_id: str) -> tuple[int, ...]:
        """The indexes of the judgings the run must be judged by."""
        return tuple(index for index in range(len(judgings)) if run_id not in self.runs[index])

    def stood(self, index: int) -> int:
        return len(self.runs[index])


def standing(log: Queryable, judgings: Sequence[Judging], ids: Sequence[str]) -> Standing:
    """The verdicts among ``ids`` that stand for each of ``judgings``, with their outcomes."""
    keys = [f"{j.name}/{j.rules_hash}" for j in judgings]
    _, rows = log.query(
        "SELECT v.judge || '/' || v.rule_set_hash, v.run_id, arg_max(v.outcome, v.judged_at) FROM verdicts v"
        " WHERE v.code_version = ? AND list_contains(?, v.judge || '/' || v.rule_set_hash)"
        f" AND v.run_id IN (SELECT unnest(?)) AND {TRUSTED_BATCHES} GROUP BY ALL",
        [CODE_VERSION, keys, list(ids)],
    )
    found: dict[str, set[str]] = {key: set() for key in keys}
    outcomes: Counter = Counter()
    for key, run_id, outcome in rows:
        found[key].add(run_id)
        name, _, digest = key.rpartition("/")  # a plugin's judge name may hold a slash; a hash never does
        outcomes[(name, digest, outcome)] += 1
    return Standing([frozenset(found[key]) for key in keys], outcomes)


def nothing_stands(judgings: Sequence[Judging]) -> Standing:
    """A full rejudge: every judging judges every run."""
    return Standing([frozenset() for _ in judgings])
