"""Small logs written through the real EventLog: finished runs that share a seed body, each with a verdict."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fae.store import events as ev
from fae.store.log import Batch, EventLog, EventRow, RunRow, VerdictRow, blob_hash

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SEED = b'{"resourceType": "Bundle", "entry": []}'


def finished_run(
    run_id: str, *, task: str = "t", start: datetime = T0, body: bytes = b"", suite: str | None = None
) -> Batch:
    """One finished run: started, seeded (with the shared seed body), answered, finished; plus a verdict."""
    blobs = {blob_hash(SEED): SEED}
    if body:
        blobs[blob_hash(body)] = body
    events = [
        ev.RunStarted(task_id=task, variation=0, agent="scripted:gold"),
        ev.SandboxSeeded(sandbox="sb", fhir_base="http://fhir", resource_count=0, seed_blob=blob_hash(SEED)),
        ev.AnswerGiven(text=body.decode() or "done"),
        ev.RunFinished(),
    ]
    return Batch(
        blobs=blobs,
        runs=[
            RunRow(
                run_id=run_id,
                task_id=task,
                variation=0,
                agent="scripted:gold",
                repeat=0,
                status="finished",
                started_at=start,
                suite=suite,
            )
        ],
        events=[
            EventRow(
                run_id,
                seq,
                type(e).__struct_config__.tag,
                start + timedelta(seconds=seq),
                seq,
                "harness",
                None,
                ev.encode(e),
            )
            for seq, e in enumerate(events, 1)
        ],
        verdicts=[VerdictRow(run_id, "task", {"mode": "strict"}, "h", "v1", "pass", True, {"n": 1}, start, "live")],
    )


def write_log(path, *batches: Batch):
    with EventLog(path) as log:
        for batch in batches:
            log.write_batch(batch)
    return path
