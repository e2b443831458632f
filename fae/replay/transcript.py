"""Fold a run's conversation: the LLM messages, the tool calls in order, and the final answer."""

from __future__ import annotations

from typing import Any

import msgspec

from fae.recorder.llm import llm_in_full
from fae.recorder.mcp import tool_in_full
from fae.replay.source import RunLog
from fae.store import events as ev


class ToolUse(msgspec.Struct, frozen=True):
    """One tool call the agent made, with what came back."""

    seq: int
    tool: str
    arguments: Any
    result: Any
    is_error: bool
    actor: str | None


class Transcript(msgspec.Struct, frozen=True):
    messages: tuple[Any, ...]
    tool_calls: tuple[ToolUse, ...]
    llm_calls: int
    answer: str | None
    stop_reason: str | None


def fold_transcript(run: RunLog) -> Transcript:
    """The agent's side of a run: last LLM context plus reply, every agent tool call, the answer."""
    last: ev.LlmCalled | None = None
    calls: list[ToolUse] = []
    llm_calls = 0
    answer: str | None = None
    stop_reason: str | None = None
    for recorded in run.events:
        event = recorded.event
        if isinstance(event, ev.ToolCalled) and recorded.actor in (None, "agent"):
            event = tool_in_full(event, run.body)  # a large call's arguments and result, from its bodies
            calls.append(
                ToolUse(
                    recorded.seq,
                    event.tool,
                    event.arguments,
                    event.result,
                    event.is_error or event.error is not None,
                    recorded.actor,
                )
            )
        elif isinstance(event, ev.LlmCalled) and recorded.actor in (None, "agent"):
            llm_calls += 1
            last = event
        elif isinstance(event, ev.AnswerGiven):
            answer, stop_reason = event.text, event.stop_reason
    return Transcript(_conversation(last, run), tuple(calls), llm_calls, answer, stop_reason)


def _conversation(last: ev.LlmCalled | None, run: RunLog) -> tuple[Any, ...]:
    """The last call's messages and its reply (read from its bodies where the event only names them)."""
    if last is None:
        return ()
    last = llm_in_full(last, run.body)
    reply: dict[str, Any] = {"role": "assistant", "content": last.content}
    if last.tool_calls:
        reply["tool_calls"] = [{"id": c.call_id, "name": c.name, "arguments": c.arguments} for c in last.tool_calls]
    return (*last.messages, reply)
