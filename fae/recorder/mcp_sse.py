"""Legacy MCP over SSE: a ``tools/call`` POSTed to /messages/ is answered later, on the session's GET /sse stream.

The POST itself is answered ``202 Accepted``, so its exchange holds the call
but not the reply. ``SsePairing`` reads each MCP stream as its chunks pass,
learns the stream's session from its ``endpoint`` event, and pairs every reply
with the call of the same session and JSON-RPC id, whichever is seen first.
The pair becomes one ToolCalled owned by the POST's exchange (its run, actor
and upstream). A call still unanswered when its session's stream closes
becomes a ToolCalled with an error. This is the recorder's only state; the
proxy's hooks all run on one event loop, and a lock keeps it safe regardless.

A stream is read in time linear in its bytes, whatever its chunks or events
look like: only the event being read is buffered, and a search for its end
starts where the last one stopped. Large messages are treated as the other
MCP exchanges treat theirs (``fae.recorder.mcp``): a reply of
``BODY_FILE_BYTES`` or more is stored as a body of its own, which the event
names instead of holding its result, and a large POST's arguments are
outlined; ``tool_in_full`` reads both back. While such a reply is read the
stream's whole body is let go (its chunks are all recorded), so the proxy
holds the reply once. An event longer than the proxy's body limit is dropped
up to its end, and the calls its session leaves unanswered say so.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec

from fae.proxy.exchange import Exchange
from fae.proxy.gather import Gathered
from fae.recorder.jsonbody import SSE_EVENT_END, items, json_node, parse_json
from fae.recorder.mcp import is_reply, large_calls, outline_reply, tool_event
from fae.store.bodies import BODY_FILE_BYTES, Body, Pieces
from fae.store.events import ToolCalled
from fae.store.log import blob_hash

_MAX_EARLY_REPLIES = 1024  # replies per session seen before their POST's exchange closed
_MAX_EARLY_BYTES = 8 * BODY_FILE_BYTES  # and their small bodies, held until then
_FRAMING = 64 * 1024  # an event may pass the body limit by its field names and line ends
_LINE_END = re.compile(rb"\r?\n")
STREAM_CLOSED = "the SSE stream closed before the reply to this call"
OVER_LIMIT = (
    "the SSE stream closed before the reply to this call; an event on it was over the proxy's "
    "body limit (--max-body-mib) and was not recorded"
)
LEFT_OUT = "the tool reported an error: its result is in the recorded reply body"
STREAM_LET_GO = (
    "a reply on this legacy-SSE stream was large: its chunks are recorded, and the reply as a body "
    "of its own; the stream's whole body is not kept"
)


@dataclass(frozen=True)
class Owner:
    """The exchange a paired ToolCalled belongs to: the POST that carried the call."""

    run_id: str
    actor: str
    upstream: str
    exchange_id: str
    request_blob: str | None = None  # the POST's body, named by the event when the call or its reply is large
    large: bool = False  # the POST's body is large: its arguments were outlined
    call_index: int = 0  # the call's place among the POST's ``tools/call`` messages


Paired = tuple[Owner, ToolCalled]


@dataclass
class Found:
    """What a chunk or a finished exchange completed: tool calls, and the bodies their events name."""

    paired: list[Paired] = field(default_factory=list)
    blobs: dict[str, Body] = field(default_factory=dict)


@dataclass(frozen=True)
class _Reply:
    """A reply as the pairing keeps it: small, its message and bytes; large, an outline and its stored body."""

    message: dict[str, Any]
    data: bytes | None = None
    digest: str | None = None

    def blob(self, blobs: dict[str, Body]) -> str:
        if self.digest is not None:
            return self.digest
        assert self.data is not None
        digest = blob_hash(self.data)
        blobs[digest] = self.data
        return digest


@dataclass
class _Stream:
    upstream: str
    limit: int
    session: str | None = None
    buffer: bytearray = field(default_factory=bytearray)  # the events being read, while they are small
    large: Gathered | None = None  # a large event's bytes so far
    searched: int = 0  # no event ends before this offset of ``buffer``
    skipping: bool = False  # an event over the limit is being dropped up to its end
    dropped: bool = False  # and one was


@dataclass
class _Session:
    waiting: dict[str, tuple[Owner, dict[str, Any] | None]] = field(default_factory=dict)
    early: dict[str, _Reply] = field(default_factory=dict)
    early_bytes: int = 0
    dropped: bool = False  # an event on its stream was over the limit


def posted_session(exchange: Exchange) -> str | None:
    """The legacy-SSE session a POST to an MCP upstream was accepted into, if that is what it is."""
    if exchange.kind != "mcp" or exchange.method != "POST" or exchange.status != 202:
        return None
    values = parse_qs(urlsplit(exchange.path).query).get("session_id")
    return values[0] if values else None


def _fields(block: memoryview) -> tuple[str, memoryview | bytes | None]:
    """An event's name and its data (one ``data:`` line: a view of it; several: joined by newlines)."""
    name, data, start = "message", [], 0
    for end in [*(m.start() for m in _LINE_END.finditer(block)), len(block)]:
        line = block[start:end]
        start = end + 2 if block[end : end + 2] == b"\r\n" else end + 1
        head = bytes(line[:6])
        if head == b"event:":
            name = bytes(line[6:]).decode("utf-8", errors="replace").strip()
        elif head.startswith(b"data:"):
            offset = 5
            while offset < len(line) and line[offset] in b" \t":
                offset += 1
            data.append(line[offset:])
    if not data:
        return name, None
    return name, data[0] if len(data) == 1 else b"\n".join(data)


