"""A run's timeline as text lines, from the log alone."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from fae.recorder.llm import llm_in_full
from fae.recorder.mcp import tool_in_full
from fae.store import events as ev
from fae.util.visible import visible


def _short(value: Any, limit: int = 100) -> str:
    """A value on one line: hidden characters escaped first (a C1 control or a line separator must not vanish
    into a space), then each run of whitespace one space, then cut at ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    text = " ".join(visible(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _one_line(text: str) -> str:
    """A timeline line stays one line: hidden characters escaped, a newline or tab in a value shown as a space."""
    return visible(text).replace("\n", " ").replace("\t", " ")


def _run_started(payload: dict[str, Any]) -> str:
    return f"run of {payload['task_id']} v{payload['variation']} by {payload['agent']} (now {payload.get('task_now')})"


def _http(payload: dict[str, Any]) -> str:
    outcome = payload.get("status") or f"ERROR {payload.get('error')}"
    ms = payload.get("duration_ms")
    return f"{payload['method']} {_short(payload['path'], 80)} → {outcome}" + (f" ({ms:.1f} ms)" if ms else "")


def _fhir(payload: dict[str, Any]) -> str:
    target = "/".join(p for p in (payload.get("resource_type"), payload.get("resource_id")) if p)
    extra = f" v{payload['version']}" if payload.get("version") else ""
    if payload.get("search_ids"):
        extra += f" found {len(payload['search_ids'])}"
    issues = payload.get("issues") or []
    if issues:
        extra += f" issue: {_short(issues[0].get('diagnostics') or issues[0].get('code'), 60)}"
    return f"  fhir {payload['interaction']} {target}{extra}"


def _llm(payload: dict[str, Any]) -> str:
    calls = ", ".join(c[1] if isinstance(c, list) else c.get("name", "") for c in payload.get("tool_calls") or [])
    said = f" says {_short(payload['content'], 60)}" if payload.get("content") else ""
    err = f" ERROR {payload['error']}" if payload.get("error") else ""
    return (
        f"  llm {payload.get('model')} ({len(payload.get('messages') or [])} msgs, "
        f"{payload.get('total_tokens')} tok){' calls ' + calls if calls else ''}{said}{err}"
    )


def _tool(payload: dict[str, Any]) -> str:
    flag = " ERROR" if payload.get("is_error") else ""
    return (
        f"  tool {payload['tool']}({_short(payload.get('arguments'), 70)}){flag} → {_short(payload.get('result'), 60)}"
    )


def _program(payload: dict[str, Any]) -> str:
    if payload.get("timed_out"):
        how = "ran past its timeout"
    elif payload.get("signal"):
        how = f"killed by {payload['signal']}"
    else:
        how = f"exited {payload.get('exit_code')}"
    return (
        f"program {how} (answer from {payload.get('answer_from') or 'nowhere'}; "
        f"stdout {payload.get('stdout_bytes', 0)} bytes, stderr {payload.get('stderr_bytes', 0)} bytes)"
    )


DESCRIPTIONS: dict[str, Callable[[dict[str, Any]], str]] = {
    "RunStarted": _run_started,
    "SandboxSeeded": lambda p: f"sandbox {p['sandbox']} seeded with {p['resource_count']} resources",
    "HttpExchanged": _http,
    "FhirInteracted": _fhir,
    "LlmCalled": _llm,
    "ToolCalled": _tool,
    "AnswerGiven": lambda p: f"answer ({p.get('stop_reason')}): {_short(p.get('text'), 120)}",
    "ProgramEnded": _program,
    "StateCaptured": lambda p: f"state captured: {p['resource_count']} resources",
    "RunFinished": lambda p: f"run finished ({p.get('stop_reason')})",
    "RunFailed": lambda p: f"run {p['status']}: {p['reason']}",
    "ChunkReceived": lambda p: f"  chunk {p['index']} ({p['size']} bytes at {p['offset_ms']:.1f} ms)",
}
"""How each kind of event is said on its timeline line (a kind not here is said by its name)."""


def describe(kind: str, payload: dict[str, Any]) -> str:
    """One line saying what an event was."""
    said = DESCRIPTIONS.get(kind)
    return said(payload) if said is not None else kind


def _in_full(payload: str | bytes, reader: Any) -> dict[str, Any]:
    """A payload with what it left in its bodies (a large history, reply, arguments or result) read back."""
    called = ev.decode(payload)
    if isinstance(called, ev.LlmCalled):
        return msgspec.to_builtins(llm_in_full(called, reader.blob))
    assert isinstance(called, ev.ToolCalled)
    return msgspec.to_builtins(tool_in_full(called, reader.blob))


def out_of_step(seqs: list[int]) -> int:
    """How many events, in time order, come after one the log received later (a higher seq)."""
    count, highest = 0, -1
    for seq in seqs:
        if seq < highest:
            count += 1
        highest = max(highest, seq)
    return count


def timeline_lines(reader: Any, run_id: str) -> Iterator[str]:
    """The run's header and its events in time order (each at the time it started; seq breaks a tie)."""
    _, run = reader.query(
        "SELECT task_id, variation, agent, repeat, status, stop_reason, error FROM runs WHERE run_id = ?", [run_id]
    )
    task_id, variation, agent, repeat, status, stop_reason, error = run[0]
    yield _one_line(
        f"run {run_id}: task {task_id} v{variation}, agent {agent}, repeat {repeat}: {status}"
        + (f" ({error})" if error else "")
    )
    _, rows = reader.query(
        "SELECT seq, kind, actor, epoch_ms(wall_time), payload FROM events WHERE run_id = ?"
        " AND kind <> 'ChunkReceived' ORDER BY wall_time, seq",
        [run_id],
    )
    late = out_of_step([row[0] for row in rows])
    if late:
        yield (
            f"events in time order, each at its start; {late} of them came into the log after an event that "
            "started later (an exchange is logged when it ends), so their seq (the log's order) is out of step"
        )
    start = rows[0][3] if rows else 0
    for seq, kind, actor, wall_ms, payload in rows:
        event = json.loads(payload)
        if kind in ("LlmCalled", "ToolCalled") and (event.get("request_blob") or event.get("response_blob")):
            event = _in_full(payload, reader)
        yield _one_line(f"{seq:>5} {(wall_ms - start) / 1000:>8.3f}s {actor or '':<9} {describe(kind, event)}")
