"""The LLM cassette: an ASGI app that answers a re-driven agent from a run's recorded LLM calls (any API).

Matching is one explicit function, ``request_key``: a SHA-256 over the
method, the API (chat, responses, messages, embeddings, ...) and the canonical JSON of
the request body after ``canonical_request`` has normalised what legitimately
changes between two plays of the same run, and nothing else:

- **tool-call ids**: an assistant message's ``tool_calls[].id``, a tool
  message's ``tool_call_id``, a Responses item's ``call_id`` and an Anthropic
  ``tool_use`` block's ``id`` (its ``tool_result``'s ``tool_use_id``) become
  ``<call-1>``, ``<call-2>``, ... in order of first appearance. A real model
  picks them at random, so they carry no meaning beyond linking a call to its
  result, and the aliases keep that link;
- **tool-call arguments** (JSON text) are parsed, so spacing and key order do
  not count;
- inside **tool results** only (a tool message's content, a
  ``function_call_output``'s output, a ``tool_result`` block's content,
  parsed when they are JSON text):
  ``lastUpdated`` and ``timestamp`` values become ``<time>`` (the server
  stamps them with the wall clock), and an absolute URL up to its ``/fhir``
  segment becomes ``<fhir-base>`` (it names the server's or proxy's port, the
  run and its sandbox, all new in every play; a proxied base has two ``/fhir``
  segments and the last one counts).

Server-assigned resource ids are *not* normalised: the replay's sandbox hands
out the recorded ids in order, so they come back equal, and a different id
means the agent created something the recording did not. Everything else —
system and user messages, model, tools and their schemas, sampling settings,
``stream`` — counts as written.

A request with no unused recorded call of its key is unmatched, and the
cassette's ``Policy`` decides: ``stop`` (strict replay) answers it, and every
later request, with a 400 ``replay_divergence`` error so the agent stops;
``play-next`` (lenient) answers the next unused recorded call in recorded
order. Either way the miss is kept with the first place where the request
differs from the recorded one it should have been. Streamed recordings are
answered as ``text/event-stream``, chunk by recorded chunk. The cassette's own
errors take the shape of the API asked (Anthropic's for ``/v1/messages``,
OpenAI's otherwise), so each SDK reads them as the API's.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from fae.recorder.jsonbody import parse_json
from fae.recorder.llm import api_of
from fae.replay.source import RunLog
from fae.store import events as ev

TIME = "<time>"
FHIR_BASE = "<fhir-base>"
_TIME_KEYS = frozenset({"lastUpdated", "timestamp"})
# an absolute URL up to and including its first /fhir path segment
# greedy up to the last "/fhir" segment: a proxied base (/run/{run}/{actor}/fhir/sandbox/{id}/fhir) has two
_FHIR_URL = re.compile(r"https?://[^\s\"'<>?#]*/fhir(?=[/?#\s\"'<>]|$)")


class Policy(StrEnum):
    """What the cassette does with a request it has no recorded answer for."""

    STOP = "stop"
    PLAY_NEXT = "play-next"


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _parsed(text: Any) -> Any:
    if isinstance(text, str) and text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _volatile_free(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: TIME if k in _TIME_KEYS and isinstance(v, str) else _volatile_free(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_volatile_free(v) for v in value]
    if isinstance(value, str):
        return _FHIR_URL.sub(FHIR_BASE, value)
    return value


def _tool_result(content: Any) -> Any:
    """A tool result as the key sees it: parsed where it is JSON text, server times and bases normalised."""
    if isinstance(content, list):
        return [
            {**part, "text": _volatile_free(_parsed(part["text"]))}
            if isinstance(part, dict) and isinstance(part.get("text"), str)
            else _volatile_free(part)
            for part in content
        ]
    return _volatile_free(_parsed(content))


class _Aliases:
    """Tool-call ids renamed ``<call-N>`` in order of first appearance."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, call_id: Any) -> Any:
        if not isinstance(call_id, str):
            return call_id
        return self.names.setdefault(call_id, f"<call-{len(self.names) + 1}>")


def _message(message: Any, alias: _Aliases) -> Any:
    if not isinstance(message, dict):
        return message
    out = dict(message)
    if isinstance(out.get("tool_calls"), list):
        calls = []
        for call in out["tool_calls"]:
            if isinstance(call, dict):
                call = {**call, "id": alias(call.get("id"))}
                if isinstance(call.get("function"), dict):
                    call["function"] = {**call["function"], "arguments": _parsed(call["function"].get("arguments"))}
            calls.append(call)
        out["tool_calls"] = calls
    if out.get("role") == "tool":
        out["tool_call_id"] = alias(out.get("tool_call_id"))
        out["content"] = _tool_result(out.get("content"))
    return out


