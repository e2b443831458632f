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
    """Which judgings' verdicts stand for each run (a bit per judging, in ``judgings`` order), how many runs each
    one's stand for, and the outcomes of those verdicts."""

    stands: dict[str, int]
    counts: list[int]
    outcomes: Counter = field(default_factory=Counter)

    def needed(self, judgings: Sequence[Judging], run_id: str) -> tuple[int, ...]:
        """The indexes of the judgings the run must be judged by."""
        mask = self.stands.get(run_id, 0)
        return tuple(index for index in range(len(judgings)) if not mask >> index & 1)

    def stood(self, index: int) -> int:
        return self.counts[index]

    def count_in(self, other: Standing) -> None:
        """Add another set of runs' counts and outcomes to these (not its runs' bits)."""
        self.counts = [mine + theirs for mine, theirs in zip(self.counts, other.counts, strict=True)]
        self.outcomes.update(other.outcomes)


def standing(log: Queryable, judgings: Sequence[Judging], ids: Sequence[str]) -> Standing:
    """The verdicts among ``ids`` that stand for each of ``judgings``, with their outcomes: one row a run comes
    back (its standing judgings as bits), not one a run and judge."""
    keys = [f"{j.name}/{j.rules_hash}" for j in judgings]
    if len(keys) > 64:
        raise ValueError(f"{len(keys)} judgings: a run's standing ones are the bits of one 64-bit number")
    latest = (
        "SELECT list_position(?, v.judge || '/' || v.rule_set_hash) - 1 AS judging, v.run_id,"
        " arg_max(v.outcome, v.judged_at) AS outcome FROM verdicts v"
        " WHERE v.code_version = ? AND list_contains(?, v.judge || '/' || v.rule_set_hash)"
        f" AND v.run_id IN (SELECT unnest(?)) AND {TRUSTED_BATCHES} GROUP BY ALL"
    )
    # one pass: a row a run (its standing judgings as bits), and a row a judging and outcome (how many)
    _, rows = log.query(
        f"WITH latest AS ({latest}) SELECT run_id, judging, outcome,"
        " CAST(bit_or(CAST(1 AS UBIGINT) << judging) AS UBIGINT), count(*)"
        " FROM latest GROUP BY GROUPING SETS ((run_id), (judging, outcome))",
        [keys, CODE_VERSION, keys, list(ids)],
    )
    stands: dict[str, int] = {}
    counts = [0] * len(judgings)
    outcomes: Counter = Counter()
    for run_id, index, outcome, mask, count in rows:
        if run_id is not None:
            stands[run_id] = int(mask)
            continue
        counts[index] += count
        outcomes[(judgings[index].name, judgings[index].rules_hash, outcome)] += count
    return Standing(stands, counts, outcomes)


def nothing_stands(judgings: Sequence[Judging]) -> Standing:
    """A full rejudge: every judging judges every run."""
    return Standing({}, [0] * len(judgings))
