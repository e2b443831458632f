"""The mitmproxy addon: attribute each flow by its path, copy it into an Exchange, hand it on.

Hooks do no parsing and no I/O of their own: they route, copy bytes and call
the sink. If the sink cannot record, the client gets an error response instead
of the upstream's answer, so nothing passes unrecorded.

A body whose Content-Length is at least ``BODY_FILE_BYTES`` (up to the limit)
is streamed instead of buffered, and gathered into one memory map as it comes
(``fae.proxy.gather``): mitmproxy would join a buffered body's pieces into one
copy, holding it twice. A request's pieces pass on as they come; a response's
are held until the exchange is recorded and then released, so a client still
never gets a body that is not in the log (if recording fails it gets the
headers and a cut connection). A response with no Content-Length (chunked)
is held the same way in a map of the limit's size: past the limit the rest
is dropped, the exchange recorded with the reason and the client cut off (its
status and headers have gone; mitmproxy answered 502 only because it held
the pieces and their joined copy, twice the body). Handed on chunked, each
slice is copied for its chunk's framing, so the map's pages for it are given
back as the copy is made. A gzip, deflate, br or zstd response is
decoded, for the log, into a map of its own, bounded by the limit
(``fae.proxy.decode``): one that would decode past it is kept encoded only,
with a ``decode_error`` saying so. A large chunked request (no Content-Length)
stays buffered by mitmproxy, so it can still be refused with 413, and goes on
with its length: framed as chunks again it would be copied whole. After a
large body the heap is trimmed before the next request (after one mitmproxy buffered, such as a refused one,
collected first): freed, it would stay resident and count against the next.
"""

from __future__ import annotations

import gc
import time
import uuid
from collections.abc import Iterable
from typing import Protocol

from mitmproxy import http
from mitmproxy.net import encoding as mitm_encoding

from fae.proxy.capabilities import HARNESS_ACTORS, CapabilityBook
from fae.proxy.decode import decode_bounded, decodes_bounded
from fae.proxy.exchange import DEFAULT_MAX_BODY_BYTES, Chunk, Exchange
from fae.proxy.gather import Gathered
from fae.proxy.routes import CAPABILITY_HEADER, Route, RouteError, Upstream, parse_route, refusal
from fae.store import bodies
from fae.util.credentials import KEY_HEADER
from fae.util.trim import trim_heap

ROUTE_KEY = "fae_route"
_ADDED_HEADERS = (
    "x-fae-run",
    "x-fae-actor",
    CAPABILITY_HEADER,
    KEY_HEADER,
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-forwarded-prefix",
)
_IDENTITY_HEADER = "x-fae-identity"  # fae.fhir.audit's: only the harness's own actors may present one
EXCHANGE_KEY = "fae_exchange"
REFUSED_KEY = "fae_refused"
_TOO_LARGE = "body exceeds mitmproxy's body_size_limit"


class ExchangeSink(Protocol):
    @property
    def healthy(self) -> bool: ...

    def exchange(self, exchange: Exchange) -> None: ...

    def chunk(self, exchange: Exchange, index: int, chunk: Chunk) -> None: ...


def _error_response(status: int, message: str) -> http.Response:
    return http.Response.make(
        status, message.encode() + b"\n", {"content-type": "text/plain; charset=utf-8", "x-fae-proxy": "1"}
    )


class _StreamTap:
    """Passes a streamed body through chunk by chunk, recording each chunk first, and gathers the whole body
    into a map for the exchange (a list of the chunks, joined at the end, held it twice, without a bound)."""

    def __init__(self, sink: ExchangeSink, exchange: Exchange, capacity: int):
        self.sink = sink
        self.exchange = exchange
        self.started = time.monotonic()
        self.gathered: Gathered | None = Gathered(capacity)
        self.over = False  # past the capacity: the chunks are still recorded, the whole body is not kept

    def __call__(self, data: bytes) -> bytes:
        if data:
            chunk = Chunk(offset_ms=(time.monotonic() - self.started) * 1000, data=data)
            self.sink.chunk(self.exchange, len(self.exchange.chunks), chunk)
            self.exchange.chunks.append(Chunk(chunk.offset_ms, b""))  # recorded: the map keeps its bytes
            self.exchange.chunk_bytes += len(data)
            if self.gathered is not None and (self.exchange.body_dropped or not self.gathered.add(data)):
                self.gathered, self.over = None, True
        return data

    def body(self, small: int) -> bodies.Body | None:
        """The whole body (bytes under ``small``), or None past the capacity; the tap lets go of it."""
        gathered, self.gathered = self.gathered, None
        if gathered is None:
            return None
        body = gathered.body()
        return body if len(body) >= small else body.joined()


