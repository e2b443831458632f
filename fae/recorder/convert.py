"""Exchange → events: pure, and redaction happens first."""

from __future__ import annotations

from fae.proxy.exchange import Exchange
from fae.recorder.fhir import fhir_event
from fae.recorder.llm import llm_event
from fae.recorder.mcp import mcp_events
from fae.recorder.mcp_sse import posted_session
from fae.recorder.redact import Redactor
from fae.store.events import Event, Header, HttpExchanged
from fae.store.log import blob_hash


def _header(headers: list[tuple[str, str]], name: str) -> str:
    for key, value in headers:
        if key.lower() == name:
            return value
    return ""


def exchange_events(exchange: Exchange, redactor: Redactor) -> tuple[list[Event], dict[str, bytes]]:
    """The events one exchange becomes, and the bodies they point at."""
    blobs: dict[str, bytes] = {}

    def keep(body: bytes | None) -> str | None:
        if body is None:
            return None
        digest = blob_hash(body)
        blobs[digest] = body
        return digest

    request_headers = redactor.header_list(exchange.request_headers)
    response_headers = redactor.header_list(exchange.response_headers)
    response_body = exchange.decoded_body if exchange.decoded_body is not None else exchange.response_body
    http = HttpExchanged(
        exchange_id=exchange.exchange_id,
        method=exchange.method,
        url=redactor.url(exchange.url),
        path=redactor.path(exchange.path),
        request_headers=tuple(Header(k, v) for k, v in request_headers),
        request_blob=keep(exchange.request_body),
        request_size=len(exchange.request_body or b""),
        status=exchange.status,
        response_headers=tuple(Header(k, v) for k, v in response_headers),
        response_blob=keep(exchange.response_body),
        response_size=len(exchange.response_body or b""),
        decoded_blob=keep(exchange.decoded_body),
        decode_error=exchange.decode_error,
        streamed=exchange.streamed,
        chunk_count=len(exchange.chunks),
        error=exchange.error,
        started_at=exchange.started_at,
        duration_ms=exchange.duration_ms,
    )
    events: list[Event] = [http]
    if exchange.kind == "fhir":
        events.append(fhir_event(exchange.exchange_id, exchange.method, exchange.path,
                                 exchange.request_body, exchange.status, response_headers, response_body))
    elif exchange.kind == "llm":
        events.append(llm_event(exchange.exchange_id, exchange.path, exchange.request_body,
                                exchange.status, response_body, exchange.streamed, exchange.error))
    elif exchange.kind == "mcp" and posted_session(exchange) is None:  # a legacy-SSE POST: see mcp_sse
        events.extend(mcp_events(exchange.exchange_id, exchange.request_body, response_body,
                                 _header(response_headers, "content-type"), exchange.upstream,
                                 exchange.error))
    return events, blobs