def _input_item(item: Any, alias: _Aliases) -> Any:
    """A Responses API input item: function calls and their outputs, as chat messages are."""
    if not isinstance(item, dict):
        return item
    out = dict(item)
    if out.get("type") == "function_call":
        out["call_id"] = alias(out.get("call_id"))
        out["arguments"] = _parsed(out.get("arguments"))
    elif out.get("type") == "function_call_output":
        out["call_id"] = alias(out.get("call_id"))
        out["output"] = _tool_result(out.get("output"))
    return out


def _block(block: Any, alias: _Aliases) -> Any:
    """An Anthropic content block: a ``tool_use`` id and a ``tool_result``'s id and content, as chat calls are."""
    if not isinstance(block, dict):
        return block
    out = dict(block)
    if out.get("type") == "tool_use":
        out["id"] = alias(out.get("id"))
    elif out.get("type") == "tool_result":
        out["tool_use_id"] = alias(out.get("tool_use_id"))
        out["content"] = _tool_result(out.get("content"))
    return out


def _any_message(message: Any, alias: _Aliases) -> Any:
    """A chat message, or an Anthropic message whose content is a list of blocks."""
    out = _message(message, alias)
    if isinstance(out, dict) and out.get("role") != "tool" and isinstance(out.get("content"), list):
        out["content"] = [_block(block, alias) for block in out["content"]]
    return out


def canonical_request(body: Any) -> Any:
    """A request body with only the volatile parts normalised (see the module docstring)."""
    if not isinstance(body, dict):
        return body
    alias = _Aliases()
    out = dict(body)
    if isinstance(body.get("messages"), list):
        out["messages"] = [_any_message(m, alias) for m in body["messages"]]
    if isinstance(body.get("input"), list):
        out["input"] = [_input_item(i, alias) for i in body["input"]]
    return out


def request_view(method: str, path: str, body: bytes | None) -> Any:
    """What the key is computed over: method, API and the canonical body (its digest when not JSON)."""
    parsed = parse_json(body)
    content = (
        canonical_request(parsed) if parsed is not None else {"bytes_sha256": hashlib.sha256(body or b"").hexdigest()}
    )
    return {"method": method.upper(), "api": api_of(path), "body": content}


def request_key(method: str, path: str, body: bytes | None) -> str:
    """The one function that decides whether a replayed LLM request is a recorded one."""
    return hashlib.sha256(_canonical_json(request_view(method, path, body)).encode()).hexdigest()


def first_difference(recorded: Any, replayed: Any, where: str = "") -> tuple[str, Any, Any] | None:
    """The first place two request views differ: (path, recorded value, replayed value)."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for key in sorted(set(recorded) | set(replayed), key=str):
            found = first_difference(
                recorded.get(key, _ABSENT), replayed.get(key, _ABSENT), f"{where}.{key}" if where else str(key)
            )
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(replayed, list):
        for i in range(max(len(recorded), len(replayed))):
            found = first_difference(
                recorded[i] if i < len(recorded) else _ABSENT,
                replayed[i] if i < len(replayed) else _ABSENT,
                f"{where}[{i}]",
            )
            if found:
                return found
        return None
    if recorded == replayed and type(recorded) is type(replayed):
        return None
    return (where or "(body)", None if recorded is _ABSENT else recorded, None if replayed is _ABSENT else replayed)


_ABSENT: Any = type("_Absent", (), {"__repr__": lambda self: "<absent>"})()


@dataclass(frozen=True)
class RecordedCall:
    """One recorded LLM exchange of the agent, with everything needed to answer it again."""

    index: int
    seq: int
    method: str
    path: str
    key: str
    view: Any
    status: int | None
    content_type: str
    body: bytes
    chunks: tuple[bytes, ...] = ()
    streamed: bool = False
    error: str | None = None


def recorded_calls(run: RunLog) -> list[RecordedCall]:
    """The agent's LLM exchanges of a run, in recorded order, bodies and chunks read from the log."""
    chunks: dict[str, list[tuple[int, str]]] = {}
    for recorded in run.events:
        if isinstance(recorded.event, ev.ChunkReceived):
            chunks.setdefault(recorded.event.exchange_id, []).append((recorded.event.index, recorded.event.blob))
    calls: list[RecordedCall] = []
    for recorded in run.events:
        event = recorded.event
        if not (
            isinstance(event, ev.HttpExchanged) and recorded.upstream == "llm" and recorded.actor in (None, "agent")
        ):
            continue
        request = run.body(event.request_blob)
        content_type = next(
            (h.value for h in event.response_headers if h.name.lower() == "content-type"), "application/json"
        )
        parts = tuple(run.body(blob) or b"" for _, blob in sorted(chunks.get(event.exchange_id, [])))
        body = run.body(event.decoded_blob or event.response_blob) or b""
        calls.append(
            RecordedCall(
                index=len(calls),
                seq=recorded.seq,
                method=event.method,
                path=event.path,
                key=request_key(event.method, event.path, request),
                view=request_view(event.method, event.path, request),
                status=event.status,
                content_type=content_type,
                body=body,
                chunks=parts or ((body,) if event.streamed and body else ()),
                streamed=event.streamed,
                error=event.error,
            )
        )
    return calls


