"""The prompt's own answer format handed back is no answer, in strict and light; an answer that restates the
contract and then answers passes on its answer."""

from __future__ import annotations

import re

import pytest

from fae.tasks.answer_checks import answer_problems_light
from fae.tasks.answer_contract import echoed, mark_echoes, shown_formats
from fae.tasks.state import seeded_state
from fae.tasks.suite import task_from_dict


def _instruction(rendered) -> str:
    """The prompt's body without the clock block and the answer rules (what an agent would copy back)."""
    return rendered.prompt.split("\n\n")[1]


def test_the_formats_a_prompt_shows_are_its_placeholders_never_none(render):
    assert shown_formats(render("rec-first-condition", 0).prompt) == {"id"}
    assert shown_formats(render("sched-weekday-mornings", 0).prompt) == {"id, id"}
    assert shown_formats(render("ord-review-results", 0).prompt) == {"id", "symbol"}


@pytest.mark.parametrize("task_id", ["rec-first-condition", "rec-empty-history"])
def test_the_instruction_echoed_is_no_answer_though_it_says_none(suite, render, task_id):
    """Echoed alone, '…, or <CONDITION>NONE</CONDITION> if the patient has no recorded conditions' used to
    pass where NONE is right (the placeholder was skipped and the echoed NONE read as the answer)."""
    rendered = render(task_id, 0)
    task, state = suite[task_id], seeded_state(rendered.seed_bundle)
    echo = _instruction(rendered)
    assert [t for t, _ in echoed(rendered.prompt, echo, rendered.answer_tags)] == ["CONDITION", "CONDITION"]
    for validate in (task.validate_strict, task.validate_light):
        verdict = validate(rendered, echo, state)
        assert not verdict.passed
        assert verdict.reasons == ["<CONDITION> holds only the answer format, ['id', 'NONE'], not an answer"]


def test_the_instruction_restated_then_the_answer_passes(suite, render):
    """It used to fail as contradictory (the echoed NONE against the id)."""
    rendered = render("rec-first-condition", 0)
    right = rendered.check_spec.answer["CONDITION"].id
    state = seeded_state(rendered.seed_bundle)
    answer = f"{_instruction(rendered)}\n\nThe earliest is <CONDITION>{right}</CONDITION>."
    for validate in (suite["rec-first-condition"].validate_strict, suite["rec-first-condition"].validate_light):
        verdict = validate(rendered, answer, state)
        assert verdict.passed, verdict.reasons
    empty = render("rec-empty-history", 0)
    answer = f"{_instruction(empty)}\nThere are none: <CONDITION>NONE</CONDITION>"
    assert suite["rec-empty-history"].validate_strict(empty, answer, seeded_state(empty.seed_bundle)).passed


@pytest.mark.parametrize(
    ("answer", "left"),
    [
        ("<APPOINTMENT>id</APPOINTMENT> <SLOT>id</SLOT>", ["APPOINTMENT", "SLOT"]),
        ("<APPOINTMENT>ID</APPOINTMENT>", ["APPOINTMENT", "SLOT"]),
        ("<APPOINTMENT>APPOINTMENT</APPOINTMENT> <SLOT>slot</SLOT>", ["APPOINTMENT", "SLOT"]),
        ("Reply with <APPOINTMENT>id</APPOINTMENT> and <SLOT>id</SLOT>.", ["APPOINTMENT", "SLOT"]),
        ("<APPOINTMENT>…</APPOINTMENT> <SLOT>slot-1</SLOT>", ["APPOINTMENT"]),
    ],
)
def test_a_write_tasks_light_check_refuses_the_placeholder(render, answer, left):
    """Light judges no values, but a tag holding only the answer's shape answered nothing: it used to pass."""
    rendered = render("sched-book-appointment", 0)
    marked = mark_echoes(rendered.prompt, answer, rendered.answer_tags)
    problems, _ = answer_problems_light(rendered.check_spec.answer, marked, {})
    assert [re.search(r"<([A-Z_]+)>", p).group(1) for p in problems] == left, problems


@pytest.mark.parametrize(
    "answer",
    [
        "<CONDITION>NONE</CONDITION>",
        "The patient has no recorded conditions: <CONDITION>NONE</CONDITION>.",
        "or <CONDITION>NONE</CONDITION> if the",
        "Answer: <CONDITION>cond-1</CONDITION>",
        "Answer with its id as <CONDITION>cond-1</CONDITION>",
    ],
)
def test_an_answer_that_only_resembles_the_prompt_is_kept(render, answer):
    rendered = render("rec-first-condition", 0)
    assert mark_echoes(rendered.prompt, answer, rendered.answer_tags) == answer


def test_only_the_echoed_tags_are_marked(render):
    rendered = render("rec-first-condition", 0)
    answer = f"{_instruction(rendered)} <CONDITION>cond-1</CONDITION>"
    marked = mark_echoes(rendered.prompt, answer, rendered.answer_tags)
    assert marked.count("[echoed from the prompt: ") == 2
    assert marked.endswith(" <CONDITION>cond-1</CONDITION>")
    assert mark_echoes(rendered.prompt, None, rendered.answer_tags) is None


def test_a_format_only_the_prompt_shows_is_refused_by_a_write_tasks_light_check():
    """No general pattern knows 'the patient's record number' as a placeholder: the prompt shows it."""
    raw = {
        "id": "x-write",
        "title": "x",
        "difficulty": 1,
        "writes": True,
        "scenario": "known_patient",
        "prompt": "Patient {patient_id}. Reply <PATIENT>the patient's record number</PATIENT>.",
        "answer_tags": ["PATIENT"],
        "gold_plan": [{"answer": "<PATIENT>{patient_id}</PATIENT>"}],
        "check": {"answer": {"PATIENT": {"id": "{patient_id}"}}},
    }
    task = task_from_dict(raw, "records")
    rendered = task.render(0)
    state = seeded_state(rendered.seed_bundle)
    echo = task.validate_light(rendered, "<PATIENT>The patient's record number</PATIENT>", state)
    assert echo.reasons == ['<PATIENT> holds only the answer format, ["The patient\'s record number"], not an answer']
    assert task.validate_light(rendered, "<PATIENT>pat-x</PATIENT>", state).passed
