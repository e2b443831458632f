"""OTLP trace requests from plain span values: the OTLP/JSON document and the protobuf wire bytes of one
``ExportTraceServiceRequest``, written by fae itself.

Only the fields fae sets are written: request → resource spans → one resource and one scope → spans, each with
its attributes, events and status. Field numbers are those of OTLP's ``trace.proto``, ``common.proto`` and
``resource.proto`` (v1, stable); JSON follows the protobuf JSON mapping with OTLP's two departures (trace and span
ids as hex, enums as numbers). No OpenTelemetry package is needed at run time: the generated protobuf
classes encode a span about as fast as this (40 against 45 µs), but their JSON mapping is five times slower than
this writer's and writes base64 ids, which OTLP/JSON does not take (docs/otel.md). tests/report/test_otel.py
decodes every file and request with the official ``opentelemetry-proto``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from fae.util.utf8 import utf8_json
from fae.util.utf8 import utf8_text as text

Value = str | bool | int | float | list[str] | list[int] | list[float] | list[bool]
"""An attribute value: a primitive or a homogeneous list of primitives (OTLP's ``AnyValue``)."""

Attributes = list[tuple[str, Value]]

INTERNAL, SERVER, CLIENT = 1, 2, 3
"""``Span.SpanKind`` values."""
UNSET, OK, ERROR = 0, 1, 2
"""``Status.StatusCode`` values."""


@dataclass(slots=True)
class SpanEvent:
    time_ns: int
    name: str
    attributes: Attributes = field(default_factory=list)


@dataclass(slots=True)
class SpanData:
    """One span: ids are 16 bytes (trace) and 8 bytes (span, parent; ``b""`` for a root)."""

    trace_id: bytes
    span_id: bytes
    parent_id: bytes
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: Attributes = field(default_factory=list)
    events: list[SpanEvent] = field(default_factory=list)
    status_code: int = UNSET
    status_message: str = ""


def attrs(**values: Value | None) -> Attributes:
    """Attributes from keyword names (``__`` for ``.``), the None ones left out."""
    return [(key.replace("__", "."), value) for key, value in values.items() if value is not None]


# -- JSON ---------------------------------------------------------------------------------------------------------


def _double_json(value: float) -> float | str:
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _any_json(value: Value) -> dict:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": _double_json(value)}
    if isinstance(value, str):
        return {"stringValue": value}
    return {"arrayValue": {"values": [_any_json(item) for item in value]}}


def _attributes_json(attributes: Attributes) -> list[dict]:
    return [{"key": key, "value": _any_json(value)} for key, value in attributes]


def _span_json(span: SpanData) -> dict:
    found: dict = {
        "traceId": span.trace_id.hex(),
        "spanId": span.span_id.hex(),
        "name": span.name,
        "kind": span.kind,
        "startTimeUnixNano": str(span.start_ns),
        "endTimeUnixNano": str(span.end_ns),
        "attributes": _attributes_json(span.attributes),
        "status": {"code": span.status_code},
    }
    if span.parent_id:
        found["parentSpanId"] = span.parent_id.hex()
    if span.events:
        found["events"] = [
            {"timeUnixNano": str(e.time_ns), "name": e.name, "attributes": _attributes_json(e.attributes)}
            for e in span.events
        ]
    if span.status_message:
        found["status"]["message"] = span.status_message
    return found


def request_json(resource: Attributes, scope: tuple[str, str], schema_url: str, spans: Sequence[SpanData]) -> bytes:
    """One ``ExportTraceServiceRequest`` as OTLP/JSON (one line: no newline inside)."""
    document: dict = {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes_json(resource)},
                "scopeSpans": [
                    {
                        "scope": {"name": scope[0], "version": scope[1]},
                        "spans": [_span_json(span) for span in spans],
                        "schemaUrl": schema_url,
                    }
                ],
                "schemaUrl": schema_url,
            }
        ]
    }
    return utf8_json(document)  # OTLP strings are UTF-8: a lone surrogate becomes U+FFFD


# -- protobuf -----------------------------------------------------------------------------------------------------

_FIXED64 = struct.Struct("<Q")
_DOUBLE = struct.Struct("<d")


def _varint(number: int) -> bytes:
    number &= 0xFFFF_FFFF_FFFF_FFFF  # a negative int64 is its two's complement, ten bytes long
    out = bytearray()
    while number > 0x7F:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(payload)) + payload


def _string_field(number: int, value: str) -> bytes:
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError:
        encoded = text(value).encode("utf-8")
    return _bytes_field(number, encoded)