class _Passing:
    """A large request body: its pieces go on to the upstream as they come, and are gathered for the log."""

    def __init__(self, capacity: int) -> None:
        self.gathered: Gathered | None = Gathered(capacity)

    def __call__(self, data: bytes) -> bytes:
        if data and self.gathered is not None and not self.gathered.add(data):
            raise ValueError("a request body grew past its Content-Length")  # h11 never lets it
        return data


class _Held:
    """A large response body, or one whose size is not declared (chunked): gathered and held until the exchange
    is recorded, then let through. Undeclared, it is bounded by the limit: past it the rest is dropped, the
    exchange recorded with the reason, and the client's connection cut (its status and headers had gone)."""

    def __init__(
        self, addon: RecordingAddon, flow: http.HTTPFlow, exchange: Exchange, capacity: int, declared: bool = True
    ):
        self.addon = addon
        self.flow = flow
        self.exchange = exchange
        self.declared = declared
        self.gathered: Gathered | None = Gathered(capacity)
        self.done = False

    def __call__(self, data: bytes) -> Iterable[bytes]:
        if self.done:  # nothing comes after the end
            return [data] if data else []
        if data:
            if self.gathered is not None and not self.gathered.add(data):
                if self.declared:
                    raise ValueError("a response body grew past its Content-Length")  # h11 never lets it
                self.gathered = None  # over the limit: dropped, and refused at the end
            return []
        self.done = True
        gathered, self.gathered = self.gathered, None  # the flow outlives the body: only the slices hold it
        if gathered is None:
            self.addon._refuse_held(self.flow, self.exchange)
            return []
        pieces = gathered.body()  # the end of the body; a short chunked one is kept as buffered ones are
        body: bodies.Body = pieces if len(pieces) >= self.addon.stream_bytes else pieces.joined()
        if not self.addon._record_held(self.flow, self.exchange, body):
            return []
        if isinstance(body, bytes):
            return [body]
        if _chunked(self.flow.response):  # each slice is framed as a chunk, a copy: the map goes as they are made
            del body, pieces
            return gathered.copies()
        return list(bodies.body_slices(body))  # type: ignore[arg-type]


def _chunked(message: http.Message | None) -> bool:
    return message is not None and "chunked" in message.headers.get("transfer-encoding", "").lower()


def _declared_size(headers: http.Headers) -> int | None:
    value = headers.get("content-length", "")
    return int(value) if value.isdigit() else None


