"""The server over real HTTP with a raw httpx client: plans, streaming, usage, registry, errors."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from fae.llm import MODELS, LlmServer
from tests.llm.booking import BOOKING_PROMPT, CREATED, OFFERED_TOOLS

PATIENT = {"resourceType": "Patient", "id": "p1"}
APPOINTMENT = {"resourceType": "Appointment", "id": "a7"}


def post(server: LlmServer, body: dict[str, Any], timeout: float = 5.0) -> httpx.Response:
    return httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=timeout)


def drive(
    server: LlmServer, model: str, results: list[Any], prompt: str = BOOKING_PROMPT
) -> tuple[list[tuple[str, dict[str, Any]]], str, list[dict[str, Any]]]:
    """Play the agent: answer each tool call with the next result until the model answers."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You act on a FHIR server through tools."},
        {"role": "user", "content": prompt},
    ]
    calls: list[tuple[str, dict[str, Any]]] = []
    bodies = []
    for result in [*results, None]:
        response = post(server, {"model": model, "messages": messages, "tools": OFFERED_TOOLS})
        assert response.status_code == 200, response.text
        body = response.json()
        bodies.append(body)
        message = body["choices"][0]["message"]
        if not message.get("tool_calls"):
            assert body["choices"][0]["finish_reason"] == "stop"
            return calls, message["content"], bodies
        assert body["choices"][0]["finish_reason"] == "tool_calls"
        (call,) = message["tool_calls"]
        calls.append((call["function"]["name"], json.loads(call["function"]["arguments"])))
        messages.append(message)
        content = result if isinstance(result, str) else json.dumps(result)
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    raise AssertionError(f"the model kept calling tools after {len(results)} results: {calls}")


def test_gold_plan_uses_the_ids_the_tools_returned(llm_server: LlmServer) -> None:
    calls, answer, bodies = drive(llm_server, "scripted:gold", [PATIENT, APPOINTMENT])
    assert [name for name, _ in calls] == ["createResource", "createResource"]
    assert calls[0][1]["resource"]["name"] == [{"family": "Lovelace"}]
    assert calls[1][1]["resource"]["participant"][0]["actor"]["reference"] == "Patient/p1"
    assert answer == "Booked appointment a7 for patient p1."
    for body in bodies:
        usage = body["usage"]
        assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert bodies[1]["usage"]["prompt_tokens"] > bodies[0]["usage"]["prompt_tokens"]


def test_tool_results_are_read_tolerantly(llm_server: LlmServer) -> None:
    mcp_blocks = json.dumps([{"type": "text", "text": json.dumps(PATIENT)}])
    calls, _, _ = drive(llm_server, "scripted:gold", [mcp_blocks, "created: " + json.dumps(APPOINTMENT)])
    assert calls[1][1]["resource"]["participant"][0]["actor"]["reference"] == "Patient/p1"


def test_answers_are_deterministic(llm_server: LlmServer) -> None:
    body = {"model": "scripted:gold", "messages": [{"role": "user", "content": BOOKING_PROMPT}]}
    first, second = post(llm_server, body).json(), post(llm_server, body).json()
    assert first == second
    assert first["created"] == CREATED


def test_mistake_recover_makes_a_wrong_call_then_follows_the_plan(llm_server: LlmServer) -> None:
    outcome = {
        "resourceType": "OperationOutcome",
        "issue": [{"severity": "error", "diagnostics": "unknown type"}],
    }
    calls, answer, _ = drive(llm_server, "scripted:mistake-recover", [outcome, PATIENT, APPOINTMENT])
    assert len(calls) == 3
    assert calls[0][1]["resourceType"] != "Patient"
    assert calls[0][1]["resource"]["resourceType"] != "Patient"
    assert calls[1][1]["resourceType"] == "Patient"
    assert calls[2][1]["resource"]["participant"][0]["actor"]["reference"] == "Patient/p1"
    assert answer == "Booked appointment a7 for patient p1."


def test_wrong_answer_follows_the_plan_but_names_other_ids(llm_server: LlmServer) -> None:
    calls, answer, _ = drive(llm_server, "scripted:wrong-answer", [PATIENT, APPOINTMENT])
    assert len(calls) == 2
    assert "a7" not in answer and "p1" not in answer
    assert answer.startswith("Booked appointment wrong-")


def test_give_up_answers_without_calls(llm_server: LlmServer) -> None:
    calls, answer, _ = drive(llm_server, "scripted:give-up", [])
    assert calls == []
    assert "cannot" in answer


def read_sse(response: httpx.Response) -> list[Any]:
    assert response.headers["content-type"].startswith("text/event-stream")
    events = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_streamed_tool_call_is_assembled_from_deltas(llm_server: LlmServer) -> None:
    messages = [
        {"role": "user", "content": BOOKING_PROMPT},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "createResource", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps(PATIENT)},
    ]
    body = {
        "model": "scripted:gold",
        "messages": messages,
        "tools": OFFERED_TOOLS,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events = read_sse(post(llm_server, body))
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks if chunk["choices"]]
    pieces = [d["tool_calls"][0] for d in deltas if d.get("tool_calls")]
    assert pieces[0]["function"]["name"] == "createResource" and pieces[0]["id"]
    arguments = json.loads("".join(p["function"]["arguments"] for p in pieces))
    assert arguments["resource"]["participant"][0]["actor"]["reference"] == "Patient/p1"
    assert len(pieces) > 2
    finishes = [chunk["choices"][0]["finish_reason"] for chunk in chunks if chunk["choices"]]
    assert finishes[-1] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    non_streamed = post(llm_server, {**body, "stream": False}).json()
    assert chunks[-1]["usage"] == non_streamed["usage"]


