"""A large LLM call's event names its bodies instead of holding them, and every reader reads it as if it held them.

Each reader (the transcript fold, curate's reply lookup, the timeline, the
``llm_calls`` view, replay's cassette) is given calls recorded through a real proxy into a real
log, and must read a large call (history, reply or tool-call arguments past
``BODY_FILE_BYTES``) the same as the plain parse of the same bodies.
"""

from __future__ import annotations

import json

import msgspec
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fae.harness.curate import _llm_content
from fae.harness.timeline import describe, timeline_lines
from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.llm import llm_event, llm_in_full
from fae.recorder.recorder import Recorder
from fae.replay.cassette import recorded_calls, request_key
from fae.replay.source import load_run
from fae.replay.transcript import fold_transcript
from fae.store import events as ev
from fae.store.bodies import BODY_FILE_BYTES
from fae.store.log import EventLog, RunRow
from fae.store.writer import open_writer
from fae.util.serve import serve_asgi

BIG = BODY_FILE_BYTES + 4096
WORDS = "the history of the patient goes on and on "


def _history(size: int) -> list[dict]:
    """A conversation of about ``size`` bytes: system, user, assistant with a tool call, tool, user."""
    filler = WORDS * (size // len(WORDS) // 2 + 1)
    return [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": filler},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "search", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c0", "content": filler},
        {"role": "user", "content": "and?\u00e9\u4e2d"},
    ]


def _reply(content_size: int, arguments_size: int) -> dict:
    message: dict = {"role": "assistant", "content": ("an answer " * (content_size // 10 + 1))[:content_size]}
    if arguments_size:
        message["tool_calls"] = [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "write", "arguments": json.dumps({"note": "x" * arguments_size})},
            }
        ]
    return {
        "id": "r",
        "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7},
    }


def _responses_reply(content_size: int) -> dict:
    return {
        "id": "r",
        "model": "gpt-test",
        "status": "completed",
        "usage": {"input_tokens": 3, "output_tokens": 4},
        "output": [
            {"type": "function_call", "call_id": "f1", "name": "lookup", "arguments": '{"q": 1}'},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "z" * content_size}]},
        ],
    }


