"""The local LLM server plays any suite task's gold plan unregistered: as rendered, reworded, from the CLI."""

from __future__ import annotations

import re

import pytest
from openai import BadRequestError, OpenAI
from typer.testing import CliRunner

from fae.cli import app as fae_app
from fae.llm import LlmServer, PlanRegistry, create_app
from fae.llm.suite_plans import SuitePlans
from fae.store.log import EventLog
from fae.tasks.paraphrase import accept_paraphrase, must_keep
from fae.tasks.suite import load_suite
from tests.mcp.served import served

SUITE = load_suite()
PLANS = SuitePlans(SUITE)


def body_of(prompt: str) -> str:
    return prompt.partition("\n\n")[2]


@pytest.mark.parametrize("task_id", ["rec-record-condition", "sched-book-appointment", "ord-order-wgs"])
@pytest.mark.parametrize("variation", [0, 1, 7])
def test_a_rendered_prompt_finds_its_own_gold_plan(task_id, variation):
    rendered = SUITE[task_id].render(variation)
    entry = PLANS.find(rendered.prompt)
    assert entry is not None and entry.plan == rendered.gold_plan


def test_a_reworded_prompt_that_keeps_every_value_finds_its_plan():
    rendered = SUITE["rec-record-condition"].render(1)
    clock, body = rendered.prompt.split("\n\n", 1)
    kept = must_keep(rendered)  # what the harness demands of a paraphrase it accepts
    reworded = f"{clock}\n\nPlease see to this, in your own words: {' / '.join(kept)}.\n"
    assert accept_paraphrase(rendered, body_of(reworded))[0] is not None
    assert body.strip() not in reworded
    entry = PLANS.find(reworded)
    assert entry is not None and entry.plan == rendered.gold_plan
    for dropped in kept:  # a rewording that lost any one of them is not this variation
        assert PLANS.find(reworded.replace(dropped, "")) is None, dropped


def test_prompts_that_are_not_that_variation_find_nothing():
    rendered = SUITE["rec-record-condition"].render(1)
    body = body_of(rendered.prompt)
    patient = re.search(r"pat-\w+", body).group(0)
    assert PLANS.find(body) is None  # no clock block: no variation
    assert PLANS.find(rendered.prompt.replace(patient, "pat-000000")) is None  # a value lost
    other_clock = SUITE["rec-record-condition"].render(2).prompt.split("\n\n", 1)[0]
    assert PLANS.find(f"{other_clock}\n\n{body}") is None  # another variation's clock
    other_task = SUITE["sched-book-appointment"].render(1).prompt.split("\n\n", 1)[0]
    assert PLANS.find(f"{other_task}\n\n{body}") is None  # another task's clock, same variation
    assert PLANS.find("Current date and time: (1999-01-01T00:00:00Z)\n\nhello") is None


def test_the_server_plays_a_suite_plan_only_with_the_suite_fallback():
    rendered = SUITE["sched-book-appointment"].render(0)
    first_call = rendered.gold_plan.steps[0]
    messages = [{"role": "user", "content": rendered.prompt}]
    tool = {"type": "function", "function": {"name": first_call.call, "parameters": {"type": "object"}}}
    with LlmServer(create_app(PlanRegistry(fallback=PLANS.find))) as llm:
        reply = OpenAI(base_url=llm.base_url, api_key="x").chat.completions.create(
            model="scripted:gold", messages=messages, tools=[tool]
        )
    call = reply.choices[0].message.tool_calls[0]
    assert call.function.name == first_call.call
    with LlmServer(create_app(PlanRegistry())) as llm, pytest.raises(BadRequestError) as refused:
        OpenAI(base_url=llm.base_url, api_key="x").chat.completions.create(
            model="scripted:gold", messages=messages, tools=[tool]
        )
    assert "no registered plan matches" in str(refused.value)


def strict_outcomes(log) -> dict[str, str]:
    with EventLog(log, read_only=True) as opened:
        _, rows = opened.query(
            "SELECT r.run_id, r.status, v.outcome FROM runs r LEFT JOIN verdicts v ON v.run_id = r.run_id"
            " AND v.judge = 'task' AND v.rule_set->>'$.mode' = 'strict' ORDER BY r.run_id"
        )
        _, errors = opened.query("SELECT run_id, error FROM runs WHERE status <> 'finished'")
    assert not errors, errors
    return {run_id: f"{status}/{outcome}" for run_id, status, outcome in rows}


def test_record_suite_tasks_with_langchain_on_scripted_gold_from_the_cli(tmp_path):
    log = tmp_path / "log.duckdb"
    tasks = ["rec-record-condition", "sched-book-appointment", "ord-order-wgs"]
    with served("llm", "serve") as origin:
        result = CliRunner().invoke(
            fae_app,
            [
                "record",
                "--log",
                str(log),
                *[arg for t in tasks for arg in ("--task", t)],
                "--variations",
                "0-1",
                "--agent",
                "langchain:baseline@scripted:gold",
                "--llm-url",
                f"{origin}/v1",
            ],
        )
    assert result.exit_code == 0, result.output
    outcomes = strict_outcomes(log)
    assert len(outcomes) == 6, outcomes
    assert set(outcomes.values()) == {"finished/pass"}, outcomes


def test_a_paraphrased_prompt_still_plays_its_gold_plan(tmp_path):
    log = tmp_path / "log.duckdb"
    with served("llm", "serve") as origin:
        result = CliRunner().invoke(
            fae_app,
            [
                "record",
                "--log",
                str(log),
                "--task",
                "rec-record-condition",
                "--variations",
                "1",
                "--agent",
                "langchain:baseline@scripted:gold",
                "--llm-url",
                f"{origin}/v1",
                "--paraphrase-model",
                "scripted:paraphrase",
            ],
        )
    assert result.exit_code == 0, result.output
    with EventLog(log, read_only=True) as opened:
        _, paraphrases = opened.query(
            "SELECT count(*) FROM events WHERE kind = 'PromptParaphrased' AND payload->>'$.accepted' = 'true'"
        )
    assert paraphrases == [(1,)]
    assert set(strict_outcomes(log).values()) == {"finished/pass"}


def test_every_suite_variation_finds_exactly_its_own_plan_as_rendered_and_reworded():
    for variation in range(4):
        for task_id, task in SUITE.items():
            rendered = task.render(variation)
            clock = rendered.prompt.partition("\n\n")[0]
            words = " ".join(reversed(body_of(rendered.prompt).split()))  # its vocabulary, not its sentences
            reworded = f"{clock}\n\nIn other words: {' / '.join(must_keep(rendered))}. {words}\n"
            for prompt in (rendered.prompt, reworded):
                found = PLANS.matches(prompt)
                assert [(r.task_id, r.variation) for r in found] == [(task_id, variation)], prompt


def test_tasks_sharing_a_world_are_told_apart_by_what_the_rewording_keeps():
    booking, earliest = SUITE["sched-book-appointment"].render(0), SUITE["sched-earliest-free-slot"].render(0)
    assert booking.now == earliest.now and set(must_keep(earliest)) < set(must_keep(booking))  # one world
    clock = booking.prompt.partition("\n\n")[0]
    values_only = f"{clock}\n\nPlease: {' / '.join(must_keep(booking))}.\n"
    assert [r.task_id for r in PLANS.matches(values_only)] == ["sched-book-appointment"]  # the most kept
    words = " ".join(reversed(body_of(earliest.prompt).split()))
    assert [r.task_id for r in PLANS.matches(f"{clock}\n\n{words}\n")] == ["sched-earliest-free-slot"]