def test_streamed_answer_without_usage(llm_server: LlmServer) -> None:
    body = {
        "model": "scripted:give-up",
        "messages": [{"role": "user", "content": "x"}],
        "stream": True,
    }
    events = read_sse(post(llm_server, body))
    chunks = events[:-1]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == post(llm_server, {**body, "stream": False}).json()["choices"][0]["message"]["content"]
    assert len(chunks) > 3
    assert all("usage" not in chunk for chunk in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_fault_429_and_500_answer_openai_errors(llm_server: LlmServer) -> None:
    messages = [{"role": "user", "content": BOOKING_PROMPT}]
    limited = post(llm_server, {"model": "fault:429", "messages": messages})
    assert limited.status_code == 429
    assert limited.json()["error"]["type"] == "rate_limit_error"
    broken = post(llm_server, {"model": "fault:500", "messages": messages})
    assert broken.status_code == 500
    assert broken.json()["error"]["type"] == "server_error"


def test_fault_429_then_ok_refuses_each_request_once(llm_server: LlmServer) -> None:
    body = {
        "model": "fault:429-then-ok",
        "messages": [{"role": "user", "content": BOOKING_PROMPT}],
        "tools": OFFERED_TOOLS,
    }
    assert post(llm_server, body).status_code == 429
    retried = post(llm_server, body)
    assert retried.status_code == 200
    assert retried.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "createResource"


def test_fault_timeout_outlasts_a_short_client_timeout(llm_server: LlmServer) -> None:
    with pytest.raises(httpx.ReadTimeout):
        post(
            llm_server,
            {"model": "fault:timeout", "messages": [{"role": "user", "content": "x"}]},
            timeout=0.3,
        )


def test_fault_garbage_is_a_200_that_does_not_parse(llm_server: LlmServer) -> None:
    response = post(llm_server, {"model": "fault:garbage", "messages": [{"role": "user", "content": "x"}]})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    with pytest.raises(json.JSONDecodeError):
        response.json()


def test_unknown_model_is_an_openai_404(llm_server: LlmServer) -> None:
    response = post(llm_server, {"model": "gpt-nonexistent", "messages": [{"role": "user", "content": "x"}]})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "model_not_found"


def test_bad_requests_are_400(llm_server: LlmServer) -> None:
    no_plan = post(
        llm_server,
        {"model": "scripted:gold", "messages": [{"role": "user", "content": "unrelated"}]},
    )
    assert no_plan.status_code == 400
    assert "no registered plan" in no_plan.json()["error"]["message"]
    not_json = httpx.post(f"{llm_server.base_url}/chat/completions", content=b"{nope")
    assert not_json.status_code == 400
    no_messages = post(llm_server, {"model": "scripted:gold"})
    assert no_messages.status_code == 400


def test_models_lists_every_behaviour(llm_server: LlmServer) -> None:
    listed = httpx.get(f"{llm_server.base_url}/models").json()
    names = [model["id"] for model in listed["data"]]
    assert names == list(MODELS)
    assert {"scripted:gold", "fault:429", "scripted:judge"} <= set(names)


def test_plans_registered_at_run_time_are_used(llm_server: LlmServer) -> None:
    plans_url = f"{llm_server.root_url}/_fae/plans"
    entry = {
        "match": "Find the patient Grace",
        "variables": {"family": "Hopper"},
        "plan": {
            "name": "lookup",
            "steps": [
                {
                    "call": "searchResources",
                    "args": {"resourceType": "Patient", "params": {"family": "${family}"}},
                    "save": "found",
                },
                {"answer": "${found.entry.0.resource.id}"},
            ],
        },
    }
    created = httpx.post(plans_url, json=entry)
    assert created.status_code == 201
    assert created.json()["plan"]["name"] == "lookup"
    assert "Find the patient Grace" in [e["match"] for e in httpx.get(plans_url).json()["plans"]]
    bundle = {
        "resourceType": "Bundle",
        "entry": [{"resource": {"resourceType": "Patient", "id": "g42"}}],
    }
    calls, answer, _ = drive(llm_server, "scripted:gold", [bundle], prompt="Find the patient Grace Hopper.")
    assert calls == [("searchResources", {"resourceType": "Patient", "params": {"family": "Hopper"}})]
    assert answer == "g42"


def test_malformed_plan_registration_is_rejected(llm_server: LlmServer) -> None:
    bad = httpx.post(
        f"{llm_server.root_url}/_fae/plans",
        json={"match": "m", "plan": {"steps": [{"answer": "a"}, {"call": "x"}]}},
    )
    assert bad.status_code == 400
    assert "answer must be the last step" in bad.json()["error"]["message"]


def test_unresolvable_reference_is_a_400_naming_the_step(llm_server: LlmServer) -> None:
    messages = [
        {"role": "user", "content": BOOKING_PROMPT},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "createResource", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "server exploded"},
    ]
    response = post(llm_server, {"model": "scripted:gold", "messages": messages})
    assert response.status_code == 400
    assert "call 2" in response.json()["error"]["message"]
