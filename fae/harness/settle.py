"""The wait before a run's read-back: its requests recorded, then ``settle_s`` after its last write where a judge
could ask for it.

A correction passes ``ensure_record`` only when the read-back came at least
``settle_s`` after the last write to the record; the harness waits for it
before its state capture, so the verdict does not depend on how fast the
agent answered. The judge looks at that gap only where a record was written
more than once or by another actor than the agent, so on the embedded server
(whose writes are visible as soon as they are answered) a run with at most
one write, the agent's, to one resource, is read back as soon as its
requests are recorded. An external server may index a write after answering
it: there every run with a write waits.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import anyio

from fae.harness.stack import Stack
from fae.judge.registry import get_judge

MARGIN_S = 0.02
MAX_ROUNDS = 5
"""Waits in a row while writes keep landing during the wait (each extends it to settle_s after the newest)."""
SINGLE_RESOURCE = ("create", "update", "patch", "delete")
"""Writes that touch exactly one resource: one of them cannot be a correction."""


def needs_window(writes: Sequence[tuple[float | None, str, str]], embedded: bool) -> bool:
    """Whether the read-back must wait ``settle_s`` after the last of ``writes`` ((started_at, actor,
    interaction), the run's FHIR writes but the harness's): on an external server whenever there is one; on
    the embedded one unless it is a single write, the agent's, to one resource."""
    if not writes:
        return False
    if not embedded or len(writes) > 1:
        return True
    at, actor, interaction = writes[0]
    return at is None or actor != "agent" or interaction not in SINGLE_RESOURCE


def _writes(stack: Stack, run_id: str) -> list[tuple[float | None, str, str]]:
    """The run's recorded FHIR writes, but the harness's and the setup's, as the judge's trail sees them."""
    _, rows = stack.log.query(
        "SELECT CAST(e.payload->>'$.started_at' AS DOUBLE), e.actor, f.payload->>'$.interaction'"
        " FROM events e JOIN events f"
        " ON f.run_id = e.run_id AND f.kind = 'FhirInteracted'"
        " AND f.payload->>'$.exchange_id' = e.payload->>'$.exchange_id'"
        " WHERE e.run_id = ? AND e.kind = 'HttpExchanged' AND e.actor NOT IN ('harness', 'setup')"
        " AND e.payload->>'$.method' IN ('POST', 'PUT', 'PATCH', 'DELETE')",
        [run_id],
    )
    return [(at, actor, interaction) for at, actor, interaction in rows]


async def settle(stack: Stack, run_id: str, settle_s: float) -> float:
    """Wait until the run's requests are recorded (at most ``settle_s``: a request left hanging does not hold
    the run longer than the wait it had before), then, where ``needs_window`` says so, until ``settle_s`` has
    passed since its last FHIR write on the proxy's clock, as recorded; a write that lands meanwhile starts the
    wait again. Returns the seconds slept after the requests were recorded."""
    slept = 0.0
    for _ in range(MAX_ROUNDS):
        await stack.proxy.in_flight.drained(run_id, timeout_s=max(settle_s, MARGIN_S))
        await stack.writer.flush()
        writes = _writes(stack, run_id)
        if not needs_window(writes, stack.embedded):
            break
        last = max((at for at, _, _ in writes if at is not None), default=None)
        # a timer may wake a little early on the wall clock: the margin keeps the read-back after the window
        wait = 0.0 if last is None else last + settle_s + MARGIN_S - time.time()
        if wait <= 0:
            break
        await anyio.sleep(wait)
        slept += wait
    return slept


def default_settle_s() -> float:
    return float(get_judge("ensure_record").rules["settle_s"].default)
