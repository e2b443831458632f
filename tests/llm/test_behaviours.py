"""Pure behaviour functions: reading conversations, default mistakes, verdicts and reflections."""

from __future__ import annotations

import json

from fae.llm.behaviours import MISTAKE_RECOVER, evaluate, reflect, reply_for
from fae.llm.conversation import answered_calls, parse_tool_content
from fae.llm.plan_registry import PlanRegistry, entry_from_dict


def test_only_answered_tool_calls_count() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "a", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "function": {"name": "g", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": '{"id": "x"}'}]},
    ]
    calls = answered_calls(messages)
    assert [(c.name, c.result) for c in calls] == [("f", {"id": "x"})]


def test_tool_content_that_is_not_json_stays_text() -> None:
    assert parse_tool_content("Error: 404 not found") == "Error: 404 not found"
    assert parse_tool_content('result: {"id": "p9"} (created)') == {"id": "p9"}
    mcp_blocks = json.dumps([{"type": "text", "text": '{"id": "p9"}'}])
    assert parse_tool_content(mcp_blocks) == {"id": "p9"}


def test_default_mistake_misspells_the_resource_type() -> None:
    registry = PlanRegistry(
        [
            entry_from_dict(
                {
                    "match": "",
                    "steps": [
                        {
                            "call": "getResourceById",
                            "args": {"resourceType": "Patient", "id": "p1"},
                        },
                        {"answer": "ok"},
                    ],
                }
            )
        ]
    )
    reply = reply_for(MISTAKE_RECOVER, [{"role": "user", "content": "read p1"}], registry)
    assert reply.tool_call is not None
    assert reply.tool_call.arguments == {"resourceType": "Patietn", "id": "p1"}


def test_evaluator_fails_on_error_outcomes_and_give_ups() -> None:
    assert evaluate('{"issue": [{"severity": "error"}]}')["success"] is False
    assert evaluate("I cannot complete this task")["success"] is False
    assert evaluate('{"resourceType": "Patient", "id": "p1"}')["success"] is True


def test_reflection_lists_each_resource_operation_pair_once() -> None:
    text = (
        '[call searchResources] {"resourceType": "Slot", "params": {}}\n'
        '[call createResource] {"resourceType": "Appointment"}\n'
        '[call createResource] {"resourceType": "Appointment"}'
    )
    reflection = reflect(text)
    assert [(m["resource"], m["operation"]) for m in reflection["micro"]] == [
        ("Slot", "search"),
        ("Appointment", "create"),
    ]
    assert "search Slot, then create Appointment" in reflection["macro_summary"]
    assert "no server errors" in reflection["reflection_text"]
    json.dumps(reflection)
