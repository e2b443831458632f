"""The outline of a large LLM body: what an ``LlmCalled`` keeps when the body's content stays in its side file.

A chat history or a completion of tens of MiB decoded into Python objects,
then journaled and ingested by DuckDB inside an event's payload, cost the
proxy 6-7x its size. For a body of ``BODY_FILE_BYTES`` or more the event keeps
only what is small (model, usage, message count and roles, tool-call names,
finish reason) and names the body by its hash; these read just those fields
from the undecoded JSON (``fae.recorder.jsonbody``), never the content.
"""

from __future__ import annotations

from typing import Any

import msgspec

from fae.recorder.jsonbody import field, items, json_node, members, value
from fae.store.bodies import Body

_CONVERSATION = ("messages", "input", "system", "instructions")
_REPLY = ("choices", "output", "content")


def _top(body: Body | None, leave_out: tuple[str, ...]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(the body's top-level members as nodes, or None if it is no JSON object; those decoded, but ``leave_out``)."""
    found = members(json_node(body))
    if found is None:
        return None, {}
    return found, {key: value(node) for key, node in found.items() if key not in leave_out}


def request_outline(body: Body | None, api: str) -> tuple[dict[str, Any] | None, tuple[str, ...] | None]:
    """(the request's members but the conversation, or None if it is no JSON object;
    the role of each message or input item, None where there is no conversation). A top-level system
    prompt (Anthropic's ``system``, Responses' ``instructions``) is a ``system`` message first."""
    found, request = _top(body, _CONVERSATION)
    if found is None:
        return None, None
    named = "input" if api == "responses" else "messages"
    key = named if named in found else None
    listed = items(found[key]) if key else None
    system = "system" if api == "messages" else "instructions" if api == "responses" else None
    first = ("system",) if system and _given(found.get(system)) else ()
    if listed is None:  # no conversation, or a Responses input given as one string: the user's
        return request, (*first, "user") if key and _is_string(found[key]) else None
    roles: list[str] = list(first)
    for item in listed:
        role = field(item, "role")
        kind = field(item, "type") if role is None else None
        roles.append(role if isinstance(role, str) else kind if isinstance(kind, str) else "")
    return request, tuple(roles)


def _given(node: Any) -> bool:
    """Whether a system prompt is there: not absent, null, empty text or an empty list."""
    if node is None:
        return False
    if isinstance(node, msgspec.Raw):
        return bytes(memoryview(node)).strip() not in (b"null", b'""', b"[]")
    return node not in ("", [])


def _is_string(node: Any) -> bool:
    if isinstance(node, msgspec.Raw):
        return bytes(memoryview(node)[:1]) == b'"'
    return isinstance(node, str)


def response_outline(body: Body | None, api: str) -> Any:
    """The response in its own shape, with the reply's text and tool-call arguments left out."""
    found, response = _top(body, _REPLY)
    if found is None:
        return value(json_node(body))
    if api == "messages":
        blocks = [members(block) or {} for block in items(found.get("content")) or []]
        named = [{key: value(block[key]) for key in ("type", "id", "name") if key in block} for block in blocks]
        if "content" in found:
            response["content"] = [
                {**block, "input": ""} if block.get("type") == "tool_use" else block for block in named
            ]
        return response
    if api == "responses":
        outline = []
        for item in items(found.get("output")) or []:
            parts = members(item) or {}
            kept = {key: value(parts[key]) for key in ("type", "call_id", "id", "name") if key in parts}
            outline.append(kept)
        if "output" in found:
            response["output"] = outline
        return response
    choices = items(found.get("choices"))
    if choices is not None:
        first = members(choices[0]) if choices else None
        if first is None:
            response["choices"] = [value(choices[0])] if choices else []
        else:
            message = members(first.get("message")) or {}
            calls = value(message.get("tool_calls")) if "tool_calls" in message else None
            for call in calls if isinstance(calls, list) else []:
                if isinstance(call, dict) and isinstance(call.get("function"), dict):
                    call["function"]["arguments"] = ""
            response["choices"] = [
                {"finish_reason": value(first.get("finish_reason")), "message": {"content": None, "tool_calls": calls}}
            ]
    return response
