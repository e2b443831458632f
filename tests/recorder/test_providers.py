"""Each model API, driven by its official SDK through the real recording proxy, is recorded as LLM calls.

The openai SDK (Chat Completions, Responses) and the anthropic SDK (Messages)
each play the booking plan against the local scripted LLM server, streamed and
not, through a real mitmproxy into a real log. Every recorded ``LlmCalled``
must hold the model, the tool calls and the answer the SDK saw, and token
counts equal to the ``usage`` the server sent (as the SDK read it).
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import anyio
import httpx
import openai
import pytest

from fae.llm import LlmServer, PlanRegistry, create_app, entry_from_dict
from fae.proxy.routes import Upstream
from fae.proxy.server import run_proxy
from fae.recorder.recorder import Recorder
from fae.replay.cassette import Cassette, recorded_calls
from fae.replay.source import load_run
from fae.store import events as ev
from fae.store.log import EventLog, RunRow
from fae.store.writer import open_writer
from fae.util.serve import serve_asgi
from tests.llm.booking import BOOKING_PLAN, BOOKING_PROMPT, CREATED

RESULTS = [{"resourceType": "Patient", "id": "p1"}, {"resourceType": "Appointment", "id": "a7"}]
ANSWER = "Booked appointment a7 for patient p1."
SCHEMA = {"type": "object", "properties": {"resourceType": {"type": "string"}, "resource": {"type": "object"}}}
SYSTEM = "You book appointments with the tools you are given, and you say what you booked."
MODEL = "scripted:gold"


class Seen:
    """What the SDK handed its caller for one call: the usage it read, the calls and the text."""

    def __init__(self, usage: dict[str, Any], calls: list[tuple[str, str, dict]], text: str | None) -> None:
        self.usage, self.calls, self.text = usage, calls, text


async def _chat(base: str, streamed: bool) -> list[Seen]:
    client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-test-secret", max_retries=0)
    tools = [{"type": "function", "function": {"name": "createResource", "parameters": SCHEMA}}]
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": BOOKING_PROMPT}]
    seen = []
    for result in [*RESULTS, None]:
        if streamed:
            stream = await client.chat.completions.create(
                model=MODEL, messages=messages, tools=tools, stream=True, stream_options={"include_usage": True}
            )
            text, calls, usage = "", {}, None
            async for chunk in stream:
                usage = chunk.usage or usage
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    for call in choice.delta.tool_calls or []:
                        slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                        slot["id"] = call.id or slot["id"]
                        slot["name"] = (call.function and call.function.name) or slot["name"]
                        slot["arguments"] += (call.function and call.function.arguments) or ""
            found = [(c["id"], c["name"], json.loads(c["arguments"])) for c in calls.values()]
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                message["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in calls.values()
                ]
        else:
            reply = await client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
            usage, said = reply.usage, reply.choices[0].message
            text = said.content or ""
            found = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in said.tool_calls or []]
            message = said.model_dump(exclude_none=True)
        assert usage is not None
        seen.append(Seen(usage.model_dump(), found, text or None))
        if result is None:
            break
        messages += [message, {"role": "tool", "tool_call_id": found[0][0], "content": json.dumps(result)}]
    return seen


async def _responses(base: str, streamed: bool) -> list[Seen]:
    client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-test-secret", max_retries=0)
    tools: Any = [{"type": "function", "name": "createResource", "parameters": SCHEMA, "strict": False}]
    items: list[Any] = [{"role": "user", "content": BOOKING_PROMPT}]
    seen = []
    for result in [*RESULTS, None]:
        if streamed:
            async with client.responses.stream(
                model=MODEL, instructions=SYSTEM, input=items, tools=tools, tool_choice="auto"
            ) as stream:
                reply = await stream.get_final_response()
        else:
            reply = await client.responses.create(
                model=MODEL, instructions=SYSTEM, input=items, tools=tools, tool_choice="auto"
            )
        assert reply.usage is not None
        found = [(o.call_id, o.name, json.loads(o.arguments)) for o in reply.output if o.type == "function_call"]
        seen.append(Seen(reply.usage.model_dump(), found, reply.output_text or None))
        if result is None:
            break
        items += [o.model_dump(exclude_none=True) for o in reply.output]
        items.append({"type": "function_call_output", "call_id": found[0][0], "output": json.dumps(result)})
    return seen


async def _messages(base: str, streamed: bool) -> list[Seen]:
    client = anthropic.AsyncAnthropic(base_url=base, api_key="sk-ant-test-secret", max_retries=0)
    tools: Any = [{"name": "createResource", "description": "Create a FHIR resource.", "input_schema": SCHEMA}]
    system: Any = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    messages: list[Any] = [{"role": "user", "content": BOOKING_PROMPT}]
    seen = []
    for result in [*RESULTS, None]:
        options: Any = {"model": MODEL, "max_tokens": 1024, "system": system, "messages": messages, "tools": tools}
        if streamed:
            async with client.messages.stream(**options) as stream:
                reply = await stream.get_final_message()
        else:
            reply = await client.messages.create(**options)
        found = [(b.id, b.name, b.input) for b in reply.content if b.type == "tool_use"]
        text = "".join(b.text for b in reply.content if b.type == "text")
        seen.append(Seen(reply.usage.model_dump(), found, text or None))
        if result is None:
            break
        messages += [
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": found[0][0], "content": json.dumps(result)}],
            },
        ]
    return seen


DRIVERS = {"chat": _chat, "responses": _responses, "messages": _messages}
CASES = [(api, streamed) for api in DRIVERS for streamed in (False, True)]


def _run_id(api: str, streamed: bool) -> str:
    return f"{api}-{'stream' if streamed else 'plain'}"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, Any]:
    """Each (API, streamed) case played as its own run through the proxy; what each SDK saw, by run id."""
    path = tmp_path_factory.mktemp("providers") / "log.duckdb"
    registry = PlanRegistry([entry_from_dict({"match": "book her first appointment", "plan": BOOKING_PLAN})])
    seen: dict[str, list[Seen]] = {}

    async def record(server: LlmServer) -> None:
        log = EventLog(path)
        async with open_writer(log) as writer:
            writer.submit(runs=[RunRow(_run_id(*case), "t", 0, "sdk", 0) for case in CASES])
            upstreams = {"llm": Upstream("llm", server.root_url, "llm")}
            async with run_proxy(upstreams, Recorder(writer)) as proxy:
                for api, streamed in CASES:
                    run_id = _run_id(api, streamed)
                    base = proxy.url(run_id, "agent", "llm").rstrip("/")
                    seen[run_id] = await DRIVERS[api](base, streamed)
        log.close()

    with LlmServer(create_app(registry, clock=lambda: CREATED)) as server:
        anyio.run(record, server, backend="asyncio")
    return {"path": path, "seen": seen}


def _calls(path: Any, run_id: str) -> list[ev.LlmCalled]:
    with EventLog(path, read_only=True) as log:
        _, rows = log.query("SELECT payload FROM events WHERE run_id = ? AND kind = 'LlmCalled' ORDER BY seq", [run_id])
    calls = [ev.decode(payload) for (payload,) in rows]
    assert all(isinstance(call, ev.LlmCalled) for call in calls)
    return calls  # type: ignore[return-value]


def _sdk_tokens(api: str, usage: dict[str, Any]) -> tuple[int, int, int, int | None, int | None]:
    """(prompt, completion, total, cache read, cache write) as docs/log.md says each API's usage maps."""
    if api == "chat":
        return usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"], None, None
    if api == "responses":
        details = usage["input_tokens_details"]
        cached, written = details["cached_tokens"], details.get("cache_write_tokens")
        return usage["input_tokens"], usage["output_tokens"], usage["total_tokens"], cached, written
    read, written = usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]
    prompt = usage["input_tokens"] + read + written
    return prompt, usage["output_tokens"], prompt + usage["output_tokens"], read, written


