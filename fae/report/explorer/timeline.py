"""A run's timeline as HTML: every event in time order, each a line saying what happened and, unfolded, its
content (the LLM's messages and tool calls, a tool's arguments and result, an exchange's bodies pretty)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from fae.harness.timeline import describe, out_of_step
from fae.recorder.llm import llm_in_full
from fae.recorder.mcp import tool_in_full
from fae.report.explorer.markup import block, pretty, text
from fae.store import events as ev
from fae.util.json_text import json_or_text

Body = Callable[[str], bytes | None]

EVENTS = (
    "SELECT seq, kind, actor, epoch_ms(wall_time), payload FROM events WHERE run_id = ? AND kind <> 'ChunkReceived'"
    " ORDER BY wall_time, seq"
)


def _part(title: str, content: str) -> str:
    return f"<h3>{text(title)}</h3>{content}"


def _message(message: Any) -> str:
    if not isinstance(message, dict):
        return pretty(message)
    role = message.get("role") or message.get("type") or "message"
    content = message.get("content")
    rest = {k: v for k, v in message.items() if k not in ("role", "content")}
    shown = pretty(content) if content not in (None, "") else ""
    return f"<h3>{text(role)}</h3>{shown}" + (pretty(rest) if rest else "")


def _llm(event: ev.LlmCalled) -> str:
    parts = [_message(message) for message in event.messages]
    if event.content:
        parts.append(_part("reply", pretty(event.content)))
    for call in event.tool_calls:
        parts.append(_part(f"calls {call.name} ({call.call_id})", pretty(json_or_text(call.arguments))))
    if event.error:
        parts.append(_part("error", pretty(event.error)))
    usage = f"tokens: {event.prompt_tokens} in, {event.completion_tokens} out, finish {event.finish_reason}"
    return f'<p class="note">{text(usage)}</p>' + "".join(parts)


def _tool(event: ev.ToolCalled) -> str:
    parts = [_part("arguments", pretty(event.arguments)), _part("result", pretty(event.result))]
    if event.error:
        parts.append(_part("error", pretty(event.error)))
    return "".join(parts)


def _http(event: ev.HttpExchanged, body: Body) -> str:
    parts = [f"<p>{text(event.method)} {text(event.url)} → {text(event.status or event.error)}</p>"]
    if event.fault:
        parts.append(f'<p class="fail">fault applied in flight: {text(event.fault)}</p>')
    if event.request_blob:
        parts.append(_part(f"request body ({event.request_size} bytes)", pretty(body(event.request_blob) or b"")))
    answer = event.decoded_blob or event.response_blob
    if answer:
        parts.append(_part(f"response body ({event.response_size} bytes)", pretty(body(answer) or b"")))
    if event.decode_error:
        parts.append(_part("could not decode", pretty(event.decode_error)))
    return "".join(parts)


def _content(event: ev.Event, body: Body) -> str:
    """What unfolds under an event's line; empty where the line says it all."""
    if isinstance(event, ev.LlmCalled):
        return _llm(llm_in_full(event, body))
    if isinstance(event, ev.ToolCalled):
        return _tool(tool_in_full(event, body))
    if isinstance(event, ev.HttpExchanged):
        return _http(event, body)
    if isinstance(event, ev.FhirInteracted) and event.issues:
        return _part("issues", pretty(msgspec.to_builtins(event.issues)))
    if isinstance(event, ev.AnswerGiven):
        return f"<pre>{block(event.text or '')}</pre>"
    if isinstance(event, ev.RunFailed):
        return _part("reason", pretty(event.reason)) + (_part("cause", pretty(event.cause)) if event.cause else "")
    if isinstance(event, ev.PromptParaphrased):
        return _part("prompt", pretty(event.prompt))
    if isinstance(event, ev.RunStarted) and event.prompt:
        return _part("prompt", pretty(event.prompt))
    return ""


def timeline_html(reader: Any, run_id: str) -> tuple[str, int]:
    """The run's events as an ordered list (time order, seq breaking a tie), and how many there are."""
    _, rows = reader.query(EVENTS, [run_id])
    start = rows[0][3] if rows else 0
    items = []
    for seq, kind, actor, wall_ms, payload in rows:
        event = ev.decode(payload)
        content = _content(event, reader.blob)
        summary = describe(kind, msgspec.to_builtins(event))
        fault = " fault" if isinstance(event, ev.HttpExchanged) and (event.fault or event.error) else ""
        head = (
            f'<span class="t">{(wall_ms - start) / 1000:.3f} s</span><span class="actor">{text(actor)}</span>'
            f'<span class="kind">{text(kind)}</span>{text(summary.strip())}'
        )
        line = f"<details><summary>{head}</summary>{content}</details>" if content else head
        items.append(f'<li class="k-{text(kind)}{fault}" id="e{seq}">{line}</li>')
    late = out_of_step([row[0] for row in rows])
    note = (
        f'<p class="note">In time order, each event at its start; {late} came into the log after one that started '
        "later (an exchange is logged when it ends).</p>"
        if late
        else '<p class="note">In time order, each event at its start; click a line to unfold it.</p>'
    )
    return note + f'<ol class="timeline">{"".join(items)}</ol>', len(rows)
