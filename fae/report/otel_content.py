"""Message contents in the GenAI conventions' shapes, for an export that opted in (``--otel-content``).

OpenAI-style chat messages (and Responses API input items) become ``gen_ai.input.messages``: a list of
``{"role", "parts"}`` where a part is ``text``, ``tool_call`` or ``tool_call_response``; a reply becomes
``gen_ai.output.messages`` with its ``finish_reason``. Values go on spans as JSON strings, which the conventions
allow where a backend takes no structured attribute (most trace stores show a string and drop or flatten a map).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from fae.store.events import ToolCallRequest
from fae.util.json_text import json_or_text

FINISH_REASONS = {
    "tool_calls": "tool_call",
    "function_call": "tool_call",
    "tool_use": "tool_call",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
}
"""OpenAI's and Anthropic's stop reasons where the conventions' output schema names them otherwise."""


def json_text(value: Any) -> str:
    """``value`` as compact JSON text (anything JSON cannot hold as its string)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _text_parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if isinstance(content, list):
        parts: list[dict[str, Any]] = []
        for item in content:
            kind = item.get("type") if isinstance(item, dict) else None
            if kind == "tool_use":  # Anthropic's blocks
                parts.append(
                    {
                        "type": "tool_call",
                        "id": item.get("id"),
                        "name": str(item.get("name") or ""),
                        "arguments": item.get("input"),
                    }
                )
            elif kind == "tool_result":
                parts.append(
                    {"type": "tool_call_response", "id": item.get("tool_use_id"), "response": item.get("content")}
                )
            elif isinstance(item, dict) and isinstance(item.get("text"), str):
                parts.append({"type": "text", "content": item["text"]})
            elif isinstance(item, dict):
                parts.append({**item, "type": str(item.get("type") or "unknown")})
            else:
                parts.append({"type": "text", "content": str(item)})
        return parts
    return [{"type": "text", "content": json_text(content)}]


def _calls(calls: Any) -> list[dict[str, Any]]:
    parts = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        inner = call.get("function")
        function: dict[str, Any] = inner if isinstance(inner, dict) else call
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id") or call.get("call_id"),
                "name": str(function.get("name") or ""),
                "arguments": json_or_text(function.get("arguments")),
            }
        )
    return parts


def _message(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict):
        return {"role": "user", "parts": _text_parts(message)}
    kind = message.get("type")
    if kind == "function_call":  # a Responses API input item
        return {"role": "assistant", "parts": _calls([message])}
    if kind == "function_call_output":
        return {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": message.get("call_id"), "response": message.get("output")}],
        }
    role = str(message.get("role") or "user")
    if role == "tool":
        return {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": message.get("tool_call_id"), "response": message.get("content")}
            ],
        }
    return {"role": role, "parts": _text_parts(message.get("content")) + _calls(message.get("tool_calls"))}


def input_messages(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """A request's messages in the conventions' input shape, in the order they were sent."""
    return [_message(message) for message in messages]


def output_messages(
    content: str | None, tool_calls: Iterable[ToolCallRequest], finish_reason: str | None
) -> list[dict[str, Any]]:
    """A reply as one output message (fae records the first choice)."""
    parts: list[dict[str, Any]] = [{"type": "text", "content": content}] if content is not None else []
    parts += [
        {"type": "tool_call", "id": call.call_id, "name": call.name, "arguments": json_or_text(call.arguments)}
        for call in tool_calls
    ]
    finish = FINISH_REASONS.get(finish_reason or "", finish_reason or "stop")
    return [{"role": "assistant", "parts": parts, "finish_reason": finish}]


def tool_definitions(names: Iterable[str]) -> list[dict[str, Any]]:
    """The tools a request offered, by name (the log keeps their names, not their schemas)."""
    return [{"type": "function", "name": name} for name in names]


def prompt_messages(prompt: str) -> list[dict[str, Any]]:
    return [{"role": "user", "parts": [{"type": "text", "content": prompt}]}]


def answer_messages(answer: str | None, stop_reason: str) -> list[dict[str, Any]]:
    parts = [{"type": "text", "content": answer}] if answer is not None else []
    return [
        {"role": "assistant", "parts": parts, "finish_reason": "stop" if stop_reason == "answered" else stop_reason}
    ]
