"""What an LLM exchange meant: model, messages, tools, tool calls, stop reason, usage.

Three APIs are read: OpenAI Chat Completions (``chat``), OpenAI Responses
(``responses``, ``fae.recorder.llm_responses``) and Anthropic Messages
(``messages``, ``fae.recorder.llm_anthropic``), each streamed or not. Any other
path on an LLM upstream is still an ``LlmCalled`` of its ``api``; ``other``
means fae does not read that API, so the call's tokens are unknown (see
``fae.store.events.USAGE_KNOWN_APIS``), while its bytes are in its ``HttpExchanged`` as for
any exchange.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from fae.recorder import llm_anthropic, llm_chat, llm_responses
from fae.recorder.jsonbody import json_node, members, sse_values, value
from fae.recorder.llm_outline import request_outline, response_outline
from fae.store.bodies import Body, body_slices
from fae.store.events import LlmCalled, ToolCallRequest

_APIS = (
    ("/chat/completions", "chat"),
    ("/responses", "responses"),
    ("/messages", "messages"),
    ("/messages/count_tokens", "count_tokens"),
    ("/embeddings", "embeddings"),
    ("/completions", "completions"),
    ("/models", "models"),
)


def api_of(path: str) -> str:
    """The API a request path names, by its last segments (``other`` when fae does not read it)."""
    raw = path.partition("?")[0].rstrip("/")
    for suffix, api in sorted(_APIS, key=lambda pair: -len(pair[0])):
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


def _usage(api: str, usage: Any) -> llm_anthropic.Usage:
    """(prompt, completion, total, cache read, cache write) tokens of an answer's ``usage``."""
    if api == "messages":
        return llm_anthropic.usage(usage)
    if not isinstance(usage, dict):
        return None, None, None, None, None
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    completion = usage.get("completion_tokens", usage.get("output_tokens"))
    total = usage.get("total_tokens")
    if total is None and isinstance(prompt, int) and isinstance(completion, int):
        total = prompt + completion
    details = usage.get("prompt_tokens_details", usage.get("input_tokens_details"))
    details = details if isinstance(details, dict) else {}
    cached, written = details.get("cached_tokens"), details.get("cache_write_tokens")
    return (
        prompt if isinstance(prompt, int) else None,
        completion if isinstance(completion, int) else None,
        total if isinstance(total, int) else None,
        cached if isinstance(cached, int) else None,
        written if isinstance(written, int) else None,
    )


_CONVERSATIONS: dict[str, Callable[[dict[str, Any]], list[Any] | None]] = {
    "responses": llm_responses.conversation,
    "messages": llm_anthropic.conversation,
}
_REPLIES: dict[str, Callable[[dict[str, Any]], tuple[str | None, list[ToolCallRequest], Any]]] = {
    "responses": llm_responses.reply,
    "messages": llm_anthropic.reply,
}
_STREAMS: dict[str, Callable[[Any, bool], Any]] = {
    "responses": llm_responses.response_from_events,
    "messages": llm_anthropic.message_from_events,
}
"""Per API, the reply a stream of server-sent events adds up to (``keep_text``: with its text and arguments);
chat completions' chunks otherwise."""


def _error_detail(response: Any) -> str | None:
    """What an answer's ``error`` says (OpenAI's ``{"error": {"message"}}``, Anthropic's ``{"type": "error",
    "error": {"type", "message"}}``, a failed response's ``error``), or None when it has none."""
    detail = response.get("error") if isinstance(response, dict) else None
    if isinstance(detail, dict):
        detail = detail.get("message") or detail.get("type") or detail.get("code")
    return str(detail) if detail else None


def _decoded(body: Body | None) -> Any:
    """A body's JSON value with its top-level members decoded one by one (a large body is never built whole)."""
    node = json_node(body)
    found = members(node)
    return {key: value(member) for key, member in found.items()} if found is not None else value(node)


_SSE_FIELDS = (b"data:", b"event:", b"id:", b"retry:", b":")


def _is_sse(body: Body | None) -> bool:
    """Whether the body, past leading whitespace, starts with a server-sent-event field or comment (``data:``,
    or ``event:`` as Anthropic's events begin), read a slice at a time."""
    head = b""
    for piece in body_slices(body) if body else ():
        head = (head + bytes(piece)).lstrip()
        if len(head) >= 6:
            break
    return head.startswith(_SSE_FIELDS)


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
    streamed = bool(response) and event.stream and _is_sse(response)
    full = _llm_call(event.exchange_id, event.api, request, event.status, response, streamed, event.error)
    changes: dict[str, Any] = {}
    if request is not None:
        changes["messages"] = full.messages
    if response is not None:
        changes.update(content=full.content, tool_calls=full.tool_calls)
    return msgspec.structs.replace(event, **changes)


def _response(api: str, body: Body | None, streamed: bool, response_blob: str | None) -> Any:
    """The reply a response body holds: a stream added up an event at a time (a long stream is never decoded
    whole), an outline of a large body kept in its own file (``response_blob``), else the JSON value."""
    if streamed or _is_sse(body):
        return _STREAMS.get(api, llm_chat.completion_from_chunks)(sse_values(body), response_blob is None)
    if response_blob is not None:
        return response_outline(body, api)
    return _decoded(body)


def _error(api: str, status: int | None, response: Any, error: str | None) -> str | None:
    """What went wrong with the call: the transport's error, an HTTP error status, an error the answer reports (an
    error event in a stream, or a body that says it failed), or a body of a chat API that is not JSON."""
    detail = _error_detail(response)
    if error is None and status is not None and status >= 400:
        return f"HTTP {status}" + (f": {detail}" if detail else "")
    if error is None and detail:
        return f"the answer reports an error: {detail}"
    if error is None and not isinstance(response, dict) and status is not None and status < 400:
        if api in ("chat", "responses", "messages"):
            return "response body is not valid JSON"
    return error


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
    response = _response(api, response_body, streamed, response_blob)
    messages = _CONVERSATIONS.get(api, llm_chat.conversation)(request)
    content = None
    tool_calls: list[ToolCallRequest] = []
    finish = None
    usage: Any = None
    model = request.get("model")
    error = _error(api, status, response, error)
    if isinstance(response, dict):
        model = response.get("model") or model
        usage = response.get("usage")
        content, tool_calls, finish = _REPLIES.get(api, llm_chat.reply)(response)
    prompt, completion, total, cache_read, cache_write = _usage(api, usage)
    if response_blob is not None:  # the reply's text and arguments stay in the body
        content = None
        tool_calls = [msgspec.structs.replace(call, arguments="") for call in tool_calls]
    return LlmCalled(
        exchange_id=exchange_id,
        api=api,
        model=model if isinstance(model, str) else None,
        stream=bool(request.get("stream")) or streamed,
        messages=tuple(messages) if isinstance(messages, list) else (),
        tools=_tool_names(request.get("tools")),
        tool_calls=tuple(tool_calls),
        content=content,
        finish_reason=finish if isinstance(finish, str) else None,
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        status=status,
        error=error,
        request_blob=request_blob,
        response_blob=response_blob,
        message_count=len(roles) if roles is not None else None,
        roles=roles or (),
    )
