"""Legacy MCP over SSE: a ``tools/call`` POSTed to /messages/ is answered later, on the session's GET /sse stream.

The POST itself is answered ``202 Accepted``, so its exchange holds the call
but not the reply. ``SsePairing`` reads each MCP stream as its chunks pass,
learns the stream's session from its ``endpoint`` event, and pairs every reply
with the call of the same session and JSON-RPC id, whichever is seen first.
The pair becomes one ToolCalled owned by the POST's exchange (its run, actor
and upstream). A call still unanswered when its session's stream closes
becomes a ToolCalled with an error. This is the recorder's only state; the
proxy's hooks all run on one event loop, and a lock keeps it safe regardless.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fae.proxy.exchange import Exchange
from fae.recorder.jsonbody import parse_json
from fae.recorder.mcp import is_reply, tool_event
from fae.store.events import ToolCalled

_MAX_EARLY_REPLIES = 1024  # replies per session seen before their POST's exchange closed
STREAM_CLOSED = "the SSE stream closed before the reply to this call"


@dataclass(frozen=True)
class Owner:
    """The exchange a paired ToolCalled belongs to: the POST that carried the call."""

    run_id: str
    actor: str
    upstream: str
    exchange_id: str


Paired = tuple[Owner, ToolCalled]


@dataclass
class _Stream:
    upstream: str
    session: str | None = None
    pending: str = ""


@dataclass
class _Session:
    waiting: dict[str, tuple[Owner, dict[str, Any] | None]] = field(default_factory=dict)
    early: dict[str, dict[str, Any]] = field(default_factory=dict)


def posted_session(exchange: Exchange) -> str | None:
    """The legacy-SSE session a POST to an MCP upstream was accepted into, if that is what it is."""
    if exchange.kind != "mcp" or exchange.method != "POST" or exchange.status != 202:
        return None
    values = parse_qs(urlsplit(exchange.path).query).get("session_id")
    return values[0] if values else None


def _sse_events(text: str) -> tuple[list[tuple[str, str]], str]:
    """The complete (event name, data) pairs in ``text``, and the incomplete rest."""
    *blocks, rest = text.replace("\r\n", "\n").split("\n\n")
    events = []
    for block in blocks:
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        if data:
            events.append((name, "\n".join(data)))
    return events, rest


def _rpc_id(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


class SsePairing:
    """Pairs legacy-SSE tool calls with their replies across a POST exchange and a stream's chunks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: dict[str, _Stream] = {}
        self._sessions: dict[tuple[str, str], _Session] = {}

    def chunk(self, exchange: Exchange, data: bytes) -> list[Paired]:
        """Read a passing chunk of an MCP stream; the tool calls its replies complete."""
        if exchange.kind != "mcp" or exchange.method != "GET":
            return []
        with self._lock:
            stream = self._streams.setdefault(exchange.exchange_id, _Stream(exchange.upstream))
            events, stream.pending = _sse_events(stream.pending + data.decode("utf-8", errors="replace"))
            paired: list[Paired] = []
            for name, payload in events:
                paired.extend(self._stream_event(stream, name, payload))
            return paired

    def finished(self, exchange: Exchange) -> list[Paired]:
        """Note a finished exchange: a POST's calls pair with replies already seen; a closed stream
        turns its session's unanswered calls into errors."""
        with self._lock:
            session_id = posted_session(exchange)
            if session_id is not None:
                return self._posted(exchange, session_id)
            stream = self._streams.pop(exchange.exchange_id, None)
            if stream is None or stream.session is None:
                return []
            session = self._sessions.pop((stream.upstream, stream.session), _Session())
            return [(owner, tool_event(owner.exchange_id, call, None, owner.upstream, None, STREAM_CLOSED))
                    for owner, call in session.waiting.values() if call is not None]

    def _stream_event(self, stream: _Stream, name: str, payload: str) -> list[Paired]:
        if name == "endpoint":
            values = parse_qs(urlsplit(payload).query).get("session_id")
            stream.session = values[0] if values else None
            return []
        if stream.session is None:
            return []
        message = parse_json(payload.encode())
        replies = [m for m in (message if isinstance(message, list) else [message]) if is_reply(m)]
        session = self._sessions.setdefault((stream.upstream, stream.session), _Session())
        paired = []
        for reply in replies:
            key = _rpc_id(reply["id"])
            waiting = session.waiting.pop(key, None)
            if waiting is None:
                session.early[key] = reply
                while len(session.early) > _MAX_EARLY_REPLIES:
                    session.early.pop(next(iter(session.early)))
            else:
                owner, call = waiting
                if call is not None:
                    paired.append((owner, tool_event(owner.exchange_id, call, reply, owner.upstream, None)))
        return paired

    def _posted(self, exchange: Exchange, session_id: str) -> list[Paired]:
        body = parse_json(exchange.request_body)
        requests = [m for m in (body if isinstance(body, list) else [body])
                    if isinstance(m, dict) and "method" in m and "id" in m]
        owner = Owner(exchange.run_id, exchange.actor, exchange.upstream, exchange.exchange_id)
        session = self._sessions.setdefault((exchange.upstream, session_id), _Session())
        paired = []
        for request in requests:
            call = request if request.get("method") == "tools/call" else None
            key = _rpc_id(request["id"])
            reply = session.early.pop(key, None)
            if reply is None:
                session.waiting[key] = (owner, call)
            elif call is not None:
                paired.append((owner, tool_event(owner.exchange_id, call, reply, owner.upstream, exchange.error)))
        return paired
