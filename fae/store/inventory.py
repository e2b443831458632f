"""What a log holds, at a glance: the first thing a colleague asks of a log they were sent (``fae log info``).

Every figure is one read-only query on the sandboxed reader (``fae.store.live.LogReader``), so it works on a
log a recording holds open, and reads nothing outside the log.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fae.store.bodies import bodies_dir
from fae.store.live import LogReader

KEEPS_TASK = "TaskRendered"


@dataclass
class Inventory:
    """A log's contents by kind, each a plain value (``as_dict`` is its JSON form)."""

    path: str
    size_bytes: int
    schema_version: int
    written_by: dict[str, str]
    runs: int
    runs_by_status: dict[str, int]
    first_start: str | None
    last_end: str | None
    suites: dict[str, int]
    experiments: dict[str, int]
    agents: dict[str, int]
    models: dict[str, int]
    tasks: int
    variations: int
    runs_keeping_their_task: int
    verdict_batches: dict[str, int] = field(default_factory=dict)
    judges: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _counts(reader: LogReader, sql: str) -> dict[str, int]:
    _, rows = reader.query(sql)
    return {("(none)" if key is None else str(key)): int(count) for key, count in rows}


def _one(reader: LogReader, sql: str) -> Any:
    _, rows = reader.query(sql)
    return rows[0][0] if rows else None


def _size(path: Path) -> int:
    """The log's bytes on disk: the file, its WAL, and the side files that keep large bodies."""
    total = 0
    for part in (path, path.with_name(path.name + ".wal")):
        if part.is_file():
            total += part.stat().st_size
    bodies = bodies_dir(path)
    if bodies.is_dir():
        total += sum(p.stat().st_size for p in bodies.rglob("*") if p.is_file() and not p.is_symlink())
    return total


def inventory(path: str | Path) -> Inventory:
    """What the log at ``path`` holds."""
    log = Path(path)
    with LogReader(log) as reader:
        written = dict(reader.query("SELECT key, value FROM log_info ORDER BY key")[1])
        started = _one(reader, "SELECT min(started_at) FROM runs")
        ended = _one(reader, "SELECT max(coalesce(ended_at, started_at)) FROM runs")
        return Inventory(
            path=str(log),
            size_bytes=_size(log),
            schema_version=int(_one(reader, "SELECT max(version) FROM schema_version") or 0),
            written_by={str(k): str(v) for k, v in written.items()},
            runs=int(_one(reader, "SELECT count(*) FROM runs")),
            runs_by_status=_counts(reader, "SELECT status, count(*) FROM runs GROUP BY ALL ORDER BY 1"),
            first_start=None if started is None else started.isoformat(),
            last_end=None if ended is None else ended.isoformat(),
            suites=_counts(reader, "SELECT suite, count(*) FROM runs GROUP BY ALL ORDER BY 1"),
            experiments=_counts(
                reader,
                "SELECT experiment || coalesce('/' || phase, ''), count(*) FROM runs WHERE experiment IS NOT NULL"
                " GROUP BY ALL ORDER BY 1",
            ),
            agents=_counts(reader, "SELECT agent, count(*) FROM runs GROUP BY ALL ORDER BY 1"),
            models=_counts(
                reader,
                "SELECT payload->>'$.model', count(*) FROM events WHERE kind = 'LlmCalled' GROUP BY ALL ORDER BY 1",
            ),
            tasks=int(_one(reader, "SELECT count(DISTINCT task_id) FROM runs")),
            variations=int(_one(reader, "SELECT count(*) FROM (SELECT DISTINCT task_id, variation FROM runs)")),
            runs_keeping_their_task=int(
                _one(reader, f"SELECT count(DISTINCT run_id) FROM events WHERE kind = '{KEEPS_TASK}'")
            ),
            verdict_batches=_counts(
                reader,
                "SELECT CASE WHEN complete IS NULL THEN 'live' WHEN complete THEN 'complete' ELSE 'incomplete' END,"
                " count(DISTINCT batch) FROM batch_status GROUP BY ALL ORDER BY 1",
            ),
            judges=_counts(reader, "SELECT judge, count(*) FROM verdicts GROUP BY ALL ORDER BY 1"),
        )
