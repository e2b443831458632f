"""Reading an OpenAI chat conversation: its text, the tool calls answered so far, token counts.

The local LLM server keeps no state per conversation, so everything it needs to
pick its next move is worked out here from the messages of one request.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

_TOKEN = re.compile(r"\w+|[^\w\s]")


class AnsweredCall(msgspec.Struct, frozen=True):
    """One assistant tool call and the content of the ``role: tool`` message that answered it."""

    name: str
    arguments: str
    result: Any


def content_text(content: Any) -> str:
    """The plain text of a message content: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, str):
                texts.append(part)
        return "\n".join(texts)
    return json.dumps(content)


def first_user_text(messages: list[dict[str, Any]]) -> str:
    """The text of the first ``role: user`` message (the task prompt), or '' when there is none."""
    for message in messages:
        if message.get("role") == "user":
            return content_text(message.get("content"))
    return ""


def conversation_text(messages: list[dict[str, Any]]) -> str:
    """Every message's text and tool-call arguments, in order, one block each."""
    blocks = []
    for message in messages:
        text = content_text(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            text += f"\n[call {function.get('name', '')}] {function.get('arguments', '')}"
        blocks.append(f"{message.get('role', '')}: {text}")
    return "\n".join(blocks)


def parse_tool_content(content: Any) -> Any:
    """A tool result as data: JSON where it can be found, else the text itself.

    Agents wrap tool results differently (plain JSON text, a list of text parts,
    JSON text of MCP content blocks, JSON after a prefix), so this tries each.
    """
    text = content_text(content)
    value = _loads(text)
    if value is _NOT_JSON:
        return text
    if (
        isinstance(value, list)
        and value
        and all(isinstance(block, dict) and block.get("type") == "text" and "text" in block for block in value)
    ):
        joined = "\n".join(block["text"] for block in value)
        inner = _loads(joined)
        return joined if inner is _NOT_JSON else inner
    return value


_NOT_JSON = object()


def _loads(text: str) -> Any:
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    starts = [i for i in (stripped.find("{"), stripped.find("[")) if i >= 0]
    if not starts:
        return _NOT_JSON
    try:
        value, _ = json.JSONDecoder().raw_decode(stripped[min(starts) :])
    except ValueError:
        return _NOT_JSON
    return value


def answered_calls(messages: list[dict[str, Any]]) -> list[AnsweredCall]:
    """The assistant tool calls that a later ``role: tool`` message answered, in call order."""
    results: dict[str, Any] = {}
    for message in messages:
        if message.get("role") == "tool" and message.get("tool_call_id") is not None:
            results[str(message["tool_call_id"])] = message.get("content")
    calls = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            call_id = str(call.get("id"))
            if call_id in results:
                function = call.get("function") or {}
                calls.append(
                    AnsweredCall(
                        name=str(function.get("name", "")),
                        arguments=str(function.get("arguments", "")),
                        result=parse_tool_content(results[call_id]),
                    )
                )
    return calls


def count_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: words and punctuation marks."""
    return len(_TOKEN.findall(text))


def prompt_tokens(messages: list[dict[str, Any]], tools: list[Any] | None) -> int:
    """Tokens of a request: its conversation plus the tool schemas it offers."""
    count = count_tokens(conversation_text(messages))
    if tools:
        count += count_tokens(json.dumps(tools, sort_keys=True))
    return count
