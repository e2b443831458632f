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


def mcp_events(exchange_id: str, request_body: bytes | None, response_body: bytes | None,
               content_type: str, upstream: str, error: str | None) -> list[ToolCalled]:
    request = parse_json(request_body)
    calls = request if isinstance(request, list) else [request]
    calls = [c for c in calls if isinstance(c, dict) and c.get("method") == "tools/call"]
    if not calls:
        return []
    replies = {m.get("id"): m for m in _messages(response_body, content_type)
               if isinstance(m, dict) and "id" in m and ("result" in m or "error" in m)}
    events = []
    for call in calls:
        params = call.get("params") if isinstance(call.get("params"), dict) else {}
        reply = replies.get(call.get("id"))
        result: Any = None
        is_error = False
        message = error
        if reply is None:
            message = message or "no JSON-RPC reply recorded for this call"
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
        events.append(ToolCalled(
            exchange_id=exchange_id, tool=str(params.get("name", "")), arguments=params.get("arguments"),
            result=result, is_error=is_error, error=message, server=upstream,
        ))
    return events
