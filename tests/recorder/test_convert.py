"""Exchanges become typed events: FHIR interactions, OpenAI calls (streamed or not), MCP tools/call."""

from __future__ import annotations

import json

import pytest

from fae.proxy.exchange import Exchange
from fae.recorder.convert import exchange_events
from fae.recorder.fhir import fhir_event, interaction_of
from fae.recorder.llm import llm_event
from fae.recorder.mcp import mcp_events
from fae.recorder.redact import Redactor


@pytest.mark.parametrize(
    "method, path, body, expected",
    [
        ("POST", "/sandbox/s1/fhir/Patient", None, ("create", "Patient", None, None)),
        ("GET", "/sandbox/s1/fhir/Patient/p1", None, ("read", "Patient", "p1", None)),
        ("GET", "/fhir/Patient/p1/_history/2", None, ("vread", "Patient", "p1", "2")),
        ("GET", "/Patient/p1/_history", None, ("history-instance", "Patient", "p1", None)),
        ("GET", "/Patient/_history", None, ("history-type", "Patient", None, None)),
        ("GET", "/_history", None, ("history-system", None, None, None)),
        ("PUT", "/Slot/s1", None, ("update", "Slot", "s1", None)),
        ("PATCH", "/Slot/s1", None, ("patch", "Slot", "s1", None)),
        ("DELETE", "/Slot/s1", None, ("delete", "Slot", "s1", None)),
        ("GET", "/Slot?status=free&_sort=start", None, ("search-type", "Slot", None, None)),
        ("POST", "/Slot/_search", None, ("search-type", "Slot", None, None)),
        ("GET", "/metadata", None, ("capabilities", None, None, None)),
        ("POST", "/fhir", {"resourceType": "Bundle", "type": "transaction"}, ("transaction", None, None, None)),
        ("POST", "/fhir", {"resourceType": "Bundle", "type": "batch"}, ("batch", None, None, None)),
        ("POST", "/sandbox?id=x", {"resourceType": "Bundle"}, ("sandbox-admin", None, None, None)),
    ],
)
def test_interactions_are_named_from_the_request(method, path, body, expected):
    assert interaction_of(method, path, body) == expected


def test_fhir_outcomes_versions_and_search_ids():
    created = fhir_event(
        "x", "POST", "/Patient", b"{}", 201, [("location", "http://h/fhir/Patient/p1/_history/1")], b""
    )
    assert (created.resource_id, created.version) == ("p1", "1")
    updated = fhir_event(
        "x",
        "PUT",
        "/Patient/p1",
        b"{}",
        200,
        [],
        json.dumps({"resourceType": "Patient", "id": "p1", "meta": {"versionId": "3"}}).encode(),
    )
    assert updated.version == "3"
    bundle = {
        "resourceType": "Bundle",
        "type": "searchset",
        "total": 2,
        "entry": [
            {"resource": {"resourceType": "Slot", "id": "a"}},
            {"resource": {"resourceType": "Slot", "id": "b"}},
            {
                "resource": {
                    "resourceType": "OperationOutcome",
                    "issue": [{"severity": "warning", "code": "not-supported", "diagnostics": "unknown parameter foo"}],
                }
            },
        ],
    }
    found = fhir_event("x", "GET", "/Slot?foo=1", None, 200, [], json.dumps(bundle).encode())
    assert found.search_ids == ("Slot/a", "Slot/b") and found.search_total == 2
    assert found.issues[0].diagnostics == "unknown parameter foo"
    bad = fhir_event(
        "x",
        "POST",
        "/Appointment",
        b"{}",
        422,
        [],
        json.dumps(
            {
                "resourceType": "OperationOutcome",
                "issue": [{"severity": "error", "code": "code-invalid", "expression": ["Appointment.status"]}],
            }
        ).encode(),
    )
    assert bad.status == 422 and bad.issues[0].expression == ("Appointment.status",)
    garbage = fhir_event("x", "GET", "/Patient/p1", None, 502, [], b"<html>bad gateway</html>")
    assert garbage.interaction == "read" and garbage.issues == ()


CHAT_REQUEST = json.dumps(
    {
        "model": "gpt-x",
        "messages": [{"role": "user", "content": "book it"}],
        "tools": [{"type": "function", "function": {"name": "searchResources"}}],
    }
).encode()


