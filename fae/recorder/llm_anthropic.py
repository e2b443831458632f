"""What an Anthropic Messages exchange meant: its conversation, ``tool_use`` blocks, stop reason and usage.

A streamed answer (``message_start``, ``content_block_start/delta/stop``,
``message_delta``, ``message_stop``, with ``ping`` and ``error`` between) is
assembled into the shape of a non-streamed ``message``, as the official SDK's
stream accumulator does: ``message_delta`` carries the stop reason and the
cumulative usage, which replaces what ``message_start`` said where given.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from fae.store.events import ToolCallRequest

Usage = tuple[int | None, int | None, int | None, int | None, int | None]
"""(prompt, completion, total, cache read, cache write) tokens; None where the answer did not say."""


def conversation(request: dict[str, Any]) -> list[Any] | None:
    """The request's messages, its top-level ``system`` prompt first as a ``system`` message."""
    messages = request.get("messages")
    if not isinstance(messages, list):
        return None
    system = request.get("system")
    return [{"role": "system", "content": system}, *messages] if system not in (None, "", []) else messages


def tool_arguments(value: Any) -> str:
    """A ``tool_use`` block's ``input`` as the JSON text a tool call's arguments are kept as."""
    return json.dumps(value if value is not None else {}, ensure_ascii=False, separators=(",", ":"))


def _joined_input(text: str) -> str:
    """Streamed ``partial_json`` pieces joined, written as a non-streamed ``input`` would be (kept as sent
    when they do not make JSON)."""
    if not text.strip():
        return tool_arguments({})
    try:
        return tool_arguments(json.loads(text))
    except ValueError:
        return text


def message_from_events(events: Iterable[Any], keep_text: bool = True) -> dict[str, Any] | None:
    """A streamed message as a non-streamed one (None when no event came); an ``error`` event is kept under
    ``error``. ``keep_text`` False: text and tool inputs are left out (they stay in the body)."""
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    pieces: dict[int, list[str]] = {}
    error: Any = None
    for event in events:
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = dict(event["message"])
            message["usage"] = dict(message.get("usage") or {})
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            block = dict(event["content_block"])
            if block.get("type") == "text" and not keep_text:
                block["text"] = ""
            blocks[_index(event)] = block
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            _apply_delta(blocks, pieces, _index(event), event["delta"], keep_text)
        elif kind == "message_delta":
            message = message if message is not None else {"usage": {}}
            delta: dict[str, Any] = event["delta"] if isinstance(event.get("delta"), dict) else {}
            for key in ("stop_reason", "stop_sequence"):
                if key in delta:
                    message[key] = delta[key]
            usage: dict[str, Any] = event["usage"] if isinstance(event.get("usage"), dict) else {}
            message["usage"].update({k: v for k, v in usage.items() if v is not None})
        elif kind == "error":
            error = event.get("error") or event
    if message is None and not blocks and error is None:
        return None
    out = dict(message or {})
    for index, texts in pieces.items():
        if index in blocks and blocks[index].get("type") in ("tool_use", "server_tool_use"):
            blocks[index]["input"] = _joined_input("".join(texts)) if keep_text else ""
    out["content"] = [blocks[index] for index in sorted(blocks)]
    if error is not None:
        out["error"] = error
    return out


def _index(event: dict[str, Any]) -> int:
    index = event.get("index")
    return index if isinstance(index, int) else 0


def _apply_delta(
    blocks: dict[int, dict[str, Any]], pieces: dict[int, list[str]], index: int, delta: dict[str, Any], keep: bool
) -> None:
    block = blocks.setdefault(index, {"type": "text", "text": ""})
    if delta.get("type") == "text_delta" and keep and isinstance(delta.get("text"), str):
        block["text"] = str(block.get("text") or "") + delta["text"]
    elif delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
        pieces.setdefault(index, []).append(delta["partial_json"] if keep else "")


def reply(message: dict[str, Any]) -> tuple[str | None, list[ToolCallRequest], Any]:
    """(the text blocks joined, the ``tool_use`` blocks as calls, the stop reason)."""
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    for block in message.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "tool_use":
            given = block.get("input")
            calls.append(
                ToolCallRequest(
                    call_id=str(block.get("id") or ""),
                    name=str(block.get("name", "")),
                    arguments=given if isinstance(given, str) else tool_arguments(given),
                )
            )
    return ("".join(texts) if texts else None), calls, message.get("stop_reason")


def usage(found: Any) -> Usage:
    """Messages usage as fae counts it: prompt tokens are every input token, cached or not (``input_tokens``
    counts only those after the last cache breakpoint), so they mean what OpenAI's ``prompt_tokens`` mean."""
    if not isinstance(found, dict):
        return None, None, None, None, None
    fresh, written, read, output = (
        _count(found.get(key))
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
    )
    prompt = None if fresh is None else fresh + (written or 0) + (read or 0)
    total = prompt + output if prompt is not None and output is not None else None
    return prompt, output, total, read, written


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
