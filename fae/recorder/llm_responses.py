"""What an OpenAI Responses exchange meant: its input items, function calls, output text, status and usage.

A streamed response ends with ``response.completed`` (or ``response.incomplete``
/ ``response.failed``), whose ``response`` is the whole object; where that event
is missing (a cut stream) or carries no ``output``, the output is assembled from
``response.output_item.added/done`` and the text and argument deltas, as the
official SDK's stream accumulator does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fae.store.events import ToolCallRequest

_LAST = ("response.completed", "response.incomplete", "response.failed")
_FIRST = ("response.created", "response.in_progress", "response.queued")


def conversation(request: dict[str, Any]) -> list[Any] | None:
    """The request's input items (a string input is the user's message), ``instructions`` first as a
    ``system`` message."""
    given = request.get("input")
    items = [{"role": "user", "content": given}] if isinstance(given, str) else given
    if not isinstance(items, list):
        return None
    instructions = request.get("instructions")
    return [{"role": "system", "content": instructions}, *items] if instructions else items


def response_from_events(events: Iterable[Any], keep_text: bool = True) -> dict[str, Any] | None:
    """A streamed response as a non-streamed one (None when no event came); an ``error`` event is kept under
    ``error``. ``keep_text`` False: output text and call arguments are left out (they stay in the body)."""
    response: dict[str, Any] | None = None
    items: dict[int, dict[str, Any]] = {}
    error: Any = None
    for event in events:
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind in _FIRST + _LAST and isinstance(event.get("response"), dict):
            response = dict(event["response"])
        elif kind in ("response.output_item.added", "response.output_item.done") and isinstance(
            event.get("item"), dict
        ):
            items[_index(event, "output_index")] = _item(event["item"], keep_text)
        elif kind == "response.output_text.delta" and keep_text and isinstance(event.get("delta"), str):
            _text_part(items, event)["text"] += event["delta"]
        elif kind == "response.function_call_arguments.delta" and keep_text and isinstance(event.get("delta"), str):
            item = items.setdefault(_index(event, "output_index"), {"type": "function_call", "arguments": ""})
            item["arguments"] = str(item.get("arguments") or "") + event["delta"]
        elif kind == "error":
            error = {key: event.get(key) for key in ("code", "message") if event.get(key) is not None}
    if response is None and not items and error is None:
        return None
    out = dict(response or {})
    if not out.get("output") and items:
        out["output"] = [items[index] for index in sorted(items)]
    elif not keep_text:
        out["output"] = [_item(item, False) for item in out.get("output") or [] if isinstance(item, dict)]
    if error is not None and not out.get("error"):
        out["error"] = error
    return out


def _index(event: dict[str, Any], key: str) -> int:
    index = event.get(key)
    return index if isinstance(index, int) else 0


def _item(item: dict[str, Any], keep_text: bool) -> dict[str, Any]:
    out = dict(item)
    if not keep_text:
        if "arguments" in out:
            out["arguments"] = ""
        if isinstance(out.get("content"), list):
            out["content"] = [
                {k: v for k, v in p.items() if k != "text"} for p in out["content"] if isinstance(p, dict)
            ]
    return out


def _text_part(items: dict[int, dict[str, Any]], event: dict[str, Any]) -> dict[str, Any]:
    item = items.setdefault(_index(event, "output_index"), {"type": "message", "role": "assistant", "content": []})
    parts = item.setdefault("content", [])
    index = _index(event, "content_index")
    while len(parts) <= index:
        parts.append({"type": "output_text", "text": ""})
    if not isinstance(parts[index].get("text"), str):
        parts[index] = {**parts[index], "text": ""}
    return parts[index]


def reply(body: dict[str, Any]) -> tuple[str | None, list[ToolCallRequest], Any]:
    """(the output text joined, the function calls, the response's status)."""
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    for item in body.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            calls.append(
                ToolCallRequest(
                    call_id=str(item.get("call_id") or item.get("id") or ""),
                    name=str(item.get("name", "")),
                    arguments=str(item.get("arguments", "")),
                )
            )
        elif item.get("type", "message") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type", "output_text") == "output_text":
                    if isinstance(part.get("text"), str):
                        texts.append(part["text"])
    return ("".join(texts) if texts else None), calls, body.get("status")
