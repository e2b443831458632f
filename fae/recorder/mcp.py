"""What an MCP-over-HTTP exchange meant: the JSON-RPC ``tools/call`` and its result."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec

from fae.recorder.jsonbody import items, json_node, members, parse_json, sse_values, value
from fae.store.bodies import BODY_FILE_BYTES, Body, body_slices
from fae.store.events import ToolCalled
from fae.util.json_text import json_or_text

_SMALL = 1024
"""An argument of a large request is kept in the event if its JSON is shorter than this."""


def _nodes(body: Body | None) -> list[Any]:
    """The JSON-RPC messages of a body (one or a batch) as nodes, a large body's undecoded."""
    node = json_node(body)
    listed = items(node)
    return listed if listed is not None else [node] if node is not None else []


def _outline(node: Any, keep: dict[str, tuple[str, ...]]) -> dict[str, Any] | None:
    """An object's members named in ``keep`` decoded (a name mapped to names: that member outlined in turn)."""
    found = members(node)
    if found is None:
        return None
    return {
        key: (_outline(found[key], {name: () for name in keep[key]}) if keep[key] else value(found[key]))
        for key in keep
        if key in found
    }


def _small_members(node: Any) -> Any:
    """A large request's arguments: the members whose JSON is short, decoded; the rest left out."""
    found = members(node)
    if found is None:
        return None
    return {key: value(member) for key, member in found.items() if len(memoryview(member)) < _SMALL}


def large_calls(body: Body) -> list[dict[str, Any]]:
    """A large request's ``tools/call`` messages, their arguments outlined."""
    calls = []
    for node in _nodes(body):
        found = members(node) or {}
        message: dict[str, Any] = {key: value(found[key]) for key in ("jsonrpc", "id", "method") if key in found}
        if message.get("method") != "tools/call":
            continue
        params = members(found.get("params")) or {}
        message["params"] = {"name": value(params.get("name")), "arguments": _small_members(params.get("arguments"))}
        calls.append(message)
    return calls


def outline_reply(node: Any) -> Any:
    """A large JSON-RPC message with only what pairing a reply needs decoded: its id, error and ``isError``."""
    return _outline(node, {"id": (), "error": (), "result": ("isError",)})


def _messages(body: Body | None, content_type: str, large: bool = False) -> list[Any]:
    if large and not ("text/event-stream" in content_type or _sse_start(body)):  # an SSE body is read whole
        return [outline_reply(node) for node in _nodes(body)]
    if "text/event-stream" in content_type or _sse_start(body):
        found: list[Any] = []
        for item in sse_values(body):
            found.extend(item if isinstance(item, list) else [item])
        return found
    value = parse_json(body)
    if isinstance(value, list):
        return value
    return [value] if value is not None else []


def _sse_start(body: Body | None) -> bool:
    head = bytes(next(body_slices(body), b"")[:64]) if body else b""
    return head.lstrip().startswith((b"event:", b"data:", b"id:"))


def tool_result_value(result: dict[str, Any]) -> Any:
    """The useful value of a CallToolResult: structured content, else parsed JSON text, else text."""
    structured = result.get("structuredContent")
    if structured is not None:
        if isinstance(structured, dict) and set(structured) == {"result"}:
            return structured["result"]
        return structured
    texts = [c.get("text") for c in result.get("content") or [] if isinstance(c, dict) and c.get("type") == "text"]
    if len(texts) == 1 and isinstance(texts[0], str):
        return json_or_text(texts[0])
    return texts or None


def tool_calls(request_body: Body | None) -> list[dict[str, Any]]:
    """The JSON-RPC ``tools/call`` requests in a request body (one message or a batch)."""
    request = parse_json(request_body)
    calls = request if isinstance(request, list) else [request]
    return [c for c in calls if isinstance(c, dict) and c.get("method") == "tools/call"]


def is_reply(message: Any) -> bool:
    """Whether a JSON-RPC message answers a request (has an id and a result or an error)."""
    return isinstance(message, dict) and "id" in message and ("result" in message or "error" in message)


def tool_event(
    exchange_id: str,
    call: dict[str, Any],
    reply: dict[str, Any] | None,
    upstream: str,
    error: str | None,
    missing: str = "no JSON-RPC reply recorded for this call",
) -> ToolCalled:
    """The ToolCalled of one ``tools/call`` and its JSON-RPC reply (``None``: none was seen, ``missing`` says why)."""
    given = call.get("params")
    params = given if isinstance(given, dict) else {}
    result: Any = None
    is_error = False
    message = error
    if reply is None:
        message = message or missing
        is_error = True
    elif "error" in reply:
        detail = reply["error"] if isinstance(reply["error"], dict) else {}
        message = str(detail.get("message") or reply["error"])
        is_error = True
    else:
        raw = reply["result"] if isinstance(reply["result"], dict) else {}
        result = tool_result_value(raw)
        is_error = bool(raw.get("isError"))
        if is_error and message is None:
            message = result if isinstance(result, str) else json.dumps(result)[:500]
    return ToolCalled(
        exchange_id=exchange_id,
        tool=str(params.get("name", "")),
        arguments=params.get("arguments"),
        result=result,
        is_error=is_error,
        error=message,
        server=upstream,
    )


def mcp_events(
    exchange_id: str,
    request_body: Body | None,
    response_body: Body | None,
    content_type: str,
    upstream: str,
    error: str | None,
    bodies: tuple[str | None, str | None] | None = None,
) -> list[ToolCalled]:
    """The tool calls of an exchange that carries its own replies (streamable HTTP: JSON or an SSE body).
    ``bodies``: the hashes of its request and response where one is large: the events name them and leave the
    large one's content out (a request's long arguments, a reply's result)."""
    large_request = bodies is not None and len(request_body or b"") >= BODY_FILE_BYTES
    large_response = bodies is not None and len(response_body or b"") >= BODY_FILE_BYTES
    calls = large_calls(request_body) if large_request and request_body else tool_calls(request_body)
    if not calls:
        return []
    replies = {m.get("id"): m for m in _messages(response_body, content_type, large_response) if is_reply(m)}
    found = [tool_event(exchange_id, call, replies.get(call.get("id")), upstream, error) for call in calls]
    if bodies is None:
        return found
    left_out = "the tool reported an error: its result is in the recorded response body"
    return [
        msgspec.structs.replace(
            event,
            request_blob=bodies[0],
            response_blob=bodies[1],
            call_index=index,
            result=None if large_response else event.result,
            error=left_out if large_response and event.is_error and event.error == "null" else event.error,
        )
        for index, event in enumerate(found)
    ]


def tool_in_full(event: ToolCalled, body_of: Callable[[str], bytes | None]) -> ToolCalled:
    """The event with what it left out of a large body (arguments, result) read back from its bodies."""
    if event.request_blob is None and event.response_blob is None:
        return event
    request = body_of(event.request_blob) if event.request_blob else None
    response = body_of(event.response_blob) if event.response_blob else None
    if request is None:
        return event
    found = mcp_events(event.exchange_id or "", request, response, "", event.server or "", None)
    if event.call_index >= len(found):
        return event
    full = found[event.call_index]
    error = full.error if response is not None else event.error
    return msgspec.structs.replace(
        event,
        arguments=full.arguments,
        result=full.result if response is not None else event.result,
        is_error=full.is_error,
        error=error,
    )
