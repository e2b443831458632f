"""The wait before a run's read-back: ``settle_s`` after the agent's last write, as ensure_record requires.

A correction passes ``ensure_record`` only when the read-back came at least
``settle_s`` after the last write; the harness waits for it before its state
capture, so the verdict does not depend on how fast the agent answered.
"""

from __future__ import annotations

import time

import anyio

from fae.harness.stack import Stack
from fae.judge.registry import get_judge

MARGIN_S = 0.02


async def settle(stack: Stack, run_id: str, settle_s: float) -> float:
    """Wait until ``settle_s`` has passed since the run's last FHIR write through the proxy (the agent's,
    or another actor's in a scenario; the proxy's clock, as recorded), so the read-back that follows comes
    at least that long after it; returns the wait."""
    await stack.writer.flush()
    _, rows = stack.log.query(
        "SELECT max(CAST(e.payload->>'$.started_at' AS DOUBLE)) FROM events e JOIN events f"
        " ON f.run_id = e.run_id AND f.kind = 'FhirInteracted'"
        " AND f.payload->>'$.exchange_id' = e.payload->>'$.exchange_id'"
        " WHERE e.run_id = ? AND e.kind = 'HttpExchanged' AND e.actor NOT IN ('harness', 'setup')"
        " AND e.payload->>'$.method' IN ('POST', 'PUT', 'PATCH', 'DELETE')", [run_id])
    last = rows[0][0] if rows else None
    # a timer may wake a little early on the wall clock: the margin keeps the read-back after the window
    wait = 0.0 if last is None else max(0.0, last + settle_s + MARGIN_S - time.time())
    if wait:
        await anyio.sleep(wait)
    return wait


def default_settle_s() -> float:
    return float(get_judge("ensure_record").rules["settle_s"].default)
