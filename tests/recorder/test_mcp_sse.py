"""Legacy-SSE tool calls become ToolCalled: pairing units over Exchange values, then through a real proxy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.sse import sse_client

from fae.mcp.specs_server import specs_mcp_http_app
from fae.proxy.exchange import Exchange
from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.convert import exchange_events
from fae.recorder.mcp_sse import STREAM_CLOSED, SsePairing
from fae.recorder.recorder import Recorder
from fae.recorder.redact import Redactor
from fae.store.events import ToolCalled
from fae.store.log import EventLog
from fae.store.writer import open_writer
from fae.util.serve import serve_asgi


def stream(exchange_id: str = "get-1", upstream: str = "mcp-fhir") -> Exchange:
    return Exchange(exchange_id=exchange_id, run_id="r1", actor="agent", upstream=upstream, kind="mcp",
                    method="GET", url="http://up/sse", path="/sse", request_headers=[], request_body=None,
                    started_at=0.0, started_mono_ns=0)


def post(exchange_id: str, messages, session: str = "s1", upstream: str = "mcp-fhir", run: str = "r1") -> Exchange:
    body = json.dumps(messages).encode()
    return Exchange(exchange_id=exchange_id, run_id=run, actor="agent", upstream=upstream, kind="mcp",
                    method="POST", url=f"http://up/messages/?session_id={session}",
                    path=f"/messages/?session_id={session}", request_headers=[], request_body=body,
                    started_at=0.0, started_mono_ns=0, status=202, response_body=b"Accepted")


def call(rpc_id, tool: str = "getResourceById") -> dict:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call",
            "params": {"name": tool, "arguments": {"resourceType": "Patient", "resourceId": "p1"}}}


def reply(rpc_id, value=None, is_error: bool = False) -> bytes:
    result = {"content": [{"type": "text", "text": json.dumps(value or {"id": "p1"})}], "isError": is_error}
    return f"event: message\ndata: {json.dumps({'jsonrpc': '2.0', 'id': rpc_id, 'result': result})}\n\n".encode()


ENDPOINT = b"event: endpoint\r\ndata: /run/r1/agent/mcp-fhir/messages/?session_id=s1\r\n\r\n"


def test_a_reply_after_the_post_pairs_on_the_stream():
    pairing, get = SsePairing(), stream()
    assert pairing.chunk(get, ENDPOINT) == []
    assert pairing.finished(post("post-1", call(7))) == []
    [(owner, event)] = pairing.chunk(get, reply(7, {"id": "p1", "resourceType": "Patient"}))
    assert (owner.run_id, owner.actor, owner.exchange_id) == ("r1", "agent", "post-1")
    assert event == ToolCalled(tool="getResourceById", exchange_id="post-1",
                               arguments={"resourceType": "Patient", "resourceId": "p1"},
                               result={"id": "p1", "resourceType": "Patient"}, server="mcp-fhir")


def test_a_reply_before_the_post_closes_pairs_when_it_does():
    pairing, get = SsePairing(), stream()
    pairing.chunk(get, ENDPOINT)
    data = reply("a", {"error": "NOT_FOUND"}, is_error=True)
    assert pairing.chunk(get, data[:20]) == [] and pairing.chunk(get, data[20:]) == []  # split across chunks
    [(_, event)] = pairing.finished(post("post-1", call("a")))
    assert event.is_error and event.result == {"error": "NOT_FOUND"} and event.exchange_id == "post-1"


def test_only_tool_calls_become_events_and_ids_stay_in_their_session():
    pairing, one, two = SsePairing(), stream("get-1"), stream("get-2")
    pairing.chunk(one, ENDPOINT)
    pairing.chunk(two, b"event: endpoint\ndata: /messages/?session_id=s2\n\n")
    pairing.finished(post("init", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    assert pairing.chunk(one, reply(1)) == []  # a reply to tools/list is no tool call
    pairing.finished(post("post-s1", call(2), session="s1"))
    assert pairing.chunk(two, reply(2)) == []  # the same id in another session is not its reply
    [(owner, _)] = pairing.chunk(one, reply(2))
    assert owner.exchange_id == "post-s1"


def test_a_stream_of_another_upstream_does_not_answer():
    pairing, other = SsePairing(), stream("get-9", upstream="mcp-specs")
    pairing.chunk(other, ENDPOINT)
    pairing.finished(post("post-1", call(3)))
    assert pairing.chunk(other, reply(3)) == []


def test_calls_unanswered_when_the_stream_closes_are_errors():
    pairing, get = SsePairing(), stream()
    pairing.chunk(get, ENDPOINT)
    pairing.finished(post("post-1", [call(4), call(5, "searchResources")]))
    pairing.chunk(get, reply(4))
    [(owner, event)] = pairing.finished(get)
    assert owner.exchange_id == "post-1" and event.tool == "searchResources"
    assert event.is_error and event.error == STREAM_CLOSED
    assert pairing.finished(get) == []  # closed once


def test_the_post_alone_makes_no_false_error_event():
    events, _ = exchange_events(post("post-1", call(1)), Redactor())
    assert not any(isinstance(event, ToolCalled) for event in events)


@pytest.mark.anyio
async def test_sse_tool_calls_through_the_recording_proxy_are_tool_called(tmp_path: Path):
    path = tmp_path / "log.duckdb"
    log = EventLog(path)
    async with serve_asgi(specs_mcp_http_app()) as port:
        upstreams = {"mcp-specs": Upstream("mcp-specs", f"http://127.0.0.1:{port}", "mcp")}
        async with (open_writer(log) as writer, run_proxy(upstreams, Recorder(writer)) as proxy,
                    Client(sse_client(proxy.url("r1", "agent", "mcp-specs", "sse"))) as client):
            found = await client.call_tool("getStructureDefinition", {"resourceType": "patient"})
            missing = await client.call_tool("getStructureDefinition", {"resourceType": "nope"})
    log.close()
    assert not found.is_error and missing.is_error
    with EventLog(path, read_only=True) as opened:
        _, rows = opened.query("SELECT run_id, actor, upstream, payload FROM events WHERE kind = 'ToolCalled'"
                               " ORDER BY seq")
        _, posts = opened.query("SELECT payload->>'$.exchange_id' FROM events WHERE kind = 'HttpExchanged'"
                                " AND payload->>'$.method' = 'POST'")
    calls = [(run, actor, upstream, json.loads(payload)) for run, actor, upstream, payload in rows]
    assert [(c[0], c[1], c[2]) for c in calls] == [("r1", "agent", "mcp-specs")] * 2, calls
    first, second = (c[3] for c in calls)
    assert first["tool"] == "getStructureDefinition" and first["arguments"] == {"resourceType": "patient"}
    assert not first.get("is_error") and first["result"]["resourceType"] == "Patient"
    assert second["is_error"] and second["result"]["error"] == "NOT_FOUND"
    assert {first["exchange_id"], second["exchange_id"]} <= {p for (p,) in posts}
