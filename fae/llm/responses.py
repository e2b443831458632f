"""The OpenAI Responses API: input items as chat messages, a reply as a response object or its SSE events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from fae.llm.behaviours import Reply
from fae.llm.wire import arguments_text

_ARGUMENT_PIECE = 24


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
    tools: Any = None,
    tool_choice: Any = None,
) -> dict[str, Any]:
    """A completed ``response`` object holding one function call or one output message (``tools`` and
    ``tool_choice`` echo the request's)."""
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
        "tool_choice": tool_choice if tool_choice is not None else "auto",
        "tools": tools if isinstance(tools, list) else [],
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def response_events(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The events of a streamed response whose completed form is ``body``, in the API's order, each with its
    ``sequence_number``: created, in progress, the output item added, its text or argument deltas, done, and
    ``response.completed`` carrying the whole response."""
    pending = {**body, "status": "in_progress", "output": [], "usage": None}
    item = body["output"][0]
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": pending},
        {"type": "response.in_progress", "response": pending},
    ]
    where = {"item_id": item["id"], "output_index": 0}
    if item["type"] == "function_call":
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "arguments": "", "status": "in_progress"},
            }
        )
        text = item["arguments"]
        for start in range(0, len(text), _ARGUMENT_PIECE):
            events.append(
                {
                    "type": "response.function_call_arguments.delta",
                    **where,
                    "delta": text[start : start + _ARGUMENT_PIECE],
                }
            )
        events.append(
            {"type": "response.function_call_arguments.done", **where, "name": item["name"], "arguments": text}
        )
    else:
        part = item["content"][0]
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "content": [], "status": "in_progress"},
            }
        )
        events.append(
            {"type": "response.content_part.added", **where, "content_index": 0, "part": {**part, "text": ""}}
        )
        words = part["text"].split(" ")
        for piece in (word if i == 0 else " " + word for i, word in enumerate(words)):
            if piece:
                events.append(
                    {"type": "response.output_text.delta", **where, "content_index": 0, "delta": piece, "logprobs": []}
                )
        events.append(
            {"type": "response.output_text.done", **where, "content_index": 0, "text": part["text"], "logprobs": []}
        )
        events.append({"type": "response.content_part.done", **where, "content_index": 0, "part": part})
    events.append({"type": "response.output_item.done", "output_index": 0, "item": item})
    events.append({"type": "response.completed", "response": body})
    for number, event in enumerate(events):
        yield {**event, "sequence_number": number}
