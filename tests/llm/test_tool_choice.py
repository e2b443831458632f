"""The scripted server follows the API's n, tools and tool_choice rules, seen through the official openai client."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from fae.llm import LlmServer
from tests.llm.booking import BOOKING_PROMPT, OFFERED_TOOLS

PATIENT = {"resourceType": "Patient", "id": "p1"}
SEARCH_TOOL = {"type": "function", "function": {"name": "searchResources", "parameters": {"type": "object"}}}
FIRST = [{"role": "user", "content": BOOKING_PROMPT}]


def client_of(server: LlmServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=10)


def after_both_calls() -> list[dict[str, Any]]:
    """The conversation once both plan calls are answered: the next move is the answer."""
    messages: list[dict[str, Any]] = list(FIRST)
    for index, result in enumerate([PATIENT, {"resourceType": "Appointment", "id": "a7"}]):
        call = {"id": f"c{index}", "type": "function", "function": {"name": "createResource", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{index}", "content": json.dumps(result)},
        ]
    return messages


def test_n_gives_that_many_alike_choices(llm_server: LlmServer) -> None:
    client = client_of(llm_server)
    one = client.chat.completions.create(model="scripted:gold", messages=FIRST, tools=OFFERED_TOOLS)
    three = client.chat.completions.create(model="scripted:gold", messages=FIRST, tools=OFFERED_TOOLS, n=3)
    assert [choice.index for choice in three.choices] == [0, 1, 2]
    assert all(choice.message == one.choices[0].message for choice in three.choices)
    assert three.usage.completion_tokens == 3 * one.usage.completion_tokens
    assert three.usage.prompt_tokens == one.usage.prompt_tokens


def test_n_streamed_sends_every_choice(llm_server: LlmServer) -> None:
    stream = client_of(llm_server).chat.completions.create(
        model="scripted:gold", messages=after_both_calls(), tools=OFFERED_TOOLS, n=2, stream=True
    )
    texts: dict[int, str] = {}
    finished: dict[int, str] = {}
    for chunk in stream:
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                finished[choice.index] = choice.finish_reason
    assert texts == {0: "Booked appointment a7 for patient p1.", 1: "Booked appointment a7 for patient p1."}
    assert finished == {0: "stop", 1: "stop"}


@pytest.mark.parametrize("n", [0, 129, "2", True, 1.5])
def test_a_bad_n_is_refused_like_the_api(llm_server: LlmServer, n: Any) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client_of(llm_server).chat.completions.create(model="scripted:gold", messages=FIRST, n=n)
    assert refused.value.body["param"] == "n", refused.value.body


@pytest.mark.parametrize("options", [{}, {"tools": OFFERED_TOOLS, "tool_choice": "none"}])
def test_without_tools_or_with_choice_none_the_reply_is_text(llm_server: LlmServer, options: dict) -> None:
    reply = client_of(llm_server).chat.completions.create(model="scripted:gold", messages=FIRST, **options)
    choice = reply.choices[0]
    assert choice.message.tool_calls is None and choice.finish_reason == "stop"
    assert "createResource" in choice.message.content and "Lovelace" in choice.message.content


def test_text_only_holds_when_streamed(llm_server: LlmServer) -> None:
    stream = client_of(llm_server).chat.completions.create(model="scripted:gold", messages=FIRST, stream=True)
    deltas = [choice.delta for chunk in stream for choice in chunk.choices]
    assert not any(delta.tool_calls for delta in deltas)
    assert "createResource" in "".join(delta.content or "" for delta in deltas)


def test_choice_naming_the_next_call_forces_it(llm_server: LlmServer) -> None:
    reply = client_of(llm_server).chat.completions.create(
        model="scripted:gold",
        messages=FIRST,
        tools=[SEARCH_TOOL, *OFFERED_TOOLS],
        tool_choice={"type": "function", "function": {"name": "createResource"}},
    )
    (call,) = reply.choices[0].message.tool_calls
    assert call.function.name == "createResource" and reply.choices[0].finish_reason == "tool_calls"


def test_required_lets_a_call_through(llm_server: LlmServer) -> None:
    reply = client_of(llm_server).chat.completions.create(
        model="scripted:gold", messages=FIRST, tools=OFFERED_TOOLS, tool_choice="required"
    )
    assert reply.choices[0].message.tool_calls[0].function.name == "createResource"


@pytest.mark.parametrize(
    ("messages", "options", "said"),
    [
        # the API's own refusals
        (FIRST, {"tool_choice": "required"}, "needs 'tools'"),
        (FIRST, {"tool_choice": {"type": "function", "function": {"name": "createResource"}}}, "needs 'tools'"),
        (
            FIRST,
            {"tools": OFFERED_TOOLS, "tool_choice": {"type": "function", "function": {"name": "deleteResource"}}},
            "not in 'tools'",
        ),
        (FIRST, {"tools": OFFERED_TOOLS, "tool_choice": "sometimes"}, "'tool_choice' must be"),
        (FIRST, {"tools": [{"type": "function", "function": {}}]}, "not a function tool"),
        # moves a scripted plan cannot be forced into
        (
            FIRST,
            {
                "tools": [SEARCH_TOOL, *OFFERED_TOOLS],
                "tool_choice": {"type": "function", "function": {"name": "searchResources"}},
            },
            "its next move is a call to createResource",
        ),
        (after_both_calls(), {"tools": OFFERED_TOOLS, "tool_choice": "required"}, "its next move is its answer"),
        (
            after_both_calls(),
            {"tools": OFFERED_TOOLS, "tool_choice": {"type": "function", "function": {"name": "createResource"}}},
            "its next move is its answer",
        ),
    ],
)
def test_tool_choice_refusals(llm_server: LlmServer, messages: list, options: dict, said: str) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client_of(llm_server).chat.completions.create(model="scripted:gold", messages=messages, **options)
    body = refused.value.body
    assert said in body["message"], body
    assert body["param"].startswith(("tool_choice", "tools")), body


def test_responses_api_without_tools_answers_in_text(llm_server: LlmServer) -> None:
    reply = client_of(llm_server).responses.create(model="scripted:gold", input=BOOKING_PROMPT)
    assert [item.type for item in reply.output] == ["message"]
    assert "createResource" in reply.output_text
