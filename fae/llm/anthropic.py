"""The Anthropic Messages wire format: a request as chat messages, a reply as a message or its SSE events.

The behaviours read OpenAI chat messages, so a Messages request is turned into
them: ``system`` first, each ``tool_use`` block an assistant tool call, each
``tool_result`` block a ``role: tool`` message answering it. ``tools`` and
``tool_choice`` (``auto``, ``any``, ``tool``, ``none``) become the OpenAI
policy (``auto``, ``required``, a named function, ``none``).

Prompt caching is played too, so cache tokens can be tested: the prefix up to
the last block marked ``cache_control`` (tools, then system, then messages) is
written to the cache the first time the server sees it and read from it after
(the last 4096 prefixes are remembered). Usage then says what the API says:
``input_tokens`` counts only the tokens after that prefix.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from fae.llm.behaviours import Reply
from fae.llm.conversation import content_text, count_tokens, prompt_tokens
from fae.llm.tool_choice import RequestRefused
from fae.llm.wire import arguments_text

_ARGUMENT_PIECE = 24
_REMEMBERED_PREFIXES = 4096
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def error_body(status: int, message: str) -> dict[str, Any]:
    """An Anthropic error object, its type fixed by the status."""
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


def _blocks(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's conversation as OpenAI chat messages; RequestRefused where the API would answer 400."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise RequestRefused("messages: a non-empty list of message objects is required", "messages")
    out: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        out.append({"role": "system", "content": content_text(system)})
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise RequestRefused(f"messages.{index}.role: must be 'user' or 'assistant'", f"messages.{index}.role")
        texts, calls = [], []
        for block in _blocks(message.get("content")):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_use" and role == "assistant":
                arguments = json.dumps(block.get("input") or {}, separators=(",", ":"))
                calls.append(
                    {
                        "id": block.get("id"),
                        "type": "function",
                        "function": {"name": block.get("name"), "arguments": arguments},
                    }
                )
            elif kind == "tool_result" and role == "user":
                out.append({"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": block.get("content")})
            elif kind == "text":
                texts.append(str(block.get("text", "")))
        if texts or calls:
            said: dict[str, Any] = {"role": role, "content": "\n".join(texts) if texts else None}
            if calls:
                said["tool_calls"] = calls
            out.append(said)
    return out


def openai_tools(body: dict[str, Any]) -> dict[str, Any]:
    """``tools`` and ``tool_choice`` in OpenAI's shape, for ``tool_policy``; RequestRefused where the API would
    answer 400 (a server tool such as web search is refused: the scripted models cannot play it)."""
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise RequestRefused("tools: must be a list of tools", "tools")
    functions = []
    for index, tool in enumerate(tools or []):
        if (
            not isinstance(tool, dict)
            or not isinstance(tool.get("name"), str)
            or tool.get("type", "custom") != "custom"
        ):
            raise RequestRefused(
                f"tools.{index}: only custom tools with a name and input_schema are served", f"tools.{index}"
            )
        functions.append({"type": "function", "function": {"name": tool["name"]}})
    shaped: dict[str, Any] = {"tools": functions}
    choice = body.get("tool_choice")
    if choice is None:
        return shaped
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind in ("auto", "none"):
        shaped["tool_choice"] = kind
    elif kind == "any":
        shaped["tool_choice"] = "required"
    elif kind == "tool" and isinstance(choice.get("name"), str):
        shaped["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    else:
        raise RequestRefused(
            "tool_choice: must be {'type': 'auto' | 'any' | 'none'} or {'type': 'tool', 'name': ...}", "tool_choice"
        )
    return shaped


def check_max_tokens(body: dict[str, Any]) -> int:
    """``max_tokens``, which the API requires (a whole number of at least 1)."""
    value = body.get("max_tokens")
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RequestRefused("max_tokens: a whole number of at least 1 is required", "max_tokens")
    return value


class PromptCache:
    """The cached prompt prefixes the server has seen (bounded, oldest forgotten first)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, None] = OrderedDict()

    def usage(self, body: dict[str, Any], messages: list[dict[str, Any]], output_tokens: int) -> dict[str, int]:
        """The Messages usage of a request whose conversation is ``messages`` (as chat messages)."""
        total = prompt_tokens(messages, body.get("tools"))
        prefix = _cached_prefix(body)
        cached = min(total, _prefix_tokens(prefix)) if prefix is not None else 0
        written = read = 0
        if prefix is not None:
            key = hashlib.sha256(
                json.dumps([body.get("model"), prefix], sort_keys=True, default=str).encode()
            ).hexdigest()
            with self._lock:
                if key in self._seen:
                    self._seen.move_to_end(key)
                    read = cached
                else:
                    self._seen[key] = None
                    written = cached
                    while len(self._seen) > _REMEMBERED_PREFIXES:
                        self._seen.popitem(last=False)
        return {
            "input_tokens": total - cached,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "output_tokens": output_tokens,
        }


