"""A small log whose LLM calls have known tokens and models, for checking the study's cost by hand.

Experiment "c", phase "eval": each configuration plays tasks T1 and T2, two trials each (4 runs), and each
run makes the calls CALLS lists (model as the provider's answer names it, prompt, completion, cache read and
cache write tokens, API, HTTP status), recorded as the recorder records OpenAI's and Anthropic's usage (the
cache reads and writes are part of the prompt tokens).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

from fae.store import events as ev
from fae.store.log import Batch, EventLog, EventRow, RunRow, RunUpdate, VerdictRow
from fae.store.task_meta import TaskMetaRow, write_task_meta

T0 = datetime(2025, 1, 1, tzinfo=UTC)


class Call(NamedTuple):
    model: str | None
    prompt: int | None
    completion: int | None
    cache_read: int | None = None
    cache_write: int | None = None
    api: str = "chat"
    status: int = 200


HOSTILE = "$\\frac{$\u202e\x1b[2J"
"""A configuration name that is mathtext, a bidi override and a clear-screen sequence at once."""

CALLS: dict[str, list[Call]] = {
    # a dated snapshot, priced as its alias; part of each prompt read from the cache
    "cheap": [Call("gpt-4.1-mini-2025-04-14", 1000, 100, cache_read=400), Call("gpt-4.1-mini", 500, 50)],
    "big": [Call("gpt-4.1", 2000, 200)],
    "waste": [Call("gpt-4o-2024-08-06", 3000, 300)],  # dearer than "big" and less successful: dominated
    "claude": [Call("claude-sonnet-4-20250514", 1500, 100, cache_read=500, cache_write=200)],
    # a failed call with no usage spent nothing; the other is priced
    "flaky": [Call("gpt-4.1-mini", None, None, status=500), Call("gpt-4.1-mini", 800, 80)],
    "other-api": [Call("gpt-4.1", None, None, api="other")],  # an API fae does not read: tokens unknown
    "no-usage": [Call("gpt-4.1", None, None)],  # a stream without usage: tokens unknown
    "scripted": [Call("scripted:gold", 700, 70)],  # no price
    "silent": [],  # no LLM call at all: it cost nothing
    HOSTILE: [Call("gpt-4.1-nano", 100, 10)],
}
# strict passes of each configuration's four runs (T1 r0, T1 r1, T2 r0, T2 r1)
PASSES: dict[str, list[int]] = {
    "cheap": [1, 1, 0, 0],
    "big": [1, 1, 1, 1],
    "waste": [1, 0, 0, 0],
    "claude": [1, 1, 1, 0],
    "flaky": [1, 0, 0, 0],
    "other-api": [1, 1, 1, 1],
    "no-usage": [1, 1, 1, 1],
    "scripted": [1, 1, 1, 1],
    "silent": [0, 0, 0, 0],
    HOSTILE: [0, 1, 0, 0],
}


def _event(run_id: str, seq: int, event: ev.Event) -> EventRow:
    payload = ev.encode(event)
    return EventRow(
        run_id, seq, type(event).__struct_config__.tag, T0 + timedelta(seconds=seq), seq, "agent", "llm", payload
    )


def build(path: Path) -> Path:
    batch = Batch()
    start = 0
    for configuration, calls in CALLS.items():
        for index, passed in enumerate(PASSES[configuration]):
            task, trial = ("T1", "T2")[index // 2], index % 2
            run_id = f"c.{len(batch.runs)}"
            start += 1
            started = T0 + timedelta(minutes=start)
            batch.runs.append(
                RunRow(
                    run_id,
                    task,
                    0,
                    configuration,
                    trial,
                    suite="s",
                    agent_config={},
                    status="running",
                    started_at=started,
                    experiment="c",
                    phase="eval",
                )
            )
            batch.updates.append(RunUpdate(run_id, "finished", ended_at=started + timedelta(seconds=5)))
            for seq, call in enumerate(calls, 1):
                called = ev.LlmCalled(
                    exchange_id=f"{run_id}-{seq}",
                    api=call.api,
                    model=call.model,
                    prompt_tokens=call.prompt,
                    completion_tokens=call.completion,
                    total_tokens=None if call.prompt is None else call.prompt + (call.completion or 0),
                    status=call.status,
                    cache_read_tokens=call.cache_read,
                    cache_write_tokens=call.cache_write,
                )
                batch.events.append(_event(run_id, seq, called))
            batch.verdicts.append(
                VerdictRow(
                    run_id,
                    "task",
                    {"mode": "strict"},
                    "strict",
                    "test",
                    "pass" if passed else "fail",
                    bool(passed),
                    {},
                    T0 + timedelta(hours=1),
                    "live",
                )
            )
    with EventLog(path) as log:
        log.write_batch(batch)
        write_task_meta(log, [TaskMetaRow(t, 0, "records", 1, True, 1, 1) for t in ("T1", "T2")])
    return path