def test_llm_non_streamed_tool_call_and_usage():
    reply = {
        "model": "gpt-x-2025",
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "searchResources", "arguments": '{"a": 1}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    event = llm_event("x", "/v1/chat/completions", CHAT_REQUEST, 200, json.dumps(reply).encode(), False, None)
    assert event.api == "chat" and event.model == "gpt-x-2025" and event.tools == ("searchResources",)
    assert event.tool_calls[0].name == "searchResources" and event.tool_calls[0].arguments == '{"a": 1}'
    assert (event.prompt_tokens, event.completion_tokens, event.total_tokens) == (10, 5, 15)
    assert event.finish_reason == "tool_calls" and event.messages[0]["content"] == "book it"


def test_llm_streamed_chunks_are_assembled():
    chunks = [
        {
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "role": "assistant",
                        "tool_calls": [
                            {"index": 0, "id": "c1", "function": {"name": "createResource", "arguments": '{"res'}}
                        ],
                    },
                }
            ],
        },
        {
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'ourceType": "Patient"}'}}]},
                }
            ],
        },
        {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"model": "m", "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"
    event = llm_event("x", "/v1/chat/completions", CHAT_REQUEST, 200, body, True, None)
    assert event.stream and event.finish_reason == "tool_calls" and event.total_tokens == 10
    assert json.loads(event.tool_calls[0].arguments) == {"resourceType": "Patient"}


def test_llm_responses_api_and_errors():
    reply = {
        "model": "m",
        "status": "completed",
        "output": [
            {"type": "function_call", "call_id": "f1", "name": "getResourceById", "arguments": "{}"},
            {"type": "message", "content": [{"type": "output_text", "text": "done"}]},
        ],
        "usage": {"input_tokens": 4, "output_tokens": 2},
    }
    event = llm_event(
        "x",
        "/v1/responses",
        json.dumps({"model": "m", "input": "hi"}).encode(),
        200,
        json.dumps(reply).encode(),
        False,
        None,
    )
    assert event.api == "responses" and event.content == "done" and event.total_tokens == 6
    assert event.tool_calls[0].name == "getResourceById"
    limited = llm_event(
        "x", "/v1/chat/completions", CHAT_REQUEST, 429, b'{"error": {"message": "slow down"}}', False, None
    )
    assert limited.error == "HTTP 429: slow down"
    garbage = llm_event("x", "/v1/chat/completions", CHAT_REQUEST, 200, b"{not json", False, None)
    assert garbage.error == "response body is not valid JSON"


def test_mcp_tools_call_over_json_and_sse():
    request = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "getResourceById", "arguments": {"resourceType": "Patient"}},
        }
    ).encode()
    result = {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"content": [{"type": "text", "text": '{"id": "p1"}'}], "isError": False},
    }
    [event] = mcp_events("x", request, json.dumps(result).encode(), "application/json", "mcp-fhir", None)
    assert event.tool == "getResourceById" and event.result == {"id": "p1"} and not event.is_error
    sse = f"event: message\ndata: {json.dumps(result)}\n\n".encode()
    [streamed] = mcp_events("x", request, sse, "text/event-stream", "mcp-fhir", None)
    assert streamed.result == {"id": "p1"}
    failed = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "boom"}], "isError": True}}
    [bad] = mcp_events("x", request, json.dumps(failed).encode(), "application/json", "m", None)
    assert bad.is_error and bad.error == "boom"
    rpc_error = {"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "unknown tool"}}
    [err] = mcp_events("x", request, json.dumps(rpc_error).encode(), "application/json", "m", None)
    assert err.is_error and err.error == "unknown tool"
    listing = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    assert mcp_events("x", listing, b"{}", "application/json", "m", None) == []


def test_conversion_redacts_before_blobs_are_made():
    exchange = Exchange(
        exchange_id="e",
        run_id="r",
        actor="agent",
        upstream="fhir",
        kind="fhir",
        method="GET",
        url="http://h/fhir/Patient?api_key=SECRET&name=x",
        path="/Patient?api_key=SECRET&name=x",
        request_headers=[("Authorization", "Bearer SECRET")],
        request_body=None,
        started_at=0.0,
        started_mono_ns=0,
        status=200,
        response_headers=[("set-cookie", "s=SECRET")],
        response_body=b'{"resourceType": "Bundle"}',
    )
    events, blobs = exchange_events(exchange, Redactor())
    text = json.dumps([json.loads(__import__("fae.store.events", fromlist=["encode"]).encode(e)) for e in events])
    assert "SECRET" not in text and "[redacted]" in text
    assert all(b"SECRET" not in blob for blob in blobs.values())
    assert [type(e).__name__ for e in events] == ["HttpExchanged", "FhirInteracted"]


def test_a_capability_in_a_body_is_scrubbed_before_the_body_is_hashed():
    """A FHIR reply's links carry the run's capability: the recorder hands the writer a clean body under its own
    hash, so the writer never renames it (each rename is then sought in every later event)."""
    from fae.store.log import blob_hash
    from fae.util.credentials import new_capability

    capability = new_capability()
    link = f"http://127.0.0.1:9/run/r1/agent/{capability}/fhir/sandbox/s/fhir/Patient/p1"
    body = json.dumps({"resourceType": "Patient", "id": "p1", "link": link}).encode()
    exchange = Exchange(
        exchange_id="x",
        run_id="r1",
        actor="agent",
        upstream="fhir",
        kind="fhir",
        method="PUT",
        url="http://127.0.0.1:8/sandbox/s/fhir/Patient/p1",
        path="/sandbox/s/fhir/Patient/p1",
        request_headers=[],
        request_body=body,
        started_at=0.0,
        started_mono_ns=0,
        status=200,
        response_body=body,
    )
    events, blobs = exchange_events(exchange, Redactor())
    clean = body.replace(capability.encode(), b"fae-cap-" + b"redacted" * 4)
    assert blobs == {blob_hash(clean): clean}
    assert (events[0].request_blob, events[0].response_blob) == (blob_hash(clean), blob_hash(clean))
    assert len(clean) == len(body)  # the placeholder keeps the body's size
