"""Exchange → events: pure, and redaction happens first."""

from __future__ import annotations

from mitmproxy.net import encoding

from fae.proxy.exchange import Exchange
from fae.recorder.fhir import fhir_event
from fae.recorder.llm import llm_event
from fae.recorder.mcp import mcp_events
from fae.recorder.mcp_sse import posted_session
from fae.recorder.redact import Redactor
from fae.store.bodies import BODY_FILE_BYTES, Body, Pieces
from fae.store.events import Event, Header, HttpExchanged
from fae.store.log import blob_hash
from fae.store.secrets import scrub_credentials


def _header(headers: list[tuple[str, str]], name: str) -> str:
    for key, value in headers:
        if key.lower() == name:
            return value
    return ""


def _whole(body: Body | None) -> bytes | None:
    """One bytes value for the parsers (a large body kept in pieces is joined only here)."""
    return body.joined() if isinstance(body, Pieces) else body


def _large(body: Body | None, digest: str | None) -> str | None:
    """The body's hash if it is large enough for a side file (an event then names it instead of holding it)."""
    return digest if body is not None and len(body) >= BODY_FILE_BYTES else None


def _scrubbed(body: Body | None) -> Body | None:
    """A body held whole, with fae's credentials scrubbed before it is hashed or parsed (a large one is scrubbed
    as it is stored, ``fae.store.bodies``; other secrets, by the writer)."""
    return scrub_credentials(body) if isinstance(body, bytes) else body


def _scrub_encoded(exchange: Exchange, redactor: Redactor) -> tuple[Body | None, Body | None]:
    """(raw, decoded) response bodies; a compressed body whose decoded copy held a secret is re-encoded clean."""
    raw, decoded = exchange.response_body, exchange.decoded_body
    if decoded is None:
        return _scrubbed(raw), None
    if isinstance(decoded, Pieces) and not redactor.secrets.found_in(decoded):
        return raw, decoded  # a large decoded body is scrubbed as it is stored (fae.store.bodies)
    clean = redactor.secrets.scrub_bytes(_whole(decoded) or b"")
    if clean is decoded:
        return raw, decoded
    try:
        reencoded = encoding.encode(clean, _header(exchange.response_headers, "content-encoding"))
    except (ValueError, TypeError):
        reencoded = None  # cannot re-encode it: the compressed copy is dropped rather than kept with the secret
    return reencoded if isinstance(reencoded, bytes) else None, clean


def exchange_events(exchange: Exchange, redactor: Redactor) -> tuple[list[Event], dict[str, Body]]:
    """The events one exchange becomes, and the bodies they point at."""
    blobs: dict[str, Body] = {}

    def keep(body: Body | None) -> str | None:
        if body is None:
            return None
        digest = blob_hash(body)
        blobs[digest] = body
        return digest

    request_headers = redactor.header_list(exchange.request_headers)
    url, path = redactor.url(exchange.url), redactor.path(exchange.path)
    response_headers = redactor.header_list(exchange.response_headers)
    raw_body, decoded_body = _scrub_encoded(exchange, redactor)
    request_body = _scrubbed(exchange.request_body)
    stored_response = decoded_body if decoded_body is not None else raw_body
    http = HttpExchanged(
        exchange_id=exchange.exchange_id,
        method=exchange.method,
        url=url,
        path=path,
        request_headers=tuple(Header(k, v) for k, v in request_headers),
        request_blob=keep(request_body),
        request_size=len(exchange.request_body or b""),
        status=exchange.status,
        response_headers=tuple(Header(k, v) for k, v in response_headers),
        response_blob=keep(raw_body),
        response_size=len(exchange.response_body or b""),
        decoded_blob=keep(decoded_body),
        decode_error=exchange.decode_error,
        streamed=exchange.streamed,
        chunk_count=len(exchange.chunks),
        error=exchange.error,
        started_at=exchange.started_at,
        duration_ms=exchange.duration_ms,
        fault=exchange.fault,
    )
    events: list[Event] = [http]
    if exchange.kind not in ("fhir", "llm", "mcp"):
        return events, blobs
    if exchange.kind == "fhir":  # a large body is read where it lies (fae.recorder.jsonbody), never joined
        events.append(
            fhir_event(
                exchange.exchange_id,
                exchange.method,
                exchange.path,
                request_body,
                exchange.status,
                response_headers,
                stored_response,
            )
        )
    elif exchange.kind == "llm":
        events.append(
            llm_event(
                exchange.exchange_id,
                exchange.path,
                request_body,
                exchange.status,
                stored_response,
                exchange.streamed,
                exchange.error,
                request_blob=_large(request_body, http.request_blob),
                response_blob=_large(stored_response, http.decoded_blob or http.response_blob),
            )
        )
    elif exchange.kind == "mcp" and posted_session(exchange) is None:  # a legacy-SSE POST: see mcp_sse
        large = any(
            body is not None and len(body) >= BODY_FILE_BYTES for body in (request_body, stored_response)
        )  # read where it lies, never joined
        events.extend(
            mcp_events(
                exchange.exchange_id,
                request_body,
                stored_response,
                _header(response_headers, "content-type"),
                exchange.upstream,
                exchange.error,
                (http.request_blob, http.decoded_blob or http.response_blob) if large else None,
            )
        )
    return events, blobs