@pytest.mark.parametrize(("api", "streamed"), CASES, ids=[_run_id(*case) for case in CASES])
def test_each_call_is_recorded_with_the_usage_the_server_sent(recorded, api, streamed):
    run_id = _run_id(api, streamed)
    seen, calls = recorded["seen"][run_id], _calls(recorded["path"], run_id)
    assert len(calls) == len(seen) == 3, f"{run_id}: {len(calls)} recorded, {len(seen)} made"
    assert seen[-1].text == ANSWER and [c[1] for s in seen for c in s.calls] == ["createResource"] * 2
    for number, (call, sdk) in enumerate(zip(calls, seen, strict=True), 1):
        where = f"{run_id}, call {number}"
        assert (call.api, call.model, call.stream, call.status, call.error) == (api, MODEL, streamed, 200, None), where
        assert call.tools == ("createResource",), where
        tokens = (
            call.prompt_tokens,
            call.completion_tokens,
            call.total_tokens,
            call.cache_read_tokens,
            call.cache_write_tokens,
        )
        assert tokens == _sdk_tokens(api, sdk.usage), f"{where}: recorded {tokens}, the SDK read {sdk.usage}"
        assert call.prompt_tokens and call.completion_tokens, where
        assert [(c.call_id, c.name, json.loads(c.arguments)) for c in call.tool_calls] == sdk.calls, where
        assert call.content == sdk.text, where
        assert (
            call.finish_reason
            == {
                "chat": "tool_calls" if sdk.calls else "stop",
                "responses": "completed",
                "messages": "tool_use" if sdk.calls else "end_turn",
            }[api]
        ), where
        # the system prompt first (Anthropic's system blocks as written), then per earlier call a reply and a result
        assert call.messages[0]["role"] == "system" and SYSTEM in json.dumps(call.messages[0]), where
        assert call.messages[1]["role"] == "user" and len(call.messages) == 2 * number, where


