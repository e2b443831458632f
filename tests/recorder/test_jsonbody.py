"""A large body read lazily gives the recorder exactly the events a small one decoded whole gives."""

from __future__ import annotations

import mmap

import pytest

from fae.recorder.fhir import fhir_event
from fae.recorder.jsonbody import json_node, parse_json, sse_data, sse_values
from fae.recorder.llm import llm_event
from fae.store.bodies import BODY_FILE_BYTES, Pieces

_ENTRY = b'{"resource":{"resourceType":"Patient","id":"p1","meta":{"versionId":"2"}}}'
SHAPES = {
    "top-level list": b'[{"resourceType":"Patient","id":"p1"}]',
    "id of the wrong type": b'{"resourceType":"Patient","id":[1,{"a":2}],"meta":{"versionId":7}}',
    "meta not an object": b'{"resourceType":"Patient","id":"p1","meta":"v9"}',
    "entries lacking resources": b'{"resourceType":"Bundle","total":2,"entry":[{},{"fullUrl":"x"},5,' + _ENTRY + b"]}",
    "entry not a list": b'{"resourceType":"Bundle","total":1,"entry":{"resource":{"resourceType":"Patient"}}}',
    "outcome entries": b'{"resourceType":"Bundle","entry":[{"resource":{"resourceType":"OperationOutcome",'
    b'"issue":[{"severity":"error","code":"invalid","details":{"text":"bad"}},7]}}]}',
    "outcome": b'{"resourceType":"OperationOutcome","issue":[{"severity":"warning","code":"x","expression":["a",1]}]}',
    "total past a float": b'{"resourceType":"Bundle","total":1e400,"entry":[' + _ENTRY + b"]}",
    "NaN literal": b'{"resourceType":"Bundle","total":NaN,"entry":[' + _ENTRY + b"]}",
    "invalid UTF-8 in a skipped string": b'{"resourceType":"Patient","id":"p1","note":"\xff\xfe"}',
    "UTF-8 BOM": b'\xef\xbb\xbf{"resourceType":"Patient","id":"p1"}',
    "duplicate keys": b'{"resourceType":"Patient","id":"first","id":"second"}',
    "deep nesting": b'{"resourceType":"Patient","id":"p1","deep":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "truncated": b'{"resourceType":"Bundle","entry":[' + _ENTRY,
    "transaction": b'{"resourceType":"Bundle","type":"transaction","entry":[]}',
}


def _large(body: bytes) -> Pieces:
    """The same JSON padded past BODY_FILE_BYTES with whitespace, gathered in a map as the proxy gathers it."""
    padded = body + b" " * (BODY_FILE_BYTES + 10 - len(body)) if len(body) < BODY_FILE_BYTES else body
    gathered = mmap.mmap(-1, len(padded))
    gathered[:] = padded
    return Pieces((memoryview(gathered),))


@pytest.mark.parametrize("name", list(SHAPES))
@pytest.mark.parametrize(("method", "path"), [("GET", "/Patient"), ("PUT", "/Patient/p0"), ("POST", "/")])
def test_a_large_body_gives_the_events_a_small_one_does(name, method, path):
    body = SHAPES[name]
    small = fhir_event("x", method, path, body, 200, [], body)
    large = fhir_event("x", method, path, _large(body), 200, [], _large(body))
    assert large == small, name


def test_the_shapes_reach_the_fields_they_are_about():
    read = fhir_event("x", "PUT", "/Patient/p0", None, 200, [], _large(SHAPES["id of the wrong type"]))
    assert (read.resource_id, read.version) == ([1, {"a": 2}], 7)
    search = fhir_event("x", "GET", "/Patient", None, 200, [], _large(SHAPES["entries lacking resources"]))
    assert (search.search_ids, search.search_total) == (("Patient/p1",), 2)
    outcome = fhir_event("x", "GET", "/Patient", None, 200, [], _large(SHAPES["outcome entries"]))
    assert [i.diagnostics for i in outcome.issues] == ["bad"]
    assert fhir_event("x", "POST", "/", _large(SHAPES["transaction"]), 200, [], None).interaction == "transaction"


def test_odd_shapes_decode_as_json_loads_decodes_them():
    assert parse_json(_large(SHAPES["total past a float"]))["total"] == float("inf")
    assert parse_json(_large(SHAPES["duplicate keys"]))["id"] == "second"
    assert parse_json(_large(SHAPES["UTF-8 BOM"]))["id"] == "p1"
    for not_json in ("invalid UTF-8 in a skipped string", "deep nesting", "truncated"):
        assert json_node(_large(SHAPES[not_json])) is None and parse_json(SHAPES[not_json]) is None, not_json


@pytest.mark.parametrize(
    "body",
    [
        b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"t"}]}',
        b'{"model":"m","input":"just text"}',
        b'["not", "an", "object"]',
        b'{"model":"m","messages":"\xff"}',
    ],
)
def test_a_large_llm_body_gives_the_event_a_small_one_does(body):
    reply = (
        b'{"model":"m2","choices":[{"message":{"content":"ok","tool_calls":[{"id":"c","function":'
        b'{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}'
    )
    small = llm_event("x", "/v1/chat/completions", body, 200, reply, False, None)
    assert llm_event("x", "/v1/chat/completions", _large(body), 200, _large(reply), False, None) == small
    sse = b"\n" * 10 + b'data: {"model":"m3","choices":[{"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n'
    assert llm_event("x", "/v1/chat/completions", body, 200, _large(sse), False, None) == llm_event(
        "x", "/v1/chat/completions", body, 200, sse, False, None
    )


def test_server_sent_events_are_read_an_event_at_a_time_from_a_gathered_body():
    """Events end at a blank line however its newlines are written; a field may span lines; junk is skipped."""
    stream = (
        b'data: {"a": 1}\r\n\r\n'  # CRLF
        b"event: x\ndata: [1,\ndata: 2]\n\n"  # one payload over two data lines
        b'data: {"t": "\xe4\xb8\xad"}\n\r\n'  # mixed newlines; UTF-8 kept whole
        b": a comment\n\n\n"
        b"data: not json\n\n"
        b"data: [DONE]\n\n"
        b'data: {"last": true}'
    )  # no blank line at the end
    expected = [{"a": 1}, [1, 2], {"t": "\u4e2d"}, {"last": True}]
    assert sse_data(stream) == expected
    assert list(sse_values(Pieces((memoryview(stream),)))) == expected  # a gathered map, never copied whole
    assert sse_data(None) == [] and list(sse_values(b"")) == []
