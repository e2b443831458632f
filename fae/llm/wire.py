"""The OpenAI wire format: completion bodies, streamed chunks, usage and error bodies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from fae.llm.behaviours import Reply

_ARGUMENT_PIECE = 24


def error_body(message: str, *, type_: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error object."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def arguments_text(reply: Reply) -> str:
    """The tool call's arguments as the JSON string OpenAI sends ('' when there is no call)."""
    if reply.tool_call is None:
        return ""
    return json.dumps(reply.tool_call.arguments, separators=(",", ":"))


def completion_text(reply: Reply) -> str:
    """What completion tokens are counted over: the content, or the call's name and arguments."""
    if reply.tool_call is not None:
        return f"{reply.tool_call.name} {arguments_text(reply)}"
    return reply.content or ""


def _head(kind: str, completion_id: str, model: str, created: int) -> dict[str, Any]:
    """What a completion body and each of its chunks begin with (``kind``: the ``object``), fingerprint included."""
    return {
        "id": completion_id,
        "object": kind,
        "created": created,
        "model": model,
        "system_fingerprint": "fae-scripted",
    }


def completion(
    reply: Reply, *, completion_id: str, model: str, created: int, token_usage: dict[str, int], n: int = 1
) -> dict[str, Any]:
    """A non-streamed ``chat.completion`` body with ``n`` choices (a scripted model's choices are alike)."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.tool_call is not None:
        message["tool_calls"] = [
            {
                "id": reply.tool_call.id,
                "type": "function",
                "function": {"name": reply.tool_call.name, "arguments": arguments_text(reply)},
            }
        ]
    return {
        **_head("chat.completion", completion_id, model, created),
        "choices": [
            {"index": index, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}
            for index in range(n)
        ],
        "usage": token_usage,
    }


def chunks(
    reply: Reply,
    *,
    completion_id: str,
    model: str,
    created: int,
    token_usage: dict[str, int] | None,
    n: int = 1,
) -> Iterator[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of a streamed answer, in order, choice after choice.

    Content comes word by word; a tool call comes as one delta with its id and
    name, then its arguments in pieces. With ``token_usage`` (include_usage),
    every chunk carries ``usage: null`` and a last chunk with no choices
    carries the usage.
    """

    for choice in range(n):
        yield from _choice_chunks(
            reply, choice, completion_id=completion_id, model=model, created=created, with_usage=token_usage is not None
        )
    if token_usage is not None:
        yield {**_head("chat.completion.chunk", completion_id, model, created), "choices": [], "usage": token_usage}


def _choice_chunks(
    reply: Reply, choice: int, *, completion_id: str, model: str, created: int, with_usage: bool
) -> Iterator[dict[str, Any]]:
    """The chunks of one choice."""

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        body = _head("chat.completion.chunk", completion_id, model, created)
        body["choices"] = [{"index": choice, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
        if with_usage:
            body["usage"] = None
        return body

    if reply.tool_call is not None:
        yield chunk({"role": "assistant", "content": None})
        call = reply.tool_call
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
        )
        text = arguments_text(reply)
        for start in range(0, len(text), _ARGUMENT_PIECE):
            piece = text[start : start + _ARGUMENT_PIECE]
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    else:
        yield chunk({"role": "assistant", "content": ""})
        words = (reply.content or "").split(" ")
        for index, word in enumerate(words):
            piece = word if index == 0 else " " + word
            if piece:
                yield chunk({"content": piece})
    yield chunk({}, reply.finish_reason)


def sse(event: dict[str, Any] | str) -> bytes:
    """One server-sent event line pair for ``event`` (a dict as JSON, a string as is)."""
    data = event if isinstance(event, str) else json.dumps(event, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def sse_named(event: dict[str, Any]) -> bytes:
    """One server-sent event named by its ``type`` (``event:`` then ``data:``), as the Responses and Messages
    APIs send them."""
    return f"event: {event['type']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode()
