"""Why runs did not finish, for the message of a test that expected them to."""

from __future__ import annotations

from pathlib import Path

from fae.store.live import LogReader


def why_not_finished(log_path: str | Path) -> str:
    """One line per run that did not finish: id, status, cause, stored error and its RunFailed reason."""
    with LogReader(log_path) as reader:
        _, rows = reader.query(
            "SELECT r.run_id, r.status, r.cause, r.error,"
            " (SELECT e.payload->>'$.reason' FROM events e WHERE e.run_id = r.run_id AND e.kind = 'RunFailed'"
            "  ORDER BY e.seq DESC LIMIT 1) AS reason"
            " FROM runs r WHERE r.status <> 'finished' ORDER BY r.run_id"
        )
    if not rows:
        return f"every run in {log_path} finished"
    return "\n".join(
        f"{run_id}: {status} (cause {cause}): {error or ''} | RunFailed: {reason}"
        for run_id, status, cause, error, reason in rows
    )


def live_against_rejudge(log_path: str | Path) -> tuple[list[tuple], list[tuple]]:
    """The live verdicts of a log, and those a rejudge in this process gives the same runs: (run, judge, outcome,
    passed) rows, sorted, for a test that checks a recording elsewhere (a worker, an actor) judged as here does."""
    from fae import api
    from fae.store.log import EventLog

    batch = api.rejudge(log_path, workers=1, full=True).batch
    rows = {}
    with EventLog(log_path, read_only=True) as opened:
        for name in ("live", batch):
            _, found = opened.query(
                "SELECT run_id, judge, outcome, passed FROM verdicts WHERE batch = ? ORDER BY run_id, judge", [name]
            )
            rows[name] = [tuple(row) for row in found]
    return rows["live"], rows[batch]
