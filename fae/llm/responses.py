"""A minimal OpenAI Responses API: input items as chat messages, a reply as a response object."""

from __future__ import annotations

import json
from typing import Any

from fae.llm.behaviours import Reply
from fae.llm.wire import arguments_text


def messages_from_input(items: Any, instructions: Any = None) -> list[dict[str, Any]] | None:
    """Chat messages equivalent to a Responses ``input``; None when its shape is not understood."""
    messages: list[dict[str, Any]] = []
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions})
    if isinstance(items, str):
        return [*messages, {"role": "user", "content": items}]
    if not isinstance(items, list):
        return None
    for item in items:
        if not isinstance(item, dict):
            return None
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": item.get("role", "user"), "content": item.get("content")})
        elif kind == "function_call":
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments", "")},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            content = output if isinstance(output, (str, list)) else json.dumps(output)
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": content})
    return messages


def response_body(
    reply: Reply,
    *,
    response_id: str,
    model: str,
    created: int,
    input_tokens: int,
    output_tokens: int,
) -> dict[str, Any]:
    """A completed ``response`` object holding one function call or one output message."""
    if reply.tool_call is not None:
        output: dict[str, Any] = {
            "type": "function_call",
            "id": "fc_" + reply.tool_call.id,
            "call_id": reply.tool_call.id,
            "name": reply.tool_call.name,
            "arguments": arguments_text(reply),
            "status": "completed",
        }
    else:
        output = {
            "type": "message",
            "id": "msg_" + response_id,
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": reply.content or "", "annotations": []}],
        }
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": "completed",
        "model": model,
        "output": [output],
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }
