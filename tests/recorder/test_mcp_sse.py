"""Legacy-SSE tool calls become ToolCalled: pairing units over Exchange values, then through a real proxy."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.sse import sse_client

from fae.mcp.specs_server import specs_mcp_http_app
from fae.proxy.exchange import Exchange
from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder import mcp_sse
from fae.recorder.convert import exchange_events
from fae.recorder.jsonbody import buffer_of
from fae.recorder.mcp import tool_in_full, tool_result_value
from fae.recorder.mcp_sse import OVER_LIMIT, STREAM_CLOSED, SsePairing
from fae.recorder.recorder import Recorder
from fae.recorder.redact import Redactor
from fae.store.bodies import BODY_FILE_BYTES
from fae.store.events import ToolCalled
from fae.store.log import EventLog, blob_hash
from fae.store.writer import open_writer
from fae.util.serve import serve_asgi


def stream(exchange_id: str = "get-1", upstream: str = "mcp-fhir") -> Exchange:
    return Exchange(
        exchange_id=exchange_id,
        run_id="r1",
        actor="agent",
        upstream=upstream,
        kind="mcp",
        method="GET",
        url="http://up/sse",
        path="/sse",
        request_headers=[],
        request_body=None,
        started_at=0.0,
        started_mono_ns=0,
    )


def post(exchange_id: str, messages, session: str = "s1", upstream: str = "mcp-fhir", run: str = "r1") -> Exchange:
    body = json.dumps(messages).encode()
    return Exchange(
        exchange_id=exchange_id,
        run_id=run,
        actor="agent",
        upstream=upstream,
        kind="mcp",
        method="POST",
        url=f"http://up/messages/?session_id={session}",
        path=f"/messages/?session_id={session}",
        request_headers=[],
        request_body=body,
        started_at=0.0,
        started_mono_ns=0,
        status=202,
        response_body=b"Accepted",
    )


def call(rpc_id, tool: str = "getResourceById") -> dict:
    return {
        "jsonrpc": "2.0",
        "id": rpc_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {"resourceType": "Patient", "resourceId": "p1"}},
    }


def reply(rpc_id, value=None, is_error: bool = False) -> bytes:
    result = {"content": [{"type": "text", "text": json.dumps(value or {"id": "p1"})}], "isError": is_error}
    return f"event: message\ndata: {json.dumps({'jsonrpc': '2.0', 'id': rpc_id, 'result': result})}\n\n".encode()


ENDPOINT = b"event: endpoint\r\ndata: /run/r1/agent/mcp-fhir/messages/?session_id=s1\r\n\r\n"


def test_a_reply_after_the_post_pairs_on_the_stream():
    pairing, get = SsePairing(), stream()
    assert pairing.chunk(get, ENDPOINT).paired == []
    assert pairing.finished(post("post-1", call(7))).paired == []
    [(owner, event)] = pairing.chunk(get, reply(7, {"id": "p1", "resourceType": "Patient"})).paired
    assert (owner.run_id, owner.actor, owner.exchange_id) == ("r1", "agent", "post-1")
    assert event == ToolCalled(
        tool="getResourceById",
        exchange_id="post-1",
        arguments={"resourceType": "Patient", "resourceId": "p1"},
        result={"id": "p1", "resourceType": "Patient"},
        server="mcp-fhir",
    )


def test_a_reply_before_the_post_closes_pairs_when_it_does():
    pairing, get = SsePairing(), stream()
    pairing.chunk(get, ENDPOINT)
    data = reply("a", {"error": "NOT_FOUND"}, is_error=True)
    assert pairing.chunk(get, data[:20]).paired == []  # split across chunks
    assert pairing.chunk(get, data[20:]).paired == []
    [(_, event)] = pairing.finished(post("post-1", call("a"))).paired
    assert event.is_error and event.result == {"error": "NOT_FOUND"} and event.exchange_id == "post-1"


def test_only_tool_calls_become_events_and_ids_stay_in_their_session():
    pairing, one, two = SsePairing(), stream("get-1"), stream("get-2")
    pairing.chunk(one, ENDPOINT)
    pairing.chunk(two, b"event: endpoint\ndata: /messages/?session_id=s2\n\n")
    pairing.finished(post("init", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    assert pairing.chunk(one, reply(1)).paired == []  # a reply to tools/list is no tool call
    pairing.finished(post("post-s1", call(2), session="s1"))
    assert pairing.chunk(two, reply(2)).paired == []  # the same id in another session is not its reply
    [(owner, _)] = pairing.chunk(one, reply(2)).paired
    assert owner.exchange_id == "post-s1"


def test_a_stream_of_another_upstream_does_not_answer():
    pairing, other = SsePairing(), stream("get-9", upstream="mcp-specs")
    pairing.chunk(other, ENDPOINT)
    pairing.finished(post("post-1", call(3)))
    assert pairing.chunk(other, reply(3)).paired == []


def test_calls_unanswered_when_the_stream_closes_are_errors():
    pairing, get = SsePairing(), stream()
    pairing.chunk(get, ENDPOINT)
    pairing.finished(post("post-1", [call(4), call(5, "searchResources")]))
    pairing.chunk(get, reply(4))
    [(owner, event)] = pairing.finished(get).paired
    assert owner.exchange_id == "post-1" and event.tool == "searchResources"
    assert event.is_error and event.error == STREAM_CLOSED
    assert pairing.finished(get).paired == []  # closed once


def test_the_post_alone_makes_no_false_error_event():
    events, _ = exchange_events(post("post-1", call(1)), Redactor())
    assert not any(isinstance(event, ToolCalled) for event in events)


@pytest.mark.anyio
async def test_sse_tool_calls_through_the_recording_proxy_are_tool_called(tmp_path: Path):
    path = tmp_path / "log.duckdb"
    log = EventLog(path)
    async with serve_asgi(specs_mcp_http_app()) as port:
        upstreams = {"mcp-specs": Upstream("mcp-specs", f"http://127.0.0.1:{port}", "mcp")}
        async with (
            open_writer(log) as writer,
            run_proxy(upstreams, Recorder(writer)) as proxy,
            Client(sse_client(proxy.url("r1", "agent", "mcp-specs", "sse"))) as client,
        ):
            found = await client.call_tool("getStructureDefinition", {"resourceType": "patient"})
            missing = await client.call_tool("getStructureDefinition", {"resourceType": "nope"})
    log.close()
    assert not found.is_error and missing.is_error
    with EventLog(path, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT run_id, actor, upstream, payload FROM events WHERE kind = 'ToolCalled' ORDER BY seq"
        )
        _, posts = opened.query(
            "SELECT payload->>'$.exchange_id' FROM events WHERE kind = 'HttpExchanged'"
            " AND payload->>'$.method' = 'POST'"
        )
    calls = [(run, actor, upstream, json.loads(payload)) for run, actor, upstream, payload in rows]
    assert [(c[0], c[1], c[2]) for c in calls] == [("r1", "agent", "mcp-specs")] * 2, calls
    first, second = (c[3] for c in calls)
    assert first["tool"] == "getStructureDefinition" and first["arguments"] == {"resourceType": "patient"}
    assert not first.get("is_error") and first["result"]["resourceType"] == "Patient"
    assert second["is_error"] and second["result"]["error"] == "NOT_FOUND"
    assert {first["exchange_id"], second["exchange_id"]} <= {p for (p,) in posts}


# --- large and hostile streams -------------------------------------------------------------------------------

BIG = BODY_FILE_BYTES + 4096


def big_reply(rpc_id, size: int = BIG, is_error: bool = False) -> tuple[bytes, dict]:
    """A reply event whose data is ``size``-odd bytes of JSON, and the reply it carries."""
    message = {
        "jsonrpc": "2.0",
        "id": rpc_id,
        "result": {"content": [{"type": "text", "text": "x" * size}], "isError": is_error},
    }
    return b"event: message\r\ndata: " + json.dumps(message).encode() + b"\r\n\r\n", message


def bodies_of(*founds) -> dict:
    blobs: dict = {}
    for found in founds:
        blobs.update({digest: bytes(buffer_of(body)) for digest, body in found.blobs.items()})
    return blobs


def test_a_large_reply_is_stored_as_a_body_the_event_names_and_read_back_in_full():
    pairing, get = SsePairing(), stream()
    pairing.chunk(get, ENDPOINT)
    posted = post("post-1", call(7))
    pairing.finished(posted, request_blob=blob_hash(posted.request_body))
    data, message = big_reply(7)
    found = [pairing.chunk(get, data[i : i + 65536]) for i in range(0, len(data), 65536)]
    [(owner, event)] = [pair for f in found for pair in f.paired]
    assert owner.exchange_id == "post-1"
    assert event.result is None and not event.is_error  # the result is left out; the flag is not
    assert event.arguments == {"resourceType": "Patient", "resourceId": "p1"}  # a small call keeps them
    blobs = {blob_hash(posted.request_body): posted.request_body, **bodies_of(*found)}
    assert event.response_blob in blobs and event.request_blob in blobs and event.call_index == 0
    full = tool_in_full(event, blobs.get)
    assert full.result == tool_result_value(message["result"]) and full.result.startswith("xxx")
    assert get.body_dropped  # the proxy was told to let go of the stream's whole body


def test_a_large_reply_before_its_post_is_stored_at_once_and_paired_later():
    pairing, get = SsePairing(), stream()
    pairing.chunk(get, ENDPOINT)
    data, message = big_reply("late", is_error=True)
    early = pairing.chunk(get, data)
    assert early.paired == [] and len(early.blobs) == 1  # stored while its bytes are here, before any pairing
    posted = post("post-1", [call("other"), call("late", "searchResources")])
    later = pairing.finished(posted, request_blob=blob_hash(posted.request_body))
    [(_, event)] = later.paired
    assert event.is_error and event.result is None and event.call_index == 1
    assert event.error == "the tool reported an error: its result is in the recorded reply body"
    blobs = {blob_hash(posted.request_body): posted.request_body, **bodies_of(early, later)}
    full = tool_in_full(event, blobs.get)
    assert full.tool == "searchResources" and full.is_error and full.result.startswith("xxx")


def test_a_large_call_is_outlined_and_its_small_reply_stored_beside_it():
    pairing, get = SsePairing(), stream()
    pairing.chunk(get, ENDPOINT)
    long_call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "createResource", "arguments": {"resourceType": "Binary", "data": "y" * BIG}},
    }
    posted = post("post-1", long_call)
    assert pairing.finished(posted, request_blob=blob_hash(posted.request_body)).paired == []
    found = pairing.chunk(get, reply(3, {"id": "b1"}))
    [(_, event)] = found.paired
    assert event.arguments == {"resourceType": "Binary"}  # the long member is left out of the event
    blobs = {blob_hash(posted.request_body): posted.request_body, **bodies_of(found)}
    full = tool_in_full(event, blobs.get)
    assert full.arguments == long_call["params"]["arguments"] and full.result == {"id": "b1"}


def test_an_event_over_the_limit_is_dropped_and_the_stream_reads_on():
    pairing, get = SsePairing(), stream()
    get.body_limit = 2 * BODY_FILE_BYTES
    pairing.chunk(get, ENDPOINT)
    pairing.finished(post("post-1", [call(1), call(2), call(3)]))
    data, _ = big_reply(1, size=3 * BODY_FILE_BYTES)
    found = [pairing.chunk(get, data[i : i + 100_000]) for i in range(0, len(data), 100_000)]
    assert not any(f.paired or f.blobs for f in found)
    [(_, second)] = pairing.chunk(get, reply(2)).paired  # the next event still pairs
    assert second.result == {"id": "p1"}
    unanswered = [event for _, event in pairing.finished(get).paired]
    assert [e.arguments for e in unanswered] == [call(1)["params"]["arguments"]] * 2  # calls 1 and 3
    assert all(e.is_error and e.error == OVER_LIMIT for e in unanswered)  # they say why there was no reply


def test_event_boundaries_split_anywhere_across_chunks_give_the_same_pairs():
    ping = b'event: message\r\ndata: {"jsonrpc": "2.0", "method": "ping"}\r\n\r\n'
    stream_bytes = ENDPOINT + reply(1) + ping + reply(2).replace(b"\n", b"\r\n") + reply(3)
    for cut in range(1, len(stream_bytes)):
        pairing, get = SsePairing(), stream()
        pairing.finished(post("post-1", [call(1), call(2), call(3)]))
        pairs = pairing.chunk(get, stream_bytes[:cut]).paired + pairing.chunk(get, stream_bytes[cut:]).paired
        assert sorted(e.result["id"] for _, e in pairs) == ["p1"] * 3, cut


def test_a_long_event_in_tiny_chunks_is_read_in_linear_work_and_memory(monkeypatch):
    """The old reader re-joined and re-split everything pending on each chunk: a 4 MiB event in 1 KiB chunks
    examined ~8 GiB. Count what the boundary search examines, and trace what is allocated."""
    examined = []

    class Counting:
        def __init__(self, pattern):
            self.pattern = pattern

        def search(self, buffer, pos=0):
            found = self.pattern.search(buffer, pos)
            examined.append((found.end() if found else len(buffer)) - pos)
            return found

    monkeypatch.setattr(mcp_sse, "SSE_EVENT_END", Counting(mcp_sse.SSE_EVENT_END))
    pairing, get = SsePairing(), stream()
    pairing.chunk(get, ENDPOINT)
    pairing.finished(post("post-1", call(9)))
    data, _ = big_reply(9, size=4 * BODY_FILE_BYTES)
    tracemalloc.start()
    try:
        pairs = [p for i in range(0, len(data), 1024) for p in pairing.chunk(get, data[i : i + 1024]).paired]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(pairs) == 1
    assert sum(examined) < 2 * len(data), sum(examined)
    assert peak < 2 * len(data), peak  # the event once, and its bytearray's growth


def test_many_small_events_in_one_chunk_each_pair():
    pairing, get = SsePairing(), stream()
    pairing.finished(post("post-1", [call(n) for n in range(2000)]))
    pairs = pairing.chunk(get, ENDPOINT + b"".join(reply(n) for n in range(2000))).paired
    assert len(pairs) == 2000 and not get.body_dropped


def test_early_replies_are_bounded_in_bytes():
    pairing, get = SsePairing(), stream()
    pairing.chunk(get, ENDPOINT)
    padding = "z" * (BODY_FILE_BYTES // 2)
    for n in range(40):  # ~20 MiB of replies no POST asked for
        pairing.chunk(get, reply(f"stray-{n}", {"id": "p1", "pad": padding}))
    [session] = pairing._sessions.values()
    assert session.early_bytes <= mcp_sse._MAX_EARLY_BYTES and len(session.early) < 40
