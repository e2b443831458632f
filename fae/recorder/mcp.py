"""What an MCP-over-HTTP exchange meant: the JSON-RPC ``tools/call`` and its result."""

from __future__ import annotations

import json
from typing import Any

from fae.recorder.jsonbody import parse_json, sse_data
from fae.store.events import ToolCalled


def _messages(body: bytes | None, content_type: str) -> list[Any]:
    if "text/event-stream" in content_type or (body or b"").lstrip().startswith((b"event:", b"data:", b"id:")):
        found: list[Any] = []
        for item in sse_data(body):
            found.extend(item if isinstance(item, list) else [item])
        return found
    value = parse_json(body)
    if isinstance(value, list):
        return value
    return [value] if value is not None else []


def tool_result_value(result: dict[str, Any]) -> Any:
    """The useful value of a CallToolResult: structured content, else parsed JSON text, else text."""
    structured = result.get("structuredContent")
    if structured is not None:
        if isinstance(structured, dict) and set(structured) == {"result"}:
            return structured["result"]
        return structured
    texts = [c.get("text") for c in result.get("content") or [] if isinstance(c, dict) and c.get("type") == "text"]
    if len(texts) == 1 and isinstance(texts[0], str):
        try:
            return json.loads(texts[0])
        except ValueError:
            return texts[0]
    return texts or None


def tool_calls(request_body: bytes | None) -> list[dict[str, Any]]:
    """The JSON-RPC ``tools/call`` requests in a request body (one message or a batch)."""
    request = parse_json(request_body)
    calls = request if isinstance(request, list) else [request]
    return [c for c in calls if isinstance(c, dict) and c.get("method") == "tools/call"]


def is_reply(message: Any) -> bool:
    """Whether a JSON-RPC message answers a request (has an id and a result or an error)."""
    return isinstance(message, dict) and "id" in message and ("result" in message or "error" in message)


def tool_event(exchange_id: str, call: dict[str, Any], reply: dict[str, Any] | None, upstream: str,
               error: str | None, missing: str = "no JSON-RPC reply recorded for this call") -> ToolCalled:
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
        exchange_id=exchange_id, tool=str(params.get("name", "")), arguments=params.get("arguments"),
        result=result, is_error=is_error, error=message, server=upstream,
    )


def mcp_events(exchange_id: str, request_body: bytes | None, response_body: bytes | None,
               content_type: str, upstream: str, error: str | None) -> list[ToolCalled]:
    """The tool calls of an exchange that carries its own replies (streamable HTTP: JSON or an SSE body)."""
    calls = tool_calls(request_body)
    if not calls:
        return []
    replies = {m.get("id"): m for m in _messages(response_body, content_type) if is_reply(m)}
    return [tool_event(exchange_id, call, replies.get(call.get("id")), upstream, error) for call in calls]
