"""A large MCP exchange's ToolCalled names its bodies instead of holding them; readers read it as if it held them.

Tool calls recorded through a real proxy into a real log: a call whose
arguments or result pass ``BODY_FILE_BYTES`` keeps its small arguments and
flags, and the transcript fold and the timeline read it the same as the plain
parse of the same recorded bodies.
"""

from __future__ import annotations

import json

import msgspec
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fae.harness.timeline import describe, timeline_lines
from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.mcp import mcp_events, tool_in_full
from fae.recorder.recorder import Recorder
from fae.replay.source import load_run
from fae.replay.transcript import fold_transcript
from fae.store import events as ev
from fae.store.bodies import BODY_FILE_BYTES
from fae.store.log import EventLog, RunRow
from fae.store.writer import open_writer
from fae.util.serve import serve_asgi

BIG = BODY_FILE_BYTES + 4096


def _call(number: int, name: str, arguments: dict) -> dict:
    return {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def _result(call: dict) -> dict:
    """What the test server answers a call: its ``want`` argument says how large, and in which shape."""
    want = call["params"]["arguments"].get("want", {})
    size = want.get("size", 20)
    if want.get("structured"):
        result = {"structuredContent": {"entries": [{"id": n, "note": "y" * 90} for n in range(size // 100)]}}
    elif want.get("json_text"):
        result = {"content": [{"type": "text", "text": json.dumps({"total": 1, "blob": "q" * size})}]}
    else:
        result = {"content": [{"type": "text", "text": "a note " * (size // 7)}]}
    if want.get("error"):
        result["isError"] = True
    return {"jsonrpc": "2.0", "id": call["id"], "result": result}


async def _mcp(request: Request) -> Response:
    asked = await request.json()
    calls = asked if isinstance(asked, list) else [asked]
    replies = [_result(c) for c in calls]
    if any(c["params"]["arguments"].get("want", {}).get("sse") for c in calls):
        body = b"".join(b"event: message\ndata: " + json.dumps(r).encode() + b"\n\n" for r in replies)
        return Response(body, media_type="text/event-stream")
    return Response(json.dumps(replies if isinstance(asked, list) else replies[0]), media_type="application/json")


CALLS = {
    "small": _call(1, "read", {"resourceType": "Patient", "id": "p1"}),
    "long arguments": _call(2, "create", {"resourceType": "DocumentReference", "data": "d" * BIG, "n": 3}),
    "long text result": _call(3, "search", {"resourceType": "Patient", "want": {"size": BIG}}),
    "long JSON text result": _call(4, "search", {"want": {"size": BIG, "json_text": True}}),
    "long structured result": _call(5, "search", {"want": {"size": BIG, "structured": True}}),
    "long error": _call(6, "search", {"want": {"size": BIG, "error": True}}),
    "long stream": _call(7, "search", {"want": {"size": BIG, "sse": True}}),
    "batch": [_call(8, "read", {"id": "a"}), _call(9, "search", {"want": {"size": BIG}})],
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict:
    import anyio
    import httpx

    path = tmp_path_factory.mktemp("mcp") / "log.duckdb"
    runs = {name: f"m-{n}" for n, name in enumerate(CALLS)}

    async def record() -> None:
        log = EventLog(path)
        app = Starlette(routes=[Route("/mcp", _mcp, methods=["POST"])])
        async with serve_asgi(app) as port, open_writer(log) as writer:
            writer.submit(runs=[RunRow(run, "t", 0, "a", 0) for run in runs.values()])
            upstreams = {"tools": Upstream("tools", f"http://127.0.0.1:{port}", "mcp")}
            async with run_proxy(upstreams, Recorder(writer)) as proxy, httpx.AsyncClient(timeout=60) as client:
                for name, body in CALLS.items():
                    reply = await client.post(proxy.url(runs[name], "agent", "tools", "mcp"), json=body)
                    assert reply.status_code == 200, reply.text[:200]
        log.close()

    anyio.run(record, backend="asyncio")
    return {"path": path, "runs": runs}


def _recorded(log: EventLog, run_id: str) -> tuple[list[ev.ToolCalled], list[ev.ToolCalled], list[dict]]:
    """(the calls as recorded, the plain parse of the recorded bodies, their payloads)."""
    _, rows = log.query("SELECT kind, payload FROM events WHERE run_id = ? ORDER BY seq", [run_id])
    http = next(ev.decode(p) for k, p in rows if k == "HttpExchanged")
    assert isinstance(http, ev.HttpExchanged)
    called = [ev.decode(p) for k, p in rows if k == "ToolCalled"]
    content_type = next(h.value for h in http.response_headers if h.name.lower() == "content-type")
    plain = mcp_events(
        http.exchange_id,
        log.blob(http.request_blob or ""),
        log.blob(http.response_blob or ""),
        content_type,
        "tools",
        None,
    )
    return called, plain, [json.loads(p) for k, p in rows if k == "ToolCalled"]  # type: ignore[return-value]


@pytest.mark.parametrize("name", sorted(set(CALLS) - {"small"}))
def test_a_large_call_names_its_bodies_and_keeps_only_what_is_small(recorded, name):
    with EventLog(recorded["path"], read_only=True) as log:
        called, plain, payloads = _recorded(log, recorded["runs"][name])
    assert len(called) == len(plain) >= 1
    for index, (event, whole, payload) in enumerate(zip(called, plain, payloads, strict=True)):
        assert len(json.dumps(payload)) < 16 * 1024, f"{name}: the event still carries the body"
        assert event.request_blob and event.response_blob and event.call_index == index
        assert (event.tool, event.is_error) == (whole.tool, whole.is_error)
        small = {k: v for k, v in (whole.arguments or {}).items() if len(json.dumps(v)) < 1000}
        assert event.arguments == small, "the small arguments stay (report scope reads resourceType)"
        if event.is_error:
            assert event.error, "a large error still says it is one"


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_reader_reads_a_large_call_as_the_plain_parse_of_its_bodies(recorded, name):
    run_id = recorded["runs"][name]
    with EventLog(recorded["path"], read_only=True) as log:
        called, plain, _ = _recorded(log, run_id)
        for event, whole in zip(called, plain, strict=True):
            assert tool_in_full(event, log.blob) == msgspec.structs.replace(
                whole, request_blob=event.request_blob, response_blob=event.response_blob, call_index=event.call_index
            )
        uses = fold_transcript(load_run(log, run_id)).tool_calls
        assert [(u.tool, u.arguments, u.result, u.is_error) for u in uses] == [
            (w.tool, w.arguments, w.result, w.is_error or w.error is not None) for w in plain
        ], "transcript"
        lines = [line for line in timeline_lines(log, run_id) if " tool " in line]
        assert [line.split("  tool ", 1)[1] for line in lines] == [
            describe("ToolCalled", msgspec.to_builtins(w)).split("  tool ", 1)[1] for w in plain
        ], "timeline"
    if name != "small":
        assert any(len(json.dumps([w.arguments, w.result])) > BODY_FILE_BYTES for w in plain), "nothing large"


def test_a_missing_body_leaves_the_event_as_recorded():
    event = ev.ToolCalled(tool="t", exchange_id="x", arguments={"id": 1}, request_blob="a" * 64, response_blob="b" * 64)
    assert tool_in_full(event, {}.get) == event
    junk = b"{" * BIG  # not JSON: no call in it, so nothing to read back
    assert tool_in_full(event, {"a" * 64: junk, "b" * 64: junk}.get) == event