def test_anthropic_prompt_caching_is_recorded_as_cache_reads_and_writes(recorded):
    """The system prompt is marked for caching: the first request writes it, every later one reads it."""
    plain = [c.usage for c in recorded["seen"]["messages-plain"]]
    assert plain[0]["cache_creation_input_tokens"] > 0 and plain[0]["cache_read_input_tokens"] == 0
    assert all(u["cache_read_input_tokens"] == plain[0]["cache_creation_input_tokens"] for u in plain[1:])
    calls = _calls(recorded["path"], "messages-plain")
    assert calls[0].cache_write_tokens == plain[0]["cache_creation_input_tokens"]
    assert [c.cache_read_tokens for c in calls[1:]] == [plain[0]["cache_creation_input_tokens"]] * 2
    streamed = _calls(recorded["path"], "messages-stream")  # the same prefix, already cached by then
    assert streamed[0].cache_read_tokens == plain[0]["cache_creation_input_tokens"]
    assert streamed[0].cache_write_tokens == 0


def test_api_keys_never_reach_the_log(recorded):
    with EventLog(recorded["path"], read_only=True) as log:
        _, rows = log.query("SELECT count(*) FROM events WHERE CAST(payload AS VARCHAR) LIKE '%test-secret%'")
        _, blobs = log.query("SELECT count(*) FROM blobs WHERE contains(CAST(data AS VARCHAR), 'test-secret')")
    assert rows == [(0,)] and blobs == [(0,)]


def test_an_sdk_sees_each_fault_in_its_own_shape_and_the_call_records_it(tmp_path):
    """A 429 to each SDK is its own rate-limit error; the recorded call names the status and message."""
    path = tmp_path / "log.duckdb"

    async def record(server: LlmServer) -> dict[str, BaseException]:
        log = EventLog(path)
        raised: dict[str, BaseException] = {}
        async with open_writer(log) as writer:
            writer.submit(runs=[RunRow(api, "t", 0, "sdk", 0) for api in DRIVERS])
            async with run_proxy({"llm": Upstream("llm", server.root_url, "llm")}, Recorder(writer)) as proxy:
                base = {api: proxy.url(api, "agent", "llm").rstrip("/") for api in DRIVERS}
                chat = openai.AsyncOpenAI(base_url=f"{base['chat']}/v1", api_key="k", max_retries=0)
                responses = openai.AsyncOpenAI(base_url=f"{base['responses']}/v1", api_key="k", max_retries=0)
                claude = anthropic.AsyncAnthropic(base_url=base["messages"], api_key="k", max_retries=0)
                attempts = {
                    "chat": chat.chat.completions.create(
                        model="fault:429", messages=[{"role": "user", "content": "x"}]
                    ),
                    "responses": responses.responses.create(model="fault:429", input="x"),
                    "messages": claude.messages.create(
                        model="fault:429", max_tokens=10, messages=[{"role": "user", "content": "x"}]
                    ),
                }
                for api, attempt in attempts.items():
                    try:
                        await attempt
                    except (openai.APIStatusError, anthropic.APIStatusError) as exc:
                        raised[api] = exc
        log.close()
        return raised

    with LlmServer(create_app(PlanRegistry())) as server:
        raised = anyio.run(record, server, backend="asyncio")
    assert isinstance(raised["chat"], openai.RateLimitError) and isinstance(raised["responses"], openai.RateLimitError)
    assert isinstance(raised["messages"], anthropic.RateLimitError)
    assert raised["messages"].body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    for api in DRIVERS:
        (call,) = _calls(path, api)
        assert (call.api, call.status, call.error) == (api, 429, "HTTP 429: Rate limit reached (scripted fault).")
        assert call.total_tokens is None


