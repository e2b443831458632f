"""Defensive JSON decoding of recorded bodies, lazily for large ones.

A body under ``BODY_FILE_BYTES`` is decoded whole with ``json.loads``. A
larger one (a Bundle of thousands of resources, a Binary's base64) would cost
Python several times its size as objects, while the recorder needs only a few
fields: it is checked once (UTF-8, and JSON syntax by msgspec, building
nothing), and each field the recorder reads is decoded on its own when read
(``members``, ``items``, ``value``). Both give the same values: where msgspec
is stricter than ``json.loads`` (a ``NaN`` literal, a number out of a float's
range, UTF-16), the body or the field is decoded by ``json.loads`` instead.
A body nested too deeply for either counts as not JSON.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import Any

import msgspec

from fae.store.bodies import BODY_FILE_BYTES, Body, Pieces, body_slices

_NOT_JSON = object()
_CHECK = msgspec.json.Decoder(msgspec.Raw)
_OBJECT = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ARRAY = msgspec.json.Decoder(list[msgspec.Raw])
_ANY = msgspec.json.Decoder()
_LAX_LITERAL = re.compile(rb"NaN|Infinity")
_BOM = codecs.BOM_UTF8
SSE_EVENT_END = re.compile(rb"\r?\n\r?\n")
"""The blank line that ends a server-sent event (each line ending LF or CRLF)."""


def buffer_of(body: Body) -> bytes | memoryview:
    """The body as one buffer: a body gathered in one piece is not copied."""
    if isinstance(body, Pieces):
        return body.parts[0] if len(body.parts) == 1 else body.joined()
    return body


def _utf8(body: Body) -> bool:
    """Whether the body decodes as UTF-8 the way ``json.loads`` decodes bytes, checked a slice at a time."""
    decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")
    try:
        for piece in body_slices(body):
            decoder.decode(piece)
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _loads(data: bytes | memoryview) -> Any:
    try:
        return json.loads(bytes(data))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return _NOT_JSON


def json_node(body: Body | None) -> Any:
    """The body's JSON value, or None when it is empty or not JSON; a large body's value is left undecoded
    (a ``msgspec.Raw``), to be read with ``members``, ``items`` and ``value``."""
    if not body:
        return None
    if len(body) < BODY_FILE_BYTES:
        parsed = _loads(buffer_of(body))
        return None if parsed is _NOT_JSON else parsed
    whole = buffer_of(body)
    if json.detect_encoding(bytes(whole[:4])) not in ("utf-8", "utf-8-sig"):
        parsed = _loads(whole)  # UTF-16 or UTF-32: rare enough to decode whole
        return None if parsed is _NOT_JSON else parsed
    if not _utf8(body):
        return None
    start = len(_BOM) if bytes(whole[: len(_BOM)]) == _BOM else 0
    try:
        return _CHECK.decode(memoryview(whole)[start:])
    except msgspec.DecodeError:
        if _LAX_LITERAL.search(whole) is None:
            return None  # not JSON to json.loads either
    except RecursionError:
        return None
    parsed = _loads(whole)
    return None if parsed is _NOT_JSON else parsed


def value(node: Any) -> Any:
    """A node decoded whole."""
    if not isinstance(node, msgspec.Raw):
        return node
    try:
        return _ANY.decode(node)
    except msgspec.DecodeError:
        return _loads(node)  # a number past a float's range: json.loads makes it inf
    except RecursionError:
        return None


def members(node: Any) -> dict[str, Any] | None:
    """An object's members (their values as nodes), or None when the node is not an object."""
    if isinstance(node, msgspec.Raw):
        try:
            return _OBJECT.decode(node)
        except (msgspec.DecodeError, RecursionError):
            return None
    return node if isinstance(node, dict) else None


def items(node: Any) -> list[Any] | None:
    """An array's items (as nodes), or None when the node is not an array."""
    if isinstance(node, msgspec.Raw):
        try:
            return _ARRAY.decode(node)
        except (msgspec.DecodeError, RecursionError):
            return None
    return node if isinstance(node, list) else None


def field(node: Any, name: str) -> Any:
    """One member of an object decoded whole (None when absent or not an object), like ``dict.get``."""
    found = members(node)
    return value(found.get(name)) if found is not None else None


def parse_json(body: Body | None) -> Any:
    """The JSON value of a body decoded whole, or None when it is empty or not JSON."""
    return value(json_node(body))


def sse_values(body: Body | None) -> Iterator[Any]:
    """The JSON payloads of a server-sent-event stream's ``data:`` fields, in order, an event at a time
    (a large stream is never decoded whole: events end at a blank line, so a slice is whole UTF-8)."""
    if not body:
        return
    whole = buffer_of(body)
    start = 0
    for found in SSE_EVENT_END.finditer(whole):
        yield from _event_data(whole[start : found.start()])
        start = found.end()
    yield from _event_data(whole[start:])


def _event_data(raw: bytes | memoryview) -> Iterator[Any]:
    block = bytes(raw).decode("utf-8", errors="replace").replace("\r\n", "\n")
    data = "\n".join(line[5:].lstrip() for line in block.split("\n") if line.startswith("data:"))
    if not data or data == "[DONE]":
        return
    try:
        yield json.loads(data)
    except ValueError:
        return


def sse_data(body: Body | None) -> list[Any]:
    """The JSON payloads of a server-sent-event stream's ``data:`` fields, in order."""
    return list(sse_values(body))
