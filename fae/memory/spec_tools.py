"""The reflector as a tool-calling step: it may ask the FHIR R4 specs tools before it answers.

As in the reference study, the spec-grounded reflector is given the specs MCP server's tools
(``listResources``, ``getStructureDefinition``, ``getSearchParams``, ``getDataTypeDefinition``)
and calls whichever it wants; each call goes to the server through the URL the caller gives (in
training, the recording proxy's for the run reflected on, so the calls are in the log). The loop
sends the tools with every chat request, plays each tool call the model makes, feeds the result
back, and stops at the first reply without tool calls, or after ``MAX_TOOL_ROUNDS`` rounds (then
the last request offers no tools, so the model must answer).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from fae.memory.errors import MemoryStoreError

MAX_TOOL_ROUNDS = 6
RESULT_CHARS = 4000  # a structure definition is long: the model sees its first characters

CallSpec = Callable[[str, dict[str, Any]], Awaitable[tuple[Any, bool]]]
"""Calls one specs tool by name with arguments; returns (result, is_error)."""


@dataclass(frozen=True)
class SpecTools:
    """The specs server's tools as OpenAI chat tool definitions, and how to call one."""

    tools: Sequence[dict[str, Any]]
    call: CallSpec


@dataclass(frozen=True)
class ToolReply:
    content: str
    calls: tuple[tuple[str, dict[str, Any]], ...]  # each specs tool call the model made, in order


async def _complete(
    client: httpx.AsyncClient,
    llm_base: str,
    model: str,
    messages: list[dict],
    tools: Sequence[dict],
    api_key: str | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "temperature": 0, "messages": messages}
    if tools:
        body["tools"] = list(tools)
    reply = await client.post(
        f"{llm_base.rstrip('/')}/chat/completions",
        headers={"authorization": f"Bearer {api_key or 'not-needed'}"},
        json=body,
    )
    if reply.status_code != 200:
        raise MemoryStoreError(f"the model {model} answered HTTP {reply.status_code}: {reply.text[:200]}")
    try:
        message = reply.json()["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise MemoryStoreError(f"the model {model} sent a body that is not a chat completion") from None
    if not isinstance(message, dict):
        raise MemoryStoreError(f"the model {model} sent a body that is not a chat completion")
    return message


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


async def chat_with_specs(
    client: httpx.AsyncClient,
    llm_base: str,
    model: str,
    system: str,
    user: str,
    specs: SpecTools,
    *,
    api_key: str | None = None,
) -> ToolReply:
    """The model's final content after it called the specs tools it chose."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    names = {t.get("function", {}).get("name") for t in specs.tools}
    calls: list[tuple[str, dict[str, Any]]] = []
    for round_ in range(MAX_TOOL_ROUNDS + 1):
        offered = specs.tools if round_ < MAX_TOOL_ROUNDS else ()
        message = await _complete(client, llm_base, model, messages, offered, api_key)
        requested = message.get("tool_calls") or []
        if not requested or not offered:
            return ToolReply(str(message.get("content") or ""), tuple(calls))
        messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": requested})
        for request in requested:
            function = request.get("function") or {}
            name, args = str(function.get("name") or ""), _arguments(function.get("arguments"))
            if name in names:
                calls.append((name, args))
                result, is_error = await specs.call(name, args)
                text = result if isinstance(result, str) else json.dumps(result, sort_keys=True, default=str)
                text = ("ERROR: " if is_error else "") + text[:RESULT_CHARS]
            else:
                text = f"ERROR: no tool {name!r}; the tools are {', '.join(sorted(str(n) for n in names))}"
            messages.append({"role": "tool", "tool_call_id": request.get("id") or name, "content": text})
    raise AssertionError("unreachable: the last round offers no tools")
