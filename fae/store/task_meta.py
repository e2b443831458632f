"""Task metadata rows in the log (``task_meta``): family, difficulty and expected calls per variation."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import duckdb

from fae.errors import StoreError
from fae.store.log import EventLog


@dataclass(frozen=True, slots=True)
class TaskMetaRow:
    """What the study slices a task variation by; ``gold_calls`` counts its gold plan's tool steps."""

    task_id: str
    variation: int
    family: str | None
    difficulty: int | None
    writes: bool | None
    min_tool_calls: int | None
    gold_calls: int | None


def missing_task_variations(log: EventLog) -> list[tuple[str, int]]:
    """(task, variation) pairs that runs name and ``task_meta`` does not describe yet."""
    _, rows = log.query(
        "SELECT DISTINCT r.task_id, r.variation FROM runs r ANTI JOIN task_meta m"
        " ON m.task_id = r.task_id AND m.variation = r.variation ORDER BY 1, 2"
    )
    return [(task_id, int(variation)) for task_id, variation in rows]


def write_task_meta(log: EventLog, rows: Iterable[TaskMetaRow]) -> int:
    """Add rows not there yet (derived data: a row already written is kept); returns how many were new."""
    values = [(r.task_id, r.variation, r.family, r.difficulty, r.writes, r.min_tool_calls, r.gold_calls) for r in rows]
    if not values:
        return 0
    try:
        before = log.query("SELECT count(*) FROM task_meta")[1][0][0]
        with log._lock:
            log.con.executemany("INSERT INTO task_meta VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", values)
        return log.query("SELECT count(*) FROM task_meta")[1][0][0] - before
    except duckdb.Error as exc:
        raise StoreError(f"cannot write task metadata to {log.path}: {exc}") from None
