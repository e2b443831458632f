"""The Responses and Messages parsers on the shapes the SDK-driven tests do not reach: cut streams, errors
inside a stream, several blocks, tool calls without arguments, cache usage, unread APIs."""

from __future__ import annotations

import json

import pytest

from fae.recorder.llm import api_of, llm_event

MESSAGES_REQUEST = json.dumps(
    {
        "model": "claude-x",
        "max_tokens": 100,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "book it"}],
        "tools": [{"name": "createResource", "input_schema": {"type": "object"}}],
    }
).encode()


def _sse(events: list[dict]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


@pytest.mark.parametrize(
    ("path", "api"),
    [
        ("/v1/chat/completions", "chat"),
        ("/v1/responses", "responses"),
        ("/v1/messages", "messages"),
        ("/v1/messages?beta=true", "messages"),
        ("/v1/messages/count_tokens", "count_tokens"),
        ("/v1/completions", "completions"),
        ("/v1/models", "models"),
        ("/v1beta/models/gemini-x:generateContent", "other"),
        ("/api/chat", "other"),
    ],
)
def test_the_api_is_named_by_the_path(path, api):
    assert api_of(path) == api


def test_a_message_with_text_and_tool_use_blocks_and_cache_usage():
    reply = {
        "type": "message",
        "model": "claude-x-1",
        "content": [
            {"type": "text", "text": "Creating "},
            {"type": "tool_use", "id": "toolu_1", "name": "createResource", "input": {"resourceType": "Patient"}},
            {"type": "text", "text": "now."},
        ],
        "stop_reason": "tool_use",
        "usage": {
            "input_tokens": 10,
            "cache_creation_input_tokens": 5,
            "cache_read_input_tokens": 100,
            "output_tokens": 7,
        },
    }
    event = llm_event("x", "/v1/messages", MESSAGES_REQUEST, 200, json.dumps(reply).encode(), False, None)
    assert (event.api, event.model, event.finish_reason, event.content) == (
        "messages",
        "claude-x-1",
        "tool_use",
        "Creating now.",
    )
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in event.tool_calls] == [
        ("toolu_1", "createResource", {"resourceType": "Patient"})
    ]
    assert (event.prompt_tokens, event.completion_tokens, event.total_tokens) == (115, 7, 122)
    assert (event.cache_read_tokens, event.cache_write_tokens) == (100, 5)
    assert event.messages == ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "book it"})
    assert event.tools == ("createResource",)


def test_a_streamed_message_is_joined_and_message_delta_usage_wins():
    events = [
        {
            "type": "message_start",
            "message": {"model": "claude-x", "content": [], "usage": {"input_tokens": 20, "output_tokens": 1}},
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "look."}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t1", "name": "a"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"q": '}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "1}"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "t2", "name": "b"}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}},
        {"type": "message_stop"},
    ]
    event = llm_event("x", "/v1/messages", MESSAGES_REQUEST, 200, _sse(events), True, None)
    assert event.stream and event.error is None and event.content == "Let me look."
    assert [(c.name, c.arguments) for c in event.tool_calls] == [("a", '{"q":1}'), ("b", "{}")]
    assert (event.finish_reason, event.prompt_tokens, event.completion_tokens, event.total_tokens) == (
        "tool_use",
        20,
        30,
        50,
    )


def test_an_error_inside_a_message_stream_is_the_calls_error():
    events = [
        {"type": "message_start", "message": {"model": "claude-x", "content": [], "usage": {"input_tokens": 3}}},
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
    event = llm_event("x", "/v1/messages", MESSAGES_REQUEST, 200, _sse(events), True, None)
    assert event.error == "the answer reports an error: Overloaded"
    assert event.completion_tokens is None and event.total_tokens is None


def test_an_anthropic_error_body_names_its_message():
    body = {"type": "error", "error": {"type": "not_found_error", "message": "model: claude-nope"}}
    event = llm_event("x", "/v1/messages", MESSAGES_REQUEST, 404, json.dumps(body).encode(), False, None)
    assert event.error == "HTTP 404: model: claude-nope"


def test_a_cut_responses_stream_is_assembled_from_its_deltas():
    events = [
        {"type": "response.created", "response": {"id": "r1", "model": "gpt-x", "status": "in_progress", "output": []}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "message", "id": "m", "content": []},
        },
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "Hal"},
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "f"},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"type": "function_call", "id": "fc", "call_id": "c9", "name": "look", "arguments": ""},
        },
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"a":'},
    ]
    request = json.dumps({"model": "gpt-x", "instructions": "Be brief.", "input": "hi", "stream": True}).encode()
    event = llm_event("x", "/v1/responses", request, 200, _sse(events), True, None)
    assert (event.content, event.finish_reason, event.total_tokens) == ("Half", "in_progress", None)
    assert [(c.call_id, c.name, c.arguments) for c in event.tool_calls] == [("c9", "look", '{"a":')]
    assert [m["role"] for m in event.messages] == ["system", "user"]


def test_a_failed_responses_stream_is_the_calls_error():
    failed = {"id": "r1", "status": "failed", "error": {"code": "server_error", "message": "boom"}, "output": []}
    events = [
        {"type": "response.created", "response": {"id": "r1", "status": "in_progress", "output": []}},
        {"type": "response.failed", "response": failed},
    ]
    event = llm_event("x", "/v1/responses", b'{"model": "m", "input": "x"}', 200, _sse(events), True, None)
    assert (event.error, event.finish_reason) == ("the answer reports an error: boom", "failed")


def test_an_api_fae_does_not_read_is_a_call_with_unknown_tokens():
    body = {"candidates": [{"content": {"parts": [{"text": "hi"}]}}], "usageMetadata": {"totalTokenCount": 9}}
    event = llm_event(
        "x", "/v1beta/models/gemini-x:generateContent", b'{"contents": []}', 200, json.dumps(body).encode(), False, None
    )
    assert event.api == "other" and event.error is None
    assert (event.prompt_tokens, event.completion_tokens, event.total_tokens) == (None, None, None)


def test_openai_cache_counts_are_read_from_the_usage_details():
    reply = {
        "model": "m",
        "status": "completed",
        "output": [],
        "usage": {
            "input_tokens": 50,
            "output_tokens": 5,
            "total_tokens": 55,
            "input_tokens_details": {"cached_tokens": 30, "cache_write_tokens": 12},
        },
    }
    event = llm_event(
        "x", "/v1/responses", b'{"model": "m", "input": "x"}', 200, json.dumps(reply).encode(), False, None
    )
    assert (event.prompt_tokens, event.cache_read_tokens, event.cache_write_tokens) == (50, 30, 12)
    chat = {
        "choices": [],
        "usage": {"prompt_tokens": 9, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 4}},
    }
    event = llm_event("x", "/v1/chat/completions", b'{"model": "m"}', 200, json.dumps(chat).encode(), False, None)
    assert (event.total_tokens, event.cache_read_tokens, event.cache_write_tokens) == (10, 4, None)
