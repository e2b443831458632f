"""The request and response values the engine trades in, and the JSON helpers they need."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import parse_qsl

import msgspec

from fae.fhir.budget import UNLIMITED, Budget
from fae.fhir.outcome import FhirProblem
from fae.fhir.types import Resource

JSON_TYPE = "application/fhir+json; charset=utf-8"
# the default largest request body: room for a 10,000-entry Synthea-style Bundle
MAX_BODY = 64 * 1024 * 1024
Clock = Callable[[], datetime]

_ENCODER = msgspec.json.Encoder()


def instant(moment: datetime) -> str:
    """A FHIR instant (UTC, milliseconds) for a datetime."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def deep_copy(obj: Resource) -> Resource:
    """A deep copy of JSON data; a msgspec round trip is several times faster than copy.deepcopy."""
    return msgspec.json.decode(_ENCODER.encode(obj))


def dumps(obj: object) -> bytes:
    return _ENCODER.encode(obj)


@dataclass
class FhirResponse:
    """An HTTP answer: status, headers and body bytes (FHIR JSON or empty)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> object:
        return json.loads(self.body) if self.body else None


@dataclass
class Request:
    """One parsed interaction against a sandbox."""

    method: str
    segments: list[str]
    pairs: list[tuple[str, str]]
    headers: dict[str, str]
    body: bytes | None
    base: str
    budget: Budget = UNLIMITED

    def prefer(self, key: str) -> str | None:
        for part in self.headers.get("prefer", "").split(","):
            name, _, value = part.strip().partition("=")
            if name.strip().lower() == key:
                return value.strip().strip('"').lower()
        return None

    @property
    def strict(self) -> bool:
        """An unknown search parameter is refused (400), as HAPI FHIR does, unless the client sends
        ``Prefer: handling=lenient`` (FHIR R4 search, "Handling errors"): then it is ignored and said so."""
        return self.prefer("handling") != "lenient"


def parse_request(
    method: str,
    path: str,
    query: str,
    headers: dict[str, str],
    body: bytes | None,
    base_url: str,
    budget: Budget = UNLIMITED,
) -> Request:
    """A `Request` from raw HTTP parts (headers lower-cased); a FhirProblem for what cannot be served."""
    try:
        pairs = parse_qsl(query or "", keep_blank_values=True, strict_parsing=False, max_num_fields=1000)
    except ValueError as exc:
        raise FhirProblem(400, f"Malformed query string: {exc}") from None
    segments = [s for s in path.strip("/").split("/") if s] if path else []
    if any(s in (".", "..") for s in segments):
        raise FhirProblem(400, "Path segments '.' and '..' are not allowed")
    fmt = next((v for k, v in pairs if k == "_format"), "")
    accept = headers.get("accept", "")
    if "xml" in fmt or ("xml" in accept and "json" not in accept and "*/*" not in accept):
        raise FhirProblem(415, "Only FHIR JSON is supported (application/fhir+json)", code="not-supported")
    if body and "xml" in headers.get("content-type", ""):
        raise FhirProblem(415, "Only FHIR JSON bodies are supported (application/fhir+json)", code="not-supported")
    verb = method.upper()
    # HEAD is answered as GET; the HTTP layer drops the body
    return Request("GET" if verb == "HEAD" else verb, segments, pairs, headers, body, base_url.rstrip("/"), budget)


def respond(status: int, payload: object | None, headers: dict[str, str] | None = None) -> FhirResponse:
    out = {"Content-Type": JSON_TYPE} if payload is not None else {}
    out.update(headers or {})
    return FhirResponse(status, out, dumps(payload) if payload is not None else b"")


def error_response(problem: FhirProblem) -> FhirResponse:
    return FhirResponse(problem.status, {"Content-Type": JSON_TYPE}, dumps(problem.outcome()))
