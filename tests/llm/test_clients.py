"""The server as real clients see it: langchain-openai's ChatOpenAI with tools, the openai SDK."""

from __future__ import annotations

import json
import math
from typing import Any

import openai
import pytest
from langchain_core.messages import (
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_openai import ChatOpenAI, OpenAIEmbeddings

from fae.llm import LlmServer
from fae.llm.embeddings import embed
from tests.llm.booking import BOOKING_PROMPT, OFFERED_TOOLS

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "createResource",
            "description": "Create a FHIR resource.",
            "parameters": {
                "type": "object",
                "properties": {"resourceType": {"type": "string"}, "resource": {"type": "object"}},
                "required": ["resourceType", "resource"],
            },
        },
    }
]
RESULTS = {
    0: {"resourceType": "Patient", "id": "p1"},
    1: {"resourceType": "Appointment", "id": "a7"},
}


def chat(server: LlmServer, model: str = "scripted:gold", **options: Any) -> ChatOpenAI:
    options = {"max_retries": 0, "timeout": 5, **options}
    return ChatOpenAI(base_url=server.base_url, api_key="test", model=model, **options)


def run_agent(llm: Any, streamed: bool) -> tuple[list[dict[str, Any]], BaseMessage]:
    """A minimal tool loop: feed back the fake create results until the model answers."""
    messages: list[BaseMessage] = [SystemMessage("Use the tools."), HumanMessage(BOOKING_PROMPT)]
    calls: list[dict[str, Any]] = []
    for _ in range(5):
        if streamed:
            reply: Any = None
            for chunk in llm.stream(messages):
                assert isinstance(chunk, AIMessageChunk)
                reply = chunk if reply is None else reply + chunk
        else:
            reply = llm.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return calls, reply
        (call,) = reply.tool_calls
        calls.append(call)
        result = RESULTS[len(calls) - 1]
        messages.append(ToolMessage(content=json.dumps(result), tool_call_id=call["id"]))
    raise AssertionError(f"no answer after {calls}")


@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])
def test_chat_openai_drives_the_gold_plan(llm_server: LlmServer, streamed: bool) -> None:
    llm = chat(llm_server, stream_usage=True).bind_tools(TOOLS)
    calls, answer = run_agent(llm, streamed)
    assert [call["name"] for call in calls] == ["createResource", "createResource"]
    assert calls[0]["args"]["resourceType"] == "Patient"
    assert calls[1]["args"]["resource"]["participant"][0]["actor"]["reference"] == "Patient/p1"
    assert answer.content == "Booked appointment a7 for patient p1."
    usage = answer.usage_metadata
    assert usage is not None and usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_chat_openai_sees_each_fault(llm_server: LlmServer) -> None:
    messages = [HumanMessage(BOOKING_PROMPT)]
    with pytest.raises(openai.RateLimitError):
        chat(llm_server, "fault:429").invoke(messages)
    with pytest.raises(openai.InternalServerError):
        chat(llm_server, "fault:500").invoke(messages)
    with pytest.raises(openai.APITimeoutError):
        chat(llm_server, "fault:timeout", timeout=0.3).invoke(messages)
    with pytest.raises(json.JSONDecodeError):
        chat(llm_server, "fault:garbage").invoke(messages)
    with pytest.raises(openai.NotFoundError):
        chat(llm_server, "no-such-model").invoke(messages)


def test_streamed_garbage_breaks_the_stream(llm_server: LlmServer) -> None:
    with pytest.raises(ValueError):
        list(chat(llm_server, "fault:garbage").stream([HumanMessage("x")]))


def test_a_retrying_client_gets_past_429_then_ok(llm_server: LlmServer) -> None:
    client = openai.OpenAI(base_url=llm_server.base_url, api_key="test", max_retries=1, timeout=5)
    with pytest.raises(openai.RateLimitError):
        openai.OpenAI(base_url=llm_server.base_url, api_key="test", max_retries=0).chat.completions.create(
            model="fault:429-then-ok",
            messages=[{"role": "user", "content": "Retry: " + BOOKING_PROMPT}],
        )
    completion = client.chat.completions.create(
        model="fault:429-then-ok", messages=[{"role": "user", "content": BOOKING_PROMPT}], tools=OFFERED_TOOLS
    )
    assert completion.choices[0].message.tool_calls[0].function.name == "createResource"