def _marked(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("cache_control"), dict)


def _cached_prefix(body: dict[str, Any]) -> dict[str, Any] | None:
    """The part of the request up to its last ``cache_control`` mark, in the API's order, or None if unmarked."""
    tools: list[Any] = body["tools"] if isinstance(body.get("tools"), list) else []
    system = _blocks(body.get("system"))
    messages: list[Any] = body["messages"] if isinstance(body.get("messages"), list) else []
    prefix: dict[str, Any] | None = None
    for index, tool in enumerate(tools):
        if _marked(tool):
            prefix = {"tools": tools[: index + 1]}
    for index, block in enumerate(system):
        if _marked(block):
            prefix = {"tools": tools, "system": system[: index + 1]}
    for index, message in enumerate(messages):
        blocks = _blocks(message.get("content")) if isinstance(message, dict) else []
        for at, block in enumerate(blocks):
            if _marked(block):
                cut = {**message, "content": blocks[: at + 1]}
                prefix = {"tools": tools, "system": system, "messages": [*messages[:index], cut]}
    return prefix


def _prefix_tokens(prefix: dict[str, Any]) -> int:
    """Tokens of a cached prefix, counted as a prompt's are (its text, plus the tools' JSON)."""
    count = count_tokens(content_text(prefix.get("system")))
    for message in prefix.get("messages") or []:
        for block in _blocks(message.get("content")):
            if isinstance(block, dict):
                count += count_tokens(content_text(block.get("text") or block.get("content") or ""))
    if prefix.get("tools"):
        count += count_tokens(json.dumps(prefix["tools"], sort_keys=True))
    return count


def _tool_use_id(reply: Reply) -> str:
    assert reply.tool_call is not None
    return "toolu_" + reply.tool_call.id.removeprefix("call_")


def stop_reason(reply: Reply) -> str:
    return "tool_use" if reply.tool_call is not None else "end_turn"


def content_blocks(reply: Reply) -> list[dict[str, Any]]:
    """The reply as Messages content: one ``tool_use`` block, or one ``text`` block."""
    if reply.tool_call is not None:
        return [
            {
                "type": "tool_use",
                "id": _tool_use_id(reply),
                "name": reply.tool_call.name,
                "input": reply.tool_call.arguments,
            }
        ]
    return [{"type": "text", "text": reply.content or ""}]


def message_body(reply: Reply, *, message_id: str, model: str, usage: dict[str, int]) -> dict[str, Any]:
    """A non-streamed ``message``."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content_blocks(reply),
        "stop_reason": stop_reason(reply),
        "stop_sequence": None,
        "usage": usage,
    }


def message_events(reply: Reply, *, message_id: str, model: str, usage: dict[str, int]) -> Iterator[dict[str, Any]]:
    """The events of a streamed message, in order: start (usage so far), one block with its deltas and a
    ``ping``, the stop reason with the final usage, stop."""
    started = {**usage, "output_tokens": 1}
    yield {
        "type": "message_start",
        "message": {
            **message_body(reply, message_id=message_id, model=model, usage=started),
            "content": [],
            "stop_reason": None,
        },
    }
    if reply.tool_call is not None:
        start = {"type": "tool_use", "id": _tool_use_id(reply), "name": reply.tool_call.name, "input": {}}
        text = arguments_text(reply)
        deltas = [
            {"type": "input_json_delta", "partial_json": text[i : i + _ARGUMENT_PIECE]}
            for i in range(0, len(text), _ARGUMENT_PIECE)
        ]
    else:
        start = {"type": "text", "text": ""}
        words = (reply.content or "").split(" ")
        pieces = [word if i == 0 else " " + word for i, word in enumerate(words)]
        deltas = [{"type": "text_delta", "text": piece} for piece in pieces if piece]
    yield {"type": "content_block_start", "index": 0, "content_block": start}
    yield {"type": "ping"}
    for delta in deltas:
        yield {"type": "content_block_delta", "index": 0, "delta": delta}
    yield {"type": "content_block_stop", "index": 0}
    yield {"type": "message_delta", "delta": {"stop_reason": stop_reason(reply), "stop_sequence": None}, "usage": usage}
    yield {"type": "message_stop"}


def models_page(names: Iterable[str], created: int) -> dict[str, Any]:
    """``GET /v1/models`` as the Messages API answers it."""
    when = datetime.fromtimestamp(created, UTC).isoformat().replace("+00:00", "Z")
    data = [{"type": "model", "id": name, "display_name": name, "created_at": when} for name in names]
    return {
        "data": data,
        "has_more": False,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }
