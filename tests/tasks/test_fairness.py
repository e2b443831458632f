"""Nothing the agent cannot know, and nothing given away: over variations 0-39 of every task
(0-199 where a prompt names instants, and for the HbA1c values),
prompts never show an answer, windows have no slot on their ends, numbers have no look-alike,
and gold plans use only the prompt and their own results."""

from __future__ import annotations

import re

import pytest
from gold_origins import hidden_literals
from task_harness import SWEEP

from fae.agents.plan_runner import PlanRun, ToolOutcome
from fae.errors import TaskError
from fae.tasks import load_suite
from fae.tasks.answer_checks import DEFAULT_TOLERANCE, expected_ids
from fae.tasks.check_spec import CheckSpec
from fae.tasks.model import ANSWER_RULES
from fae.tasks.state import bundle_resources
from fae.tasks.suite import task_from_dict

TASK_IDS = list(load_suite())
_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")


def _body(prompt: str) -> str:
    return prompt.partition("\n\n")[2]


def _answer_ids(spec: CheckSpec) -> list[str]:
    found = []
    for want in spec.answer.values():
        if want.id is not None:
            found += expected_ids(str(want.id))
        if want.ids is not None:
            found += expected_ids(want.ids)
        if want.updated is not None:
            found.append(want.updated.split("/")[1])
    return found


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_no_prompt_shows_an_answer_and_every_prompt_states_the_answer_rules(render, task_id):
    shown = []
    for variation in SWEEP:
        rendered = render(task_id, variation)
        assert rendered.prompt.rstrip().endswith(ANSWER_RULES)
        shown += [f"v{variation}: {i}" for i in _answer_ids(rendered.check_spec) if i in rendered.prompt]
    assert not shown, f"the prompt gives away the answer: {shown}"


WIDE = range(200)
"""Render-only checks of the tasks whose prompts name instants sweep this many variations."""


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_no_slot_starts_on_a_window_end_the_prompt_names(render, task_id):
    collisions = []
    windowed = bool(_INSTANT.search(_body(render(task_id, 0).prompt)))
    for variation in WIDE if windowed else SWEEP:
        rendered = render(task_id, variation)
        ends = set(_INSTANT.findall(_body(rendered.prompt)))
        starts = {
            r["start"]
            for r in bundle_resources(rendered.seed_bundle)
            if r["resourceType"] in ("Slot", "Appointment") and "start" in r
        }
        collisions += [f"v{variation}: {end}" for end in sorted(ends & starts)]
    assert not collisions, f"a slot starts exactly on a window end: {collisions}"


def test_no_other_seeded_value_passes_for_the_latest_hba1c(render):
    near = []
    for variation in WIDE:
        rendered = render("rec-latest-hba1c", variation)
        want = rendered.check_spec.answer["VALUE"].number
        latest = rendered.params["latest_id"]
        for resource in bundle_resources(rendered.seed_bundle):
            value = resource.get("valueQuantity", {}).get("value")
            if resource["id"] != latest and value is not None:
                if abs(float(value) - float(want)) <= float(DEFAULT_TOLERANCE) + 1e-9:
                    near.append(f"v{variation}: {resource['id']} has {value}, the answer is {want}")
    assert not near, near


@pytest.mark.parametrize("task_id", [t for t in TASK_IDS if load_suite()[t].derived])
def test_derived_parameters_are_dates_never_ids_or_answers(render, task_id):
    """What a gold plan may use without the prompt showing it: dates worked out from the clock."""
    for variation in (0, 1, 2):
        rendered = render(task_id, variation)
        for name in load_suite()[task_id].derived:
            value = rendered.params[name]
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}Z)?", value), (name, value)


def _raw(gold_plan, prompt="Patient {patient_id}.", derived=None):
    raw = {
        "id": "x-task",
        "title": "x",
        "difficulty": 1,
        "writes": False,
        "scenario": "known_patient",
        "prompt": prompt,
        "answer_tags": ["PATIENT"],
        "gold_plan": gold_plan,
        "check": {"answer": {"PATIENT": {"id": "{patient_id}"}}},
    }
    if derived:
        raw["derived"] = derived
    return raw


def test_a_gold_plan_using_a_parameter_the_prompt_hides_does_not_render():
    hidden = task_from_dict(_raw([{"answer": "<PATIENT>{patient_id}</PATIENT>"}], prompt="Find {family}."), "records")
    with pytest.raises(TaskError, match=r"uses \['patient_id'\], which the prompt does not show"):
        hidden.render(0)
    shown = task_from_dict(_raw([{"answer": "<PATIENT>{patient_id}</PATIENT>"}]), "records")
    assert shown.render(0).gold_plan.steps[-1].answer.startswith("<PATIENT>pat-")


def test_hidden_literals_are_found(render):
    rendered = render("rec-first-condition", 0)
    wanted = rendered.params["first_condition_id"]
    searched = (
        "searchResources",
        {"resourceType": "Condition", "params_json": {"patient": rendered.params["patient_id"]}},
    )
    honest = PlanRun(
        calls=((*searched, ToolOutcome({"entry": [{"resource": {"id": wanted}}]})),),
        answer=f"<CONDITION>{wanted}</CONDITION>",
    )
    assert hidden_literals(rendered, honest) == []
    blind = PlanRun(calls=((*searched, ToolOutcome({"total": 0})),), answer=f"<CONDITION>{wanted}</CONDITION>")
    assert hidden_literals(rendered, blind) == [f"the answer uses {wanted}"]
    peeking = PlanRun(
        calls=(("getResourceById", {"resourceType": "Condition", "resourceId": wanted}, ToolOutcome({})),),
        answer="<CONDITION>NONE</CONDITION>",
    )
    assert hidden_literals(rendered, peeking) == [f"call 1 (getResourceById) uses {wanted}"]
    counted = PlanRun(calls=((*searched, ToolOutcome({"total": 0})),), answer="<COUNT>17</COUNT>")
    assert hidden_literals(rendered, counted) == ["the answer uses the number 17"]
