"""What an OpenAI-compatible exchange meant: model, messages, tools, tool calls, usage."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from fae.recorder.jsonbody import json_node, members, sse_values, value
from fae.recorder.llm_outline import request_outline, response_outline
from fae.store.bodies import Body, body_slices
from fae.store.events import LlmCalled, ToolCallRequest


def api_of(path: str) -> str:
    raw = path.partition("?")[0].rstrip("/")
    for suffix, api in (
        ("/chat/completions", "chat"),
        ("/responses", "responses"),
        ("/embeddings", "embeddings"),
        ("/completions", "completions"),
        ("/models", "models"),
    ):
        if raw.endswith(suffix):
            return api
    return "other"


def _tool_names(tools: Any) -> tuple[str, ...]:
    names = []
    for tool in tools or []:
        if not isinstance(tool, dict):
            continue
        inner = tool.get("function")
        fn = inner if isinstance(inner, dict) else tool
        if isinstance(fn.get("name"), str):
            names.append(fn["name"])
    return tuple(names)


def _usage(usage: Any) -> tuple[int | None, int | None, int | None]:
    if not isinstance(usage, dict):
        return None, None, None
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    completion = usage.get("completion_tokens", usage.get("output_tokens"))
    total = usage.get("total_tokens")
    if total is None and isinstance(prompt, int) and isinstance(completion, int):
        total = prompt + completion
    return (
        prompt if isinstance(prompt, int) else None,
        completion if isinstance(completion, int) else None,
        total if isinstance(total, int) else None,
    )


def _chat_from_chunks(chunks: Iterable[Any], keep_text: bool = True) -> dict[str, Any] | None:
    """Assemble a streamed chat completion into the shape of a non-streamed one (None if there were no chunks);
    ``keep_text`` False: the reply's text and tool-call arguments are left out (they stay in the body)."""
    content: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish = None
    usage = None
    model = None
    seen = False
    for chunk in chunks:
        seen = True
        if not isinstance(chunk, dict):
            continue
        model = chunk.get("model") or model
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str) and keep_text:
                content.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(int(call.get("index", 0)), {"id": "", "name": "", "arguments": ""})
                slot["id"] = call.get("id") or slot["id"]
                fn = call.get("function") or {}
                slot["name"] = fn.get("name") or slot["name"]
                slot["arguments"] += (fn.get("arguments") or "") if keep_text else ""
            finish = choice.get("finish_reason") or finish
    if not seen:
        return None
    message = {
        "content": "".join(content) if content else None,
        "tool_calls": [
            {"id": c["id"], "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())
        ],
    }
    return {"model": model, "usage": usage, "choices": [{"message": message, "finish_reason": finish}]}


def _responses_output(body: dict[str, Any]) -> tuple[str | None, list[ToolCallRequest]]:
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
        for part in item.get("content") or []:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return ("".join(texts) if texts else None), calls


def _decoded(body: Body | None) -> Any:
    """A body's JSON value with its top-level members decoded one by one (a large body is never built whole)."""
    node = json_node(body)
    found = members(node)
    return {key: value(member) for key, member in found.items()} if found is not None else value(node)


def _starts_with_data(body: Body | None) -> bool:
    """Whether the body, past leading whitespace, starts ``data:`` (an SSE body), read a slice at a time."""
    head = b""
    for piece in body_slices(body) if body else ():
        head = (head + bytes(piece)).lstrip()
        if len(head) >= 5:
            break
    return head.startswith(b"data:")


def llm_event(
    exchange_id: str,
    path: str,
    request_body: Body | None,
    status: int | None,
    response_body: Body | None,
    streamed: bool,
    error: str | None,
    *,
    request_blob: str | None = None,
    response_blob: str | None = None,
) -> LlmCalled:
    """The call an exchange carried. A body's hash given (a large body, in a side file): the event leaves that
    body's content out (the conversation; the reply's text and tool-call arguments) and names the body."""
    return _llm_call(
        exchange_id, api_of(path), request_body, status, response_body, streamed, error, request_blob, response_blob
    )


def llm_in_full(event: LlmCalled, body_of: Callable[[str], bytes | None]) -> LlmCalled:
    """The event with what it left out of a large body read back from that body (``body_of``: hash → bytes)."""
    if event.request_blob is None and event.response_blob is None:
        return event
    request = body_of(event.request_blob) if event.request_blob else None
    response = body_of(event.response_blob) if event.response_blob else None
    streamed = bool(response) and event.stream and not bytes(response[:256]).lstrip().startswith(b"{")  # type: ignore[index]
    full = _llm_call(event.exchange_id, event.api, request, event.status, response, streamed, event.error)
    changes: dict[str, Any] = {}
    if request is not None:
        changes["messages"] = full.messages
    if response is not None:
        changes.update(content=full.content, tool_calls=full.tool_calls)
    return msgspec.structs.replace(event, **changes)


def _llm_call(
    exchange_id: str,
    api: str,
    request_body: Body | None,
    status: int | None,
    response_body: Body | None,
    streamed: bool,
    error: str | None,
    request_blob: str | None = None,
    response_blob: str | None = None,
) -> LlmCalled:
    roles: tuple[str, ...] | None = None
    if request_blob is not None:
        request, roles = request_outline(request_body, api)
    else:
        request = _decoded(request_body)
    request = request if isinstance(request, dict) else {}
    stream = bool(request.get("stream")) or streamed
    response: Any = None
    if streamed or _starts_with_data(response_body):
        chunks = sse_values(response_body)  # an event at a time: a long stream is never decoded whole
        if api == "responses":
            for chunk in chunks:
                if isinstance(chunk, dict) and chunk.get("type") == "response.completed":
                    response = chunk.get("response")
        else:
            response = _chat_from_chunks(chunks, keep_text=response_blob is None)
    elif response_blob is not None:
        response = response_outline(response_body, api)
    else:
        response = _decoded(response_body)
    messages = request.get("messages") if api == "chat" else request.get("input")
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    content = None
    tool_calls: list[ToolCallRequest] = []
    finish = None
    usage: Any = None
    model = request.get("model")
    if error is None and status is not None and status >= 400:
        detail = response.get("error") if isinstance(response, dict) else None
        if isinstance(detail, dict):
            detail = detail.get("message")
        error = f"HTTP {status}" + (f": {detail}" if detail else "")
    if isinstance(response, dict):
        model = response.get("model") or model
        usage = response.get("usage")
        if api == "responses":
            content, tool_calls = _responses_output(response)
            finish = response.get("status")
        else:
            choices = response.get("choices") or []
            first = choices[0] if choices and isinstance(choices[0], dict) else {}
            message = first.get("message") or {}
            content = message.get("content") if isinstance(message.get("content"), str) else None
            finish = first.get("finish_reason")
            for call in message.get("tool_calls") or []:
                fn = call.get("function") or {}
                tool_calls.append(
                    ToolCallRequest(
                        call_id=str(call.get("id") or ""),
                        name=str(fn.get("name", "")),
                        arguments=str(fn.get("arguments") or ""),
                    )
                )
    elif error is None and status is not None and status < 400 and api in ("chat", "responses"):
        error = "response body is not valid JSON"
    prompt, completion, total = _usage(usage)
    if response_blob is not None:  # the reply's text and arguments stay in the body
        content = None
        tool_calls = [msgspec.structs.replace(call, arguments="") for call in tool_calls]
    return LlmCalled(
        exchange_id=exchange_id,
        api=api,
        model=model if isinstance(model, str) else None,
        stream=stream,
        messages=tuple(messages) if isinstance(messages, list) else (),
        tools=_tool_names(request.get("tools")),
        tool_calls=tuple(tool_calls),
        content=content,
        finish_reason=finish if isinstance(finish, str) else None,
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total,
        status=status,
        error=error,
        request_blob=request_blob,
        response_blob=response_blob,
        message_count=len(roles) if roles is not None else None,
        roles=roles or (),
    )