@dataclass(frozen=True)
class Miss:
    """A request the cassette had no recorded answer for: which call, and where it first differs."""

    request: int
    expected: RecordedCall | None
    where: str
    recorded: Any
    replayed: Any

    def describe(self) -> str:
        seq = f" (event {self.expected.seq})" if self.expected else ""
        if self.expected is None:
            return f"LLM call {self.request + 1}: an extra request; the recording has no more calls"
        return (
            f"LLM call {self.request + 1}{seq}: the request differs at {self.where}: "
            f"recorded {_short(self.recorded)}, replayed {_short(self.replayed)}"
        )


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return text if len(text) <= 240 else text[:237] + "..."


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str
    body: bytes
    chunks: tuple[bytes, ...] = ()
    streamed: bool = False
    seq: int | None = None


@dataclass
class Cassette:
    """Recorded LLM calls played back by ``request_key``, with ``policy`` for a request that has none."""

    calls: list[RecordedCall]
    policy: Policy = Policy.STOP
    on_miss: Callable[[Miss], None] | None = None
    misses: list[Miss] = field(default_factory=list)
    requests: int = 0
    _used: set[int] = field(default_factory=set)
    _stopped: Miss | None = None

    def unplayed(self) -> list[RecordedCall]:
        """Recorded calls nobody asked for (so far)."""
        return [c for c in self.calls if c.index not in self._used]

    def answer(self, method: str, path: str, body: bytes | None) -> Reply:
        """The recorded answer to one request, or the policy's answer when none matches."""
        number = self.requests
        self.requests += 1
        if self._stopped is not None:
            stopped = f"fae replay stopped at {self._stopped.describe()}; call {number + 1} is not answered"
            return _refusal(api_of(path), stopped)
        key = request_key(method, path, body)
        found = next((c for c in self.calls if c.key == key and c.index not in self._used), None)
        if found is not None:
            return self._play(found)
        pending = self.unplayed()
        expected = pending[0] if pending else None
        if expected is None:
            miss = Miss(number, None, "", None, None)
        else:
            where, was, now = first_difference(expected.view, request_view(method, path, body)) or ("?", None, None)
            miss = Miss(number, expected, where.removeprefix("body."), was, now)
        self.misses.append(miss)
        if self.on_miss:
            self.on_miss(miss)
        if self.policy is Policy.PLAY_NEXT and expected is not None:
            return self._play(expected)
        if self.policy is Policy.STOP:
            self._stopped = miss
        return _refusal(api_of(path), f"fae replay: {miss.describe()}")

    def _play(self, call: RecordedCall) -> Reply:
        self._used.add(call.index)
        if call.status is None:  # the recorded call got no answer (a timeout, a dropped connection)
            return Reply(
                504,
                "application/json",
                _error_body(api_of(call.path), f"recorded: {call.error or 'no response'}", "timeout"),
                seq=call.seq,
            )
        return Reply(call.status, call.content_type, call.body, call.chunks, call.streamed, call.seq)

    def app(self) -> Starlette:
        """The cassette as an ASGI app: every path and method (OpenAI's, Anthropic's, ...) is answered from the log."""

        async def endpoint(request: Request) -> Response:
            path = "/" + request.path_params["path"]
            reply = self.answer(request.method, path, await request.body())
            headers = {"x-fae-cassette-seq": str(reply.seq)} if reply.seq is not None else {}
            if reply.streamed:
                parts = reply.chunks

                async def stream() -> AsyncIterator[bytes]:
                    for part in parts:
                        yield part

                return StreamingResponse(
                    stream(),
                    status_code=reply.status,
                    media_type=reply.content_type,
                    headers={**headers, "cache-control": "no-cache"},
                )
            return Response(reply.body, status_code=reply.status, media_type=reply.content_type, headers=headers)

        methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
        return Starlette(routes=[Route("/{path:path}", endpoint, methods=methods)])


def _error_body(api: str, message: str, code: str) -> bytes:
    """An error in the asked API's shape: Anthropic's (its type fixed by the status) or OpenAI's."""
    if api == "messages":
        kind = "timeout_error" if code == "timeout" else "invalid_request_error"
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return json.dumps(
        {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
    ).encode()


def _refusal(api: str, message: str) -> Reply:
    # 400 is retried by neither the openai nor the anthropic SDK, so the agent stops at once
    return Reply(400, "application/json", _error_body(api, message, "replay_divergence"))
