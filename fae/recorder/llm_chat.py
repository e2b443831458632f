"""What an OpenAI Chat Completions exchange meant: its messages, tool calls, finish reason.

A streamed completion (``chat.completion.chunk`` events) is assembled into the
shape of a non-streamed one: content and tool-call arguments joined by index.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fae.store.events import ToolCallRequest


def conversation(request: dict[str, Any]) -> list[Any] | None:
    """The request's messages, as written."""
    messages = request.get("messages")
    return messages if isinstance(messages, list) else None


def completion_from_chunks(chunks: Iterable[Any], keep_text: bool = True) -> dict[str, Any] | None:
    """Assemble a streamed chat completion into the shape of a non-streamed one (None if there were no chunks);
    ``keep_text`` False: the reply's text and tool-call arguments are left out (they stay in the body)."""
    content: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish = None
    usage = None
    model = None
    seen = False
    for chunk in chunks:
        seen = True
        if not isinstance(chunk, dict):
            continue
        model = chunk.get("model") or model
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str) and keep_text:
                content.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(int(call.get("index", 0)), {"id": "", "name": "", "arguments": ""})
                slot["id"] = call.get("id") or slot["id"]
                fn = call.get("function") or {}
                slot["name"] = fn.get("name") or slot["name"]
                slot["arguments"] += (fn.get("arguments") or "") if keep_text else ""
            finish = choice.get("finish_reason") or finish
    if not seen:
        return None
    message = {
        "content": "".join(content) if content else None,
        "tool_calls": [
            {"id": c["id"], "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())
        ],
    }
    return {"model": model, "usage": usage, "choices": [{"message": message, "finish_reason": finish}]}


def reply(response: dict[str, Any]) -> tuple[str | None, list[ToolCallRequest], Any]:
    """(the first choice's content, its tool calls, its finish reason)."""
    choices = response.get("choices") or []
    first = choices[0] if choices and isinstance(choices[0], dict) else {}
    message = first.get("message") or {}
    content = message.get("content") if isinstance(message.get("content"), str) else None
    calls = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        calls.append(
            ToolCallRequest(
                call_id=str(call.get("id") or ""),
                name=str(fn.get("name", "")),
                arguments=str(fn.get("arguments") or ""),
            )
        )
    return content, calls, first.get("finish_reason")