def _sse(content_size: int) -> bytes:
    pieces = [{"model": "gpt-test", "choices": [{"delta": {"content": "w" * (content_size // 4)}}]}] * 4
    pieces.append(
        {
            "model": "gpt-test",
            "choices": [{"delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2},
        }
    )
    return b"".join(b"data: " + json.dumps(p).encode() + b"\n\n" for p in pieces) + b"data: [DONE]\n\n"


def _message_reply(content_size: int, arguments_size: int) -> dict:
    return {
        "id": "msg",
        "type": "message",
        "model": "claude-test",
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "cache_read_input_tokens": 9, "output_tokens": 6},
        "content": [
            {"type": "text", "text": ("a reply " * (content_size // 8 + 1))[:content_size]},
            {"type": "tool_use", "id": "toolu_1", "name": "write", "input": {"note": "x" * arguments_size}},
        ],
    }


def _message_sse(content_size: int) -> bytes:
    events = [
        {"type": "message_start", "message": {"model": "claude-test", "content": [], "usage": {"input_tokens": 2}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *[
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "v" * (content_size // 4)},
            }
        ]
        * 4,
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t", "name": "w"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"a": 1}'}},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 8}},
        {"type": "message_stop"},
    ]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def _anthropic_history(size: int) -> list[dict]:
    filler = WORDS * (size // len(WORDS) // 2 + 1)
    return [
        {"role": "user", "content": filler},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t0", "name": "search", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0", "content": filler}]},
    ]


async def _chat(request: Request) -> Response:
    asked = await request.json()
    want = asked.get("want", {})
    if request.url.path.endswith("/messages"):
        if asked.get("stream"):
            return Response(_message_sse(want.get("content", 10)), media_type="text/event-stream")
        reply = _message_reply(want.get("content", 10), want.get("arguments", 0))
        return Response(json.dumps(reply), media_type="application/json")
    if asked.get("stream"):
        return Response(_sse(want.get("content", 10)), media_type="text/event-stream")
    if request.url.path.endswith("/responses"):
        return Response(json.dumps(_responses_reply(want.get("content", 10))), media_type="application/json")
    return Response(
        json.dumps(_reply(want.get("content", 10), want.get("arguments", 0))), media_type="application/json"
    )


CALLS = {  # name: (path, request)
    "small": ("v1/chat/completions", {"model": "gpt-test", "messages": _history(2000), "want": {"arguments": 40}}),
    "long history": (
        "v1/chat/completions",
        {
            "model": "gpt-test",
            "messages": _history(BIG),
            "tools": [{"type": "function", "function": {"name": "search"}}],
        },
    ),
    "long reply": ("v1/chat/completions", {"model": "gpt-test", "messages": _history(100), "want": {"content": BIG}}),
    "long arguments": (
        "v1/chat/completions",
        {"model": "gpt-test", "messages": _history(100), "want": {"arguments": BIG}},
    ),
    "long responses": ("v1/responses", {"model": "gpt-test", "input": "x" * BIG, "want": {"content": BIG}}),
    "long stream": (
        "v1/chat/completions",
        {"model": "gpt-test", "stream": True, "messages": _history(100), "want": {"content": BIG}},
    ),
    "long messages history": (
        "v1/messages",
        {"model": "claude-test", "system": "Be brief.", "max_tokens": 9, "messages": _anthropic_history(BIG)},
    ),
    "long messages reply": (
        "v1/messages",
        {"model": "claude-test", "max_tokens": 9, "messages": _anthropic_history(100), "want": {"arguments": BIG}},
    ),
    "long messages stream": (
        "v1/messages",
        {"model": "claude-test", "stream": True, "messages": _anthropic_history(100), "want": {"content": BIG}},
    ),
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict:
    """Each call recorded as run ``r-<n>``, through a real proxy into a real log: {name: (run id, path)}."""
    import anyio

    path = tmp_path_factory.mktemp("llm") / "log.duckdb"
    runs = {name: f"r-{n}" for n, name in enumerate(CALLS)}

    async def record() -> None:
        import httpx

        log = EventLog(path)
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", _chat, methods=["POST"]),
                Route("/v1/responses", _chat, methods=["POST"]),
                Route("/v1/messages", _chat, methods=["POST"]),
            ]
        )
        async with serve_asgi(app) as port, open_writer(log) as writer:
            writer.submit(runs=[RunRow(run, "t", 0, "a", 0) for run in runs.values()])
            upstreams = {"llm": Upstream("llm", f"http://127.0.0.1:{port}", "llm")}
            async with run_proxy(upstreams, Recorder(writer)) as proxy, httpx.AsyncClient(timeout=60) as client:
                for name, (rest, body) in CALLS.items():
                    reply = await client.post(proxy.url(runs[name], "agent", "llm", rest), json=body)
                    assert reply.status_code == 200, reply.text[:200]
        log.close()

    anyio.run(record, backend="asyncio")
    return {"path": path, "runs": runs}


def _plain(log: EventLog, run_id: str) -> tuple[ev.LlmCalled, ev.LlmCalled, dict]:
    """(the call as recorded, the plain parse of its recorded bodies, the recorded exchange)."""
    _, rows = log.query("SELECT kind, payload FROM events WHERE run_id = ? ORDER BY seq", [run_id])
    found = {kind: ev.decode(payload) for kind, payload in rows}
    http, called = found["HttpExchanged"], found["LlmCalled"]
    assert isinstance(http, ev.HttpExchanged) and isinstance(called, ev.LlmCalled)
    plain = llm_event(
        called.exchange_id,
        http.path,
        log.blob(http.request_blob or ""),
        http.status,
        log.blob(http.response_blob or ""),
        http.streamed,
        None,
    )
    return called, plain, json.loads(next(p for k, p in rows if k == "LlmCalled"))


@pytest.mark.parametrize("name", sorted(set(CALLS) - {"small"}))
def test_a_large_call_names_its_bodies_and_keeps_only_what_is_small(recorded, name):
    with EventLog(recorded["path"], read_only=True) as log:
        called, plain, payload = _plain(log, recorded["runs"][name])
    assert len(json.dumps(payload)) < 16 * 1024, f"{name}: the event still carries the body"
    assert called.request_blob or called.response_blob
    assert (called.model, called.stream, called.tools, called.finish_reason, called.total_tokens) == (
        plain.model,
        plain.stream,
        plain.tools,
        plain.finish_reason,
        plain.total_tokens,
    )
    assert [c.name for c in called.tool_calls] == [c.name for c in plain.tool_calls]
    if called.request_blob:
        assert called.messages == () and called.message_count == len(plain.messages)
        assert called.roles == tuple(m.get("role") for m in plain.messages)
    else:
        assert called.messages == plain.messages


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_reader_reads_a_large_call_as_the_plain_parse_of_its_bodies(recorded, name):
    run_id = recorded["runs"][name]
    with EventLog(recorded["path"], read_only=True) as log:
        called, plain, _ = _plain(log, run_id)
        assert llm_in_full(called, log.blob) == msgspec.structs.replace(
            plain,
            request_blob=called.request_blob,
            response_blob=called.response_blob,
            message_count=called.message_count,
            roles=called.roles,
        )
        reply = {"role": "assistant", "content": plain.content}
        if plain.tool_calls:
            reply["tool_calls"] = [
                {"id": c.call_id, "name": c.name, "arguments": c.arguments} for c in plain.tool_calls
            ]
        assert fold_transcript(load_run(log, run_id)).messages == (*plain.messages, reply), "transcript"
        assert _llm_content(log, run_id, called.exchange_id) == plain.content, "curate"
        line = next(line for line in timeline_lines(log, run_id) if " llm " in line)
        assert line.endswith(describe("LlmCalled", msgspec.to_builtins(plain))), "timeline"
        _, view = log.query("SELECT message_count, tool_call_count FROM llm_calls WHERE run_id = ?", [run_id])
        assert view == [(len(plain.messages), len(plain.tool_calls))], "llm_calls view"
        _, (http_row,) = log.query("SELECT payload FROM events WHERE run_id = ? AND kind = 'HttpExchanged'", [run_id])
        http = ev.decode(http_row[0])
        assert isinstance(http, ev.HttpExchanged)
        (replayed,) = recorded_calls(load_run(log, run_id))  # what `fae replay` answers the agent with
        request = log.blob(http.request_blob or "")
        assert replayed.body == log.blob(http.response_blob or "") and replayed.key == request_key(
            http.method, http.path, request
        ), "replay"
        assert not replayed.streamed or b"".join(replayed.chunks) == replayed.body, "replay of a stream"
    if name != "small":
        assert plain.content or plain.messages, "the case must have something large to read back"


def test_a_large_body_that_is_not_json_or_has_no_conversation_is_outlined_without_failing():
    junk = b"<" * BIG
    called = llm_event(
        "x", "/v1/chat/completions", junk, 200, junk, False, None, request_blob="a" * 64, response_blob="b" * 64
    )
    assert called.error == "response body is not valid JSON" and called.message_count is None
    bodies = {"a" * 64: junk, "b" * 64: junk}
    assert llm_in_full(called, bodies.get).messages == ()
    plain_string = json.dumps({"model": "m", "input": "y" * BIG}).encode()
    outlined = llm_event("x", "/v1/responses", plain_string, 200, None, False, None, request_blob="c" * 64)
    assert outlined.roles == ("user",) and outlined.message_count == 1 and outlined.messages == ()
    gone = llm_in_full(outlined, {}.get)  # a body missing from the log: what the event holds, nothing invented
    assert gone.messages == () and gone.message_count == 1