def _rpc_id(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _replies(data: memoryview | bytes) -> list[_Reply]:
    """The JSON-RPC replies in an event's data; a large one's as outlines, its bytes kept to be stored."""
    if len(data) < BODY_FILE_BYTES:
        raw = bytes(data)  # one copy, shared by the replies of a batch
        message = parse_json(raw)
        found = [m for m in (message if isinstance(message, list) else [message]) if is_reply(m)]
        return [_Reply(m, raw) for m in found]
    node = json_node(Pieces((data,)))
    listed = items(node)
    outlines = [outline_reply(n) for n in (listed if listed is not None else [node])]
    return [_Reply(m) for m in outlines if is_reply(m)]


class SsePairing:
    """Pairs legacy-SSE tool calls with their replies across a POST exchange and a stream's chunks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: dict[str, _Stream] = {}
        self._sessions: dict[tuple[str, str], _Session] = {}

    def chunk(self, exchange: Exchange, data: bytes) -> Found:
        """Read a passing chunk of an MCP stream; the tool calls its replies complete."""
        found = Found()
        if exchange.kind != "mcp" or exchange.method != "GET":
            return found
        with self._lock:
            stream = self._streams.get(exchange.exchange_id)
            if stream is None:
                stream = self._streams[exchange.exchange_id] = _Stream(
                    exchange.upstream, exchange.body_limit + _FRAMING
                )
            if stream.large is not None:
                self._grow(stream, data, found)
            else:
                stream.buffer += data
                self._read(stream, found)
            if stream.large is not None:
                exchange.body_dropped = STREAM_LET_GO  # the proxy lets go of its copy: the reply is held once
        return found

    def _read(self, stream: _Stream, found: Found) -> None:
        """Complete the events ``stream.buffer`` holds and keep what follows the last: in the buffer, or, once it
        is a large event's beginning, in a map of the limit's size (a bytearray grown by ``+=`` may be copied
        on a resize, holding the event twice)."""
        buffer, start = stream.buffer, 0
        while (end := SSE_EVENT_END.search(buffer, max(stream.searched - 3, start))) is not None:
            if stream.skipping:
                stream.skipping = False
            elif end.start() - start >= BODY_FILE_BYTES:  # a large event came whole in one chunk
                rest = bytes(buffer[end.end() :])
                del buffer[end.end() :]
                self._event(stream, memoryview(buffer)[start : end.start()], found)  # the buffer is its own now
                stream.buffer, stream.searched = bytearray(rest), 0
                self._read(stream, found)
                return
            else:
                self._event(stream, memoryview(bytes(buffer[start : end.start()])), found)
            start = stream.searched = end.end()
        del buffer[:start]
        stream.searched = len(buffer)
        if stream.skipping:
            del buffer[: max(len(buffer) - 3, 0)]  # dropped up to its end: only a boundary's first bytes matter
            stream.searched = len(buffer)
        elif len(buffer) >= BODY_FILE_BYTES:
            large = Gathered(stream.limit)
            if large.add(buffer):
                stream.large = large
            else:
                self._drop(stream)
            del buffer[: max(len(buffer) - 3, 0) if stream.large is None else len(buffer)]
            stream.searched = len(buffer)

    def _grow(self, stream: _Stream, data: bytes, found: Found) -> None:
        """Read a chunk into the large event being gathered; where it ends, read it and what follows."""
        large = stream.large
        assert large is not None
        tail = bytes(large.body().parts[0][-3:])  # a boundary may begin before this chunk
        end = SSE_EVENT_END.search(tail + data)
        if end is None:
            if not large.add(data):
                self._drop(stream)
                stream.buffer += data[-3:]
                stream.searched = 0
            return
        through, after = end.start() - len(tail), end.end() - len(tail)
        if through > 0 and not large.add(data[:through]):
            self._drop(stream)
        else:
            stream.large = None
            self._event(stream, memoryview(large.body().parts[0])[: large.size + min(through, 0)], found)
        stream.large, stream.skipping = None, False
        stream.buffer, stream.searched = bytearray(data[after:]), 0
        self._read(stream, found)

    def _drop(self, stream: _Stream) -> None:
        """The event being read is over the limit: it is dropped up to its end, and its session told."""
        stream.large, stream.skipping, stream.dropped = None, True, True
        if stream.session is not None:
            self._sessions.setdefault((stream.upstream, stream.session), _Session()).dropped = True

    def finished(self, exchange: Exchange, request_blob: str | None = None) -> Found:
        """Note a finished exchange (``request_blob``: its stored request body): a POST's calls pair with
        replies already seen; a closed stream turns its session's unanswered calls into errors."""
        found = Found()
        with self._lock:
            session_id = posted_session(exchange)
            if session_id is not None:
                self._posted(exchange, session_id, request_blob, found)
                return found
            stream = self._streams.pop(exchange.exchange_id, None)
            if stream is None or stream.session is None:
                return found
            session = self._sessions.pop((stream.upstream, stream.session), _Session())
            reason = OVER_LIMIT if session.dropped or stream.dropped else STREAM_CLOSED
            for owner, call in session.waiting.values():
                if call is not None:
                    event = tool_event(owner.exchange_id, call, None, owner.upstream, None, reason)
                    found.paired.append((owner, _naming(event, owner, None)))
            return found

    def _event(self, stream: _Stream, block: memoryview, found: Found) -> None:
        name, data = _fields(block)
        if data is None:
            return
        if name == "endpoint":
            values = parse_qs(urlsplit(bytes(data).decode("utf-8", errors="replace")).query).get("session_id")
            stream.session = values[0] if values else None
            return
        if stream.session is None:
            return
        replies = _replies(data)
        if replies and replies[0].data is None:  # large: stored now, so the buffer can go
            digest = blob_hash(Pieces((data,)))
            found.blobs[digest] = Pieces((data,))
            replies = [_Reply(r.message, None, digest) for r in replies]
        session = self._sessions.setdefault((stream.upstream, stream.session), _Session())
        session.dropped = session.dropped or stream.dropped
        for reply in replies:
            key = _rpc_id(reply.message["id"])
            waiting = session.waiting.pop(key, None)
            if waiting is None:
                self._keep_early(session, key, reply)
            else:
                owner, call = waiting
                if call is not None:
                    found.paired.append((owner, _paired(owner, call, reply, None, found.blobs)))

    @staticmethod
    def _keep_early(session: _Session, key: str, reply: _Reply) -> None:
        old = session.early.pop(key, None)
        session.early_bytes -= len(old.data or b"") if old else 0
        session.early[key] = reply
        session.early_bytes += len(reply.data or b"")
        while len(session.early) > _MAX_EARLY_REPLIES or session.early_bytes > _MAX_EARLY_BYTES:
            dropped = session.early.pop(next(iter(session.early)))
            session.early_bytes -= len(dropped.data or b"")

    def _posted(self, exchange: Exchange, session_id: str, request_blob: str | None, found: Found) -> None:
        body = exchange.request_body
        large = body is not None and len(body) >= BODY_FILE_BYTES
        if large:
            assert body is not None
            requests: list[Any] = large_calls(body)
        else:
            parsed = parse_json(body)
            requests = [
                m
                for m in (parsed if isinstance(parsed, list) else [parsed])
                if isinstance(m, dict) and "method" in m and "id" in m
            ]
        session = self._sessions.setdefault((exchange.upstream, session_id), _Session())
        index = 0
        for request in requests:
            call = request if request.get("method") == "tools/call" else None
            owner = Owner(
                exchange.run_id, exchange.actor, exchange.upstream, exchange.exchange_id, request_blob, large, index
            )
            index += call is not None
            key = _rpc_id(request["id"])
            reply = session.early.pop(key, None)
            if reply is None:
                session.waiting[key] = (owner, call)
                continue
            session.early_bytes -= len(reply.data or b"")
            if call is not None:
                found.paired.append((owner, _paired(owner, call, reply, exchange.error, found.blobs)))


def _paired(owner: Owner, call: dict[str, Any], reply: _Reply, error: str | None, blobs: dict[str, Body]) -> ToolCalled:
    event = tool_event(owner.exchange_id, call, reply.message, owner.upstream, error)
    if not owner.large and reply.digest is None:
        return event
    return _naming(event, owner, reply.blob(blobs), reply.digest is not None)


def _naming(event: ToolCalled, owner: Owner, response_blob: str | None, large_reply: bool = False) -> ToolCalled:
    """A paired event that names its bodies where the call or its reply is large (``tool_in_full`` reads them)."""
    if not owner.large and response_blob is None:
        return event
    return msgspec.structs.replace(
        event,
        request_blob=owner.request_blob,
        response_blob=response_blob,
        call_index=owner.call_index,
        result=None if large_reply else event.result,
        error=LEFT_OUT if large_reply and event.is_error and event.error == "null" else event.error,
    )
