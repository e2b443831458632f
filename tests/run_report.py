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
            " FROM runs r WHERE r.status <> 'finished' ORDER BY r.run_id")
    if not rows:
        return f"every run in {log_path} finished"
    return "\n".join(f"{run_id}: {status} (cause {cause}): {error or ''} | RunFailed: {reason}"
                     for run_id, status, cause, error, reason in rows)