def test_role_models_answer_json(llm_server: LlmServer) -> None:
    trajectory = (
        "Task: book an appointment.\n[call createResource] "
        '{"resourceType": "Appointment"}\nresult: {"resourceType": "OperationOutcome", '
        '"issue": [{"severity": "error", "diagnostics": "participant is required"}]}'
    )
    evaluator = json.loads(chat(llm_server, "scripted:evaluator").invoke([HumanMessage(trajectory)]).content)
    assert evaluator["success"] is False
    reflector = json.loads(chat(llm_server, "scripted:reflector").invoke([HumanMessage(trajectory)]).content)
    assert reflector["micro"] == [
        {
            "resource": "Appointment",
            "operation": "create",
            "tip": ("When you create Appointment, the server said 'participant is required'; fix that first."),
        }
    ]
    assert {"reflection_text", "macro_summary", "heuristic"} <= set(reflector)
    judge = json.loads(chat(llm_server, "scripted:judge").invoke([HumanMessage("judge this run")]).content)
    assert judge["label"] == "agreement"


def test_role_models_can_be_told_otherwise_through_the_registry(llm_server: LlmServer) -> None:
    import httpx

    entry = {"match": "run 17", "judge": {"label": "validator_too_strict", "reason": "told so"}}
    assert httpx.post(f"{llm_server.root_url}/_fae/plans", json=entry).status_code == 201
    told = json.loads(chat(llm_server, "scripted:judge").invoke([HumanMessage("judge run 17")]).content)
    assert told == {"label": "validator_too_strict", "reason": "told so"}
    verdict_tool = {
        "type": "function",
        "function": {"name": "Verdict", "parameters": {"type": "object"}},
    }
    forced = chat(llm_server, "scripted:judge").bind_tools([verdict_tool], tool_choice="Verdict")
    call = forced.invoke([HumanMessage("judge run 17")]).tool_calls[0]
    assert call["name"] == "Verdict" and call["args"]["label"] == "validator_too_strict"


def test_embeddings_are_deterministic_hashed_bags_of_words(llm_server: LlmServer) -> None:
    client = openai.OpenAI(base_url=llm_server.base_url, api_key="test", max_retries=0)
    texts = ["create Patient with a name", "create a Patient", "delete the Observation"]
    vectors = [item.embedding for item in client.embeddings.create(model="hashed-bow", input=texts).data]
    assert vectors[0] == pytest.approx(embed(texts[0]))
    assert len(vectors[0]) == 384
    assert math.fsum(x * x for x in vectors[0]) == pytest.approx(1.0, abs=1e-5)

    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))

    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2])
    lc = OpenAIEmbeddings(
        base_url=llm_server.base_url,
        api_key="test",
        model="hashed-bow",
        check_embedding_ctx_length=False,
    )
    assert lc.embed_query(texts[0]) == pytest.approx(vectors[0])
    short = client.embeddings.create(model="hashed-bow", input="x y", dimensions=8, encoding_format="float")
    assert len(short.data[0].embedding) == 8


def test_responses_api_plays_the_plan(llm_server: LlmServer) -> None:
    client = openai.OpenAI(base_url=llm_server.base_url, api_key="test", max_retries=0)
    tools = [{"type": "function", "name": "createResource", "parameters": {"type": "object"}}]
    first = client.responses.create(model="scripted:gold", input=BOOKING_PROMPT, tools=tools)
    (call,) = first.output
    assert call.type == "function_call" and call.name == "createResource"
    second = client.responses.create(
        model="scripted:gold",
        tools=tools,
        input=[
            {"role": "user", "content": BOOKING_PROMPT},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {
                "type": "function_call_output",
                "call_id": call.call_id,
                "output": json.dumps(RESULTS[0]),
            },
        ],
    )
    arguments = json.loads(second.output[0].arguments)
    assert arguments["resource"]["participant"][0]["actor"]["reference"] == "Patient/p1"
    assert second.usage.total_tokens > 0