def _fixed64_field(number: int, value: int) -> bytes:
    return _tag(number, 1) + _FIXED64.pack(value & 0xFFFF_FFFF_FFFF_FFFF)


def _any_proto(value: Value) -> bytes:
    """An ``AnyValue``: string 1, bool 2, int 3, double 4, array 5 (``ArrayValue.values`` 1)."""
    if isinstance(value, bool):
        return _tag(2, 0) + _varint(int(value))
    if isinstance(value, int):
        return _tag(3, 0) + _varint(value)
    if isinstance(value, float):
        return _tag(4, 1) + _DOUBLE.pack(value)
    if isinstance(value, str):
        return _string_field(1, value)
    return _bytes_field(5, b"".join(_bytes_field(1, _any_proto(item)) for item in value))


def _attributes_proto(number: int, attributes: Attributes) -> bytes:
    """Repeated ``KeyValue`` (key 1, value 2) in field ``number``."""
    return b"".join(
        _bytes_field(number, _string_field(1, key) + _bytes_field(2, _any_proto(value))) for key, value in attributes
    )


def _span_proto(span: SpanData) -> bytes:
    """A ``Span``: trace_id 1, span_id 2, parent_span_id 4, name 5, kind 6, start 7, end 8, attributes 9,
    events 11 (time 1, name 2, attributes 3), status 15 (message 2, code 3)."""
    parts = [_bytes_field(1, span.trace_id), _bytes_field(2, span.span_id)]
    if span.parent_id:
        parts.append(_bytes_field(4, span.parent_id))
    parts += [
        _string_field(5, span.name),
        _tag(6, 0) + _varint(span.kind),
        _fixed64_field(7, span.start_ns),
        _fixed64_field(8, span.end_ns),
        _attributes_proto(9, span.attributes),
    ]
    for event in span.events:
        body = _fixed64_field(1, event.time_ns) + _string_field(2, event.name) + _attributes_proto(3, event.attributes)
        parts.append(_bytes_field(11, body))
    status = (_string_field(2, span.status_message) if span.status_message else b"") + (
        _tag(3, 0) + _varint(span.status_code) if span.status_code else b""
    )
    parts.append(_bytes_field(15, status))
    return b"".join(parts)


def request_proto(resource: Attributes, scope: tuple[str, str], schema_url: str, spans: Sequence[SpanData]) -> bytes:
    """One ``ExportTraceServiceRequest`` in the protobuf wire format: resource_spans 1 → (resource 1 → attributes
    1; scope_spans 2 → (scope 1 → name 1, version 2; spans 2; schema_url 3); schema_url 3)."""
    scope_message = _string_field(1, scope[0]) + _string_field(2, scope[1])
    scope_spans = (
        _bytes_field(1, scope_message)
        + b"".join(_bytes_field(2, _span_proto(span)) for span in spans)
        + _string_field(3, schema_url)
    )
    resource_spans = (
        _bytes_field(1, _attributes_proto(1, resource)) + _bytes_field(2, scope_spans) + _string_field(3, schema_url)
    )
    return _bytes_field(1, resource_spans)


# -- the endpoint's answer ----------------------------------------------------------------------------------------


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    number = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[at]
        number |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return number, at


def _fields(data: bytes) -> dict[int, int | bytes]:
    """The last value of each field of one protobuf message (varints and length-delimited; fixed ones skipped)."""
    found: dict[int, int | bytes] = {}
    at = 0
    while at < len(data):
        key, at = _read_varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            found[number], at = _read_varint(data, at)
        elif wire == 2:
            size, at = _read_varint(data, at)
            found[number], at = data[at : at + size], at + size
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return found


def partial_success(body: bytes, protocol: str) -> tuple[int, str]:
    """Rejected spans and the message of an ``ExportTraceServiceResponse`` (partial_success 1 → rejected_spans 1,
    error_message 2); (0, "") for an empty or unreadable answer, which OTLP counts as full success."""
    try:
        if protocol.endswith("json"):
            answer = msgspec.json.decode(body) if body.strip() else {}
            partial = answer.get("partialSuccess") or {} if isinstance(answer, dict) else {}
            return int(partial.get("rejectedSpans") or 0), str(partial.get("errorMessage") or "")
        partial_bytes = _fields(body).get(1, b"")
        partial_fields = _fields(partial_bytes) if isinstance(partial_bytes, bytes) else {}
        rejected, message = partial_fields.get(1, 0), partial_fields.get(2, b"")
        return (
            int(rejected) if isinstance(rejected, int) else 0,
            message.decode("utf-8", "replace") if isinstance(message, bytes) else "",
        )
    except (ValueError, TypeError, AttributeError, msgspec.DecodeError):
        return 0, ""
