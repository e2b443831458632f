"""A seeded paraphrase comes from the LLM through the recording proxy, so it is in the log."""

from __future__ import annotations

import json

import anyio

from fae.harness.run import Paraphrase
from fae.harness.suite_runner import plan_suite, record_suite, render_task
from fae.llm import LlmServer, PlanRegistry, create_app, entry_from_dict
from fae.plan import plan_to_dict
from fae.store.log import EventLog
from tests.run_report import why_not_finished

TASK = "rec-create-patient"


def _record(log, registry, agent, paraphrase):
    with LlmServer(create_app(registry)) as llm:
        return anyio.run(
            lambda: record_suite(log, plan_suite([TASK], [0], [agent], 1), llm_url=llm.base_url, paraphrase=paraphrase)
        )


def test_the_agent_sees_the_logged_paraphrase_and_still_passes(tmp_path):
    rendered = render_task(TASK, 0)
    registry = PlanRegistry()
    # the plan matches a line of the original body, which the paraphrase keeps word for word
    body_line = rendered.prompt.split("\n\n", 1)[1].strip().splitlines()[0]
    registry.add(entry_from_dict({"match": body_line, "plan": plan_to_dict(rendered.gold_plan)}))
    log = tmp_path / "p.duckdb"
    result = _record(log, registry, "langchain:baseline@scripted:gold", Paraphrase("scripted:paraphrase", 7))
    assert result.statuses == {"finished": 1}, why_not_finished(log)
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT actor, payload FROM events WHERE kind = 'PromptParaphrased'")
        [(actor, payload)] = rows
        event = json.loads(payload)
        assert actor == "harness" and event["accepted"] and event["prompt"] != rendered.prompt
        _, calls = opened.query(
            "SELECT actor, messages FROM (SELECT actor, payload->'$.messages' AS messages"
            " FROM events WHERE kind = 'LlmCalled') ORDER BY actor"
        )
        by_actor = {}
        for call_actor, messages in calls:
            by_actor.setdefault(call_actor, []).append(json.loads(messages))
        assert len(by_actor["harness"]) == 1  # the paraphrase request itself
        first_user = next(m for m in by_actor["agent"][0] if m["role"] == "user")
        assert first_user["content"].strip() == event["prompt"].strip()
        _, verdicts = opened.query("SELECT outcome FROM verdicts WHERE judge = 'task'")
        assert {v for (v,) in verdicts} == {"pass"}


def test_paraphrase_needs_an_llm_endpoint(tmp_path):
    log = tmp_path / "q.duckdb"
    result = anyio.run(
        lambda: record_suite(log, plan_suite([TASK], [0], ["gold"], 1), paraphrase=Paraphrase("scripted:paraphrase"))
    )
    assert result.statuses == {"failed": 1}
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query("SELECT error FROM runs")
    assert "--llm-url" in rows[0][0]