class RecordingAddon:
    """Routes ``/run/{run}/{actor}/{capability}/{upstream}/...`` to its upstream and records the exchange.

    A request whose capability is not the live one of its (run, actor), or whose path its actor may not
    reach (``fae.proxy.routes.refusal``), is answered 403 and never forwarded. When its capability is a
    live one, the refusal is recorded in the run that capability belongs to (what was asked, and why it
    was refused); one with no live capability belongs to no run and is only counted (``refused``).
    """

    def __init__(
        self,
        upstreams: dict[str, Upstream],
        sink: ExchangeSink,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        capabilities: CapabilityBook | None = None,
        stack_key: str | None = None,
    ):
        self.upstreams = upstreams
        self.sink = sink
        self.max_body_bytes = max_body_bytes
        self.capabilities = capabilities if capabilities is not None else CapabilityBook()
        self.stack_key = stack_key
        self.refused = 0
        """Requests refused with no live capability: they belong to no run, so no run records them."""
        self.stream_bytes = bodies.BODY_FILE_BYTES
        self._trim_due = False  # a large body passed: glibc keeps its freed heap buffers resident until trimmed
        self._collect_due = False

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if self._trim_due:  # an earlier large body's buffers, freed by now, go back to the OS
            if self._collect_due:  # a refused body's buffer is held by mitmproxy's connection (a cycle) until now
                gc.collect()
            self._trim_due = self._collect_due = False
            trim_heap()
        try:
            route = parse_route(flow.request.path, self.upstreams)
        except RouteError as exc:
            flow.response = _error_response(404, f"fae proxy: {exc}")
            return
        if not self.sink.healthy:
            flow.response = _error_response(503, "fae proxy: the event log cannot be written; refusing traffic")
            return
        if self._refused(flow, route):
            return
        upstream = route.upstream
        for name in [*_ADDED_HEADERS, *([_IDENTITY_HEADER] if route.actor not in HARNESS_ACTORS else [])]:
            flow.request.headers.pop(name, None)  # only the proxy speaks for a run, an actor or the stack
        # tell the upstream where its clients really are, so the links it writes lead back through here
        if not upstream.base_path:
            flow.request.headers["x-forwarded-host"] = flow.request.host_header or ""
            flow.request.headers["x-forwarded-proto"] = flow.request.scheme
            flow.request.headers["x-forwarded-prefix"] = (
                f"/run/{route.run_id}/{route.actor}/{route.capability}/{upstream.name}"
            )
        if upstream.embedded and self.stack_key:
            flow.request.headers[KEY_HEADER] = self.stack_key
            flow.request.headers[CAPABILITY_HEADER] = route.capability
        flow.request.scheme = upstream.scheme
        flow.request.host = upstream.host
        flow.request.port = upstream.port
        flow.request.path = upstream.base_path + route.rest
        flow.request.headers["host"] = f"{upstream.host}:{upstream.port}"
        flow.request.headers["x-fae-run"] = route.run_id
        flow.request.headers["x-fae-actor"] = route.actor
        flow.metadata[ROUTE_KEY] = route
        declared = _declared_size(flow.request.headers)
        if declared is not None and declared >= self.stream_bytes:  # over the limit: mitmproxy refused it already
            flow.request.stream = _Passing(declared)

    def _refused(self, flow: http.HTTPFlow, route: Route) -> bool:
        """Answer 403 if the route's capability or path is not allowed; True if so. A refusal whose capability
        is live is recorded in that capability's run, as its actor, with the path as it was asked."""
        owner = self.capabilities.owner(route.capability)
        if owner is None:
            reason = "no live capability for this run and actor (a run's URLs stop working when it ends)"
        elif owner != (route.run_id, route.actor):
            reason = "this capability belongs to another run or actor"
        else:
            refused = refusal(route)
            if refused is None:
                return False
            reason = f"{route.actor} may reach {refused}"
        flow.response = _error_response(403, f"fae proxy: refused: {reason}")
        if owner is None:
            self.refused += 1
            return True
        run_id, actor = owner
        flow.metadata[REFUSED_KEY] = f"refused by the proxy with 403: {reason}"
        flow.metadata[ROUTE_KEY] = Route(
            run_id=run_id, actor=actor, upstream=route.upstream, rest=flow.request.path, capability=route.capability
        )
        return True

    def request(self, flow: http.HTTPFlow) -> None:
        route: Route | None = flow.metadata.get(ROUTE_KEY)
        if route is None:
            return
        passing = flow.request.stream
        if isinstance(passing, _Passing) and passing.gathered is not None:
            body: bodies.Body | None = passing.gathered.body()
            passing.gathered = None  # the flow outlives its exchange: only the exchange holds the body, until recorded
        else:
            body = flow.request.raw_content
        flow.metadata[EXCHANGE_KEY] = self._exchange(flow, route, body)
        chunked = flow.request.headers.get("transfer-encoding", "").strip().lower() == "chunked"
        if chunked and isinstance(body, bytes) and len(body) >= self.stream_bytes and not flow.request.trailers:
            # a chunked body mitmproxy buffered goes on with its length: framed as chunks it would be copied whole
            flow.request.headers.pop("transfer-encoding", None)
            flow.request.headers["content-length"] = str(len(body))

    def _exchange(self, flow: http.HTTPFlow, route: Route, body: bodies.Body | None) -> Exchange:
        headers = [(k, v) for k, v in flow.request.headers.items(multi=True) if k.lower() not in _ADDED_HEADERS]
        refused: str | None = flow.metadata.get(REFUSED_KEY)
        return Exchange(
            exchange_id=uuid.uuid4().hex,
            run_id=route.run_id,
            actor=route.actor,
            upstream=route.upstream.name,
            # a refused request reached no upstream: a plain HTTP exchange, never a FHIR interaction or tool call
            kind="http" if refused else route.upstream.kind,
            method=flow.request.method,
            url=flow.request.url,
            path=route.rest,
            request_headers=headers,
            request_body=body,
            started_at=flow.request.timestamp_start or time.time(),
            started_mono_ns=time.monotonic_ns(),
            body_limit=self.max_body_bytes,
            error=refused,
        )

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        exchange: Exchange | None = flow.metadata.get(EXCHANGE_KEY)
        if exchange is None or flow.response is None:
            return
        content_type = flow.response.headers.get("content-type", "")
        if content_type.startswith("text/event-stream"):
            exchange.streamed = True
            flow.response.stream = _StreamTap(self.sink, exchange, self.max_body_bytes)
            return
        declared = _declared_size(flow.response.headers)
        encoding = flow.response.headers.get("content-encoding", "")
        bounded = not encoding or decodes_bounded(encoding)
        if declared is not None and declared >= self.stream_bytes and bounded:
            flow.response.stream = _Held(self, flow, exchange, declared)
        elif declared is None and bounded:  # chunked: mitmproxy would join its pieces, holding it twice
            flow.response.stream = _Held(self, flow, exchange, self.max_body_bytes, declared=False)

    def _refuse_held(self, flow: http.HTTPFlow, exchange: Exchange) -> None:
        """Record a held response whose body passed the limit, then cut the client off: its status and headers
        went before the body, so a 502 can no longer be sent, and an empty body must not look complete."""
        assert flow.response is not None
        exchange.status = flow.response.status_code
        exchange.response_headers = list(flow.response.headers.items(multi=True))
        exchange.error = (
            f"response body is over the proxy's {self.max_body_bytes} byte limit (--max-body-mib); "
            f"the client got its status and headers, then its connection was cut"
        )
        self._trim_due = True
        if self._finish(flow, exchange, replace_response=False) and flow.killable:
            flow.kill()

    def _record_held(self, flow: http.HTTPFlow, exchange: Exchange, body: bodies.Body) -> bool:
        """Record an exchange whose large response body is held; True if the body may now pass."""
        assert flow.response is not None
        exchange.status = flow.response.status_code
        exchange.response_headers = list(flow.response.headers.items(multi=True))
        exchange.response_body = body
        if flow.response.headers.get("content-encoding"):
            self._decode(flow.response, exchange, body)
        return self._finish(flow, exchange, replace_response=False)

    def _decode(self, response: http.Response, exchange: Exchange, raw: bodies.Body) -> None:
        """The decoded copy the log keeps beside an encoded body: gzip, deflate, br and zstd decoded into a map
        bounded by the limit (a bomb is kept encoded only), others the way mitmproxy decodes them."""
        encoding = response.headers.get("content-encoding", "")
        if raw and decodes_bounded(encoding):
            try:
                decoded = decode_bounded(raw, encoding, self.max_body_bytes)
            except ValueError as exc:
                exchange.decode_error = f"cannot decode {encoding}: {exc}"
                return
            if decoded is None:
                exchange.decode_error = (
                    f"cannot decode {encoding}: decoded it is over the proxy's "
                    f"{self.max_body_bytes} byte limit (--max-body-mib); kept encoded only"
                )
            else:
                exchange.decoded_body = decoded if len(decoded) >= self.stream_bytes else decoded.joined()
            return
        try:  # what Response.get_content(strict=True) does, over a body that may have been held
            plain = mitm_encoding.decode(raw if isinstance(raw, bytes) else raw.joined(), encoding)
            if isinstance(plain, str):
                raise ValueError(f"Invalid Content-Encoding: {encoding}")
            exchange.decoded_body = plain
        except ValueError as exc:
            exchange.decode_error = f"cannot decode {encoding}: {exc}"

    def response(self, flow: http.HTTPFlow) -> None:
        exchange: Exchange | None = flow.metadata.get(EXCHANGE_KEY)
        if exchange is None or flow.response is None or exchange.duration_ms is not None:
            return  # a held body's exchange was recorded at the end of its body
        response = flow.response
        exchange.status = response.status_code
        exchange.response_headers = list(response.headers.items(multi=True))
        if exchange.streamed:
            tap = response.stream
            assert isinstance(tap, _StreamTap)
            exchange.response_body = tap.body(self.stream_bytes)
            if tap.over and exchange.body_dropped:
                exchange.error = exchange.body_dropped
            elif tap.over:
                exchange.error = (
                    f"streamed response body is over the proxy's {self.max_body_bytes} byte limit "
                    f"(--max-body-mib): its chunks are recorded, the whole body is not"
                )
        else:
            exchange.response_body = response.raw_content
            if response.headers.get("content-encoding") and response.raw_content is not None:
                self._decode(response, exchange, response.raw_content)
        self._finish(flow, exchange)

    def error(self, flow: http.HTTPFlow) -> None:
        exchange: Exchange | None = flow.metadata.get(EXCHANGE_KEY)
        route: Route | None = flow.metadata.get(ROUTE_KEY)
        message = flow.error.msg if flow.error else "unknown error"
        if _TOO_LARGE in message:  # mitmproxy buffered the body up to the limit, in a stream it lets go only later
            self._trim_due = self._collect_due = True
        if exchange is None and route is not None and _TOO_LARGE in message:
            # refused before its body was read: recorded without it, so a refusal is never silent
            exchange = self._exchange(flow, route, None)
            exchange.status = 413
            declared = flow.request.headers.get("content-length")
            exchange.error = (
                f"request body {f'of {declared} bytes ' if declared else ''}is over the proxy's "
                f"{self.max_body_bytes} byte limit (--max-body-mib); refused with 413, not forwarded"
            )
            self._finish(flow, exchange, replace_response=False)
            return
        if exchange is None or exchange.duration_ms is not None:
            return
        if _TOO_LARGE in message:
            message = (
                f"response body is over the proxy's {self.max_body_bytes} byte limit (--max-body-mib); "
                f"the client got 502"
            )
        exchange.error = message
        self._finish(flow, exchange, replace_response=False)

    def _finish(self, flow: http.HTTPFlow, exchange: Exchange, replace_response: bool = True) -> bool:
        """Record the exchange; if that fails, stop its traffic. True if it was recorded."""
        large = [
            body
            for body in (exchange.request_body, exchange.response_body)
            if body is not None and len(body) >= self.stream_bytes
        ]
        self._trim_due = self._trim_due or bool(large)
        # bytes, not our map: mitmproxy buffered it (a chunked body), and its flow holds it in a cycle
        self._collect_due = self._collect_due or any(isinstance(body, bytes) for body in large)
        exchange.ended_mono_ns = time.monotonic_ns()
        exchange.duration_ms = (exchange.ended_mono_ns - exchange.started_mono_ns) / 1e6
        try:
            self.sink.exchange(exchange)
        except Exception as exc:  # any recording failure must stop the traffic
            if replace_response and not exchange.streamed:
                flow.response = _error_response(502, f"fae proxy: exchange not recorded, so not delivered: {exc}")
            elif flow.killable:
                flow.kill()
            return False
        finally:
            # in the log now, or never: the flow may live on
            exchange.request_body = exchange.response_body = exchange.decoded_body = None
            if flow.response is not None and isinstance(flow.response.stream, _StreamTap):
                flow.response.stream.gathered = None  # a stream cut short: its chunks are recorded
        return True
