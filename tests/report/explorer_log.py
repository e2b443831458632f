"""The synthetic study log plus one run whose every string is hostile (an answer, an LLM message, a tool's
arguments and result, a FHIR body, a fault, a resource in the seed and the end state, a verdict's evidence and
the run id itself), written through the real store API, for the explorer's escaping tests."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from fae.store import events as ev
from fae.store.log import Batch, EventLog, EventRow, RunRow, RunUpdate, VerdictRow, blob_hash
from tests.report.synthetic import T0, build

ATTACK = '</script><script>window.pwned=1</script><img src=x onerror="window.pwned=2">\u202e<b>bold</b>'
LINK = "javascript:window.pwned=3"
HOSTILE_RUN = 'A.T1.v0.evil"><script>window.pwned=4</script>'
SEED = {
    "resourceType": "Bundle",
    "entry": [
        {"resource": {"resourceType": "Patient", "id": "p1", "name": [{"family": "Keep"}]}},
        {"resource": {"resourceType": "Patient", "id": "gone", "name": [{"family": "Gone"}]}},
        {"resource": {"resourceType": "Patient", "id": "same", "meta": {"versionId": "1"}}},
    ],
}
END = [
    {"resourceType": "Patient", "id": "p1", "name": [{"family": ATTACK}], "meta": {"versionId": "2"}},
    {"resourceType": "Observation", "id": "o1", "note": [{"text": LINK}]},
    {"resourceType": "Patient", "id": "same", "meta": {"versionId": "3", "lastUpdated": "2025-01-01T00:00:00Z"}},
]
BODY = {"resourceType": "Patient", "id": "p1", "name": [{"family": ATTACK}], "photo": [{"url": LINK}]}


def _event(seq: int, event: ev.Event, actor: str = "agent", at: float | None = None) -> EventRow:
    when = T0 + timedelta(hours=5, seconds=seq if at is None else at)
    return EventRow(HOSTILE_RUN, seq, type(event).__struct_config__.tag, when, seq, actor, None, ev.encode(event))


def build_explorer_log(path: Path) -> Path:
    """The synthetic log (tests.report.synthetic) with the hostile run added."""
    build(path)
    seed, end, body = (json.dumps(v).encode() for v in (SEED, END, BODY))
    batch = Batch(blobs={blob_hash(b): b for b in (seed, end, body)})
    started = T0 + timedelta(hours=5)
    batch.runs.append(RunRow(HOSTILE_RUN, "T1", 0, "A", 7, suite="s", started_at=started, experiment="e", phase="eval"))
    batch.updates.append(RunUpdate(HOSTILE_RUN, "finished", ended_at=started + timedelta(seconds=9)))
    batch.events += [
        _event(0, ev.RunStarted(task_id="T1", variation=0, agent="A", prompt=ATTACK), actor="harness"),
        _event(1, ev.SandboxSeeded(sandbox="s", fhir_base="b", resource_count=3, seed_blob=blob_hash(seed)), "harness"),
        _event(
            2,
            ev.LlmCalled(
                exchange_id="x1",
                api="chat",
                model="m-a",
                messages=({"role": "user", "content": ATTACK},),
                tool_calls=(ev.ToolCallRequest("c1", "updateResource", json.dumps({"family": ATTACK})),),
                total_tokens=10,
            ),
        ),
        # logged late: its exchange started at 3.5 s but the log received it after the tool call (seq 4)
        _event(
            5,
            ev.HttpExchanged(
                exchange_id="x2",
                method="PUT",
                url=f"http://fhir/Patient/p1?{LINK}",
                path="/Patient/p1",
                status=200,
                response_blob=blob_hash(body),
                response_size=len(body),
                fault=ATTACK,
            ),
            at=3.5,
        ),
        _event(4, ev.ToolCalled(tool="updateResource", arguments={"family": ATTACK}, result={"url": LINK})),
        _event(6, ev.AnswerGiven(text=f'{ATTACK}<a href="{LINK}">click</a>')),
        _event(7, ev.StateCaptured(resource_count=3, state_blob=blob_hash(end)), actor="harness"),
        _event(8, ev.RunFinished()),
    ]
    batch.verdicts.append(
        VerdictRow(
            HOSTILE_RUN,
            "task",
            {"mode": "strict"},
            "task:strict",
            "test",
            "fail",
            False,
            {"answer": ATTACK, "expected": LINK},
            T0 + timedelta(hours=6),
            "live",
        )
    )
    with EventLog(path) as log:
        log.write_batch(batch)
    return path