def test_the_server_answers_bad_messages_requests_as_the_api_does(tmp_path):
    with LlmServer(create_app(PlanRegistry())) as server:
        post = lambda body: httpx.post(f"{server.root_url}/v1/messages", json=body, timeout=10)  # noqa: E731
        no_max = post({"model": MODEL, "messages": [{"role": "user", "content": "x"}]})
        unknown = post({"model": "claude-nonexistent", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})
        bad_role = post({"model": MODEL, "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})
    assert no_max.status_code == 400 and no_max.json()["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in no_max.json()["error"]["message"]
    assert unknown.status_code == 404 and unknown.json() == {
        "type": "error",
        "error": {
            "type": "not_found_error",
            "message": "The model 'claude-nonexistent' does not exist; see GET /v1/models.",
        },
    }
    assert bad_role.status_code == 400 and "role" in bad_role.json()["error"]["message"]


@pytest.mark.parametrize(("api", "streamed"), CASES, ids=[_run_id(*case) for case in CASES])
def test_the_cassette_answers_each_sdk_again_from_the_log_alone(recorded, api, streamed):
    """With the LLM server gone, the run's cassette plays every call back to the same SDK, which sees the same."""
    run_id = _run_id(api, streamed)
    with EventLog(recorded["path"], read_only=True) as log:
        cassette = Cassette(recorded_calls(load_run(log, run_id)))

    async def replay() -> list[Seen]:
        async with serve_asgi(cassette.app()) as port:
            return await DRIVERS[api](f"http://127.0.0.1:{port}", streamed)

    again = anyio.run(replay, backend="asyncio")
    assert cassette.misses == [] and cassette.unplayed() == [], [m.describe() for m in cassette.misses]
    before = recorded["seen"][run_id]
    assert [(s.usage, s.calls, s.text) for s in again] == [(s.usage, s.calls, s.text) for s in before]


def test_a_divergent_request_gets_the_asked_apis_error_and_stops_the_sdk(recorded):
    with EventLog(recorded["path"], read_only=True) as log:
        cassette = Cassette(recorded_calls(load_run(log, "messages-plain")))

    async def diverge() -> anthropic.BadRequestError:
        async with serve_asgi(cassette.app()) as port:
            client = anthropic.AsyncAnthropic(base_url=f"http://127.0.0.1:{port}", api_key="k", max_retries=2)
            with pytest.raises(anthropic.BadRequestError) as raised:
                await client.messages.create(
                    model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": "something else"}]
                )
            return raised.value

    error = anyio.run(diverge, backend="asyncio")
    assert error.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "the request differs at" in error.body["error"]["message"]  # type: ignore[index]
    assert cassette.requests == 1, "a 400 is not retried: the agent stops at once"


@pytest.mark.parametrize("api", list(DRIVERS))
def test_a_streamed_call_counts_the_tokens_its_plain_twin_counts(recorded, api):
    """The server's answers are deterministic, so streaming changes no count (a stream's usage is read whole)."""
    counts = {
        streamed: [(c.prompt_tokens, c.completion_tokens, c.total_tokens) for c in _calls(recorded["path"], run_id)]
        for streamed, run_id in ((False, _run_id(api, False)), (True, _run_id(api, True)))
    }
    assert counts[True] == counts[False]
