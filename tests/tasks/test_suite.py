"""The suite's shape: coverage, metadata, seeds without ambiguity, constants the prompt or seed gives."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import msgspec
import pytest
from task_harness import VARIATIONS

from fae.errors import TaskError
from fae.plan import AnswerStep, ToolStep
from fae.tasks import load_suite
from fae.tasks.check_spec import CheckSpec
from fae.tasks.checks import demanded_constants, instant
from fae.tasks.state import bundle_resources
from fae.tasks.suite import TOOLS, task_from_dict

TASK_IDS = list(load_suite())
DOCS = Path(__file__).parents[2] / "docs" / "tasks.md"

# The coverage list, each item with the task that covers it.
COVERAGE = {
    "create a patient": "rec-create-patient",
    "find a patient (present)": "rec-find-patient",
    "find a patient (absent)": "rec-find-patient-absent",
    "record a condition": "rec-record-condition",
    "first condition of a patient": "rec-first-condition",
    "empty history": "rec-empty-history",
    "record a procedure plan": "ord-surgery-plan",
    "find a plan within N days": "ord-find-plan-within",
    "no plan": "ord-no-plan-within",
    "coverage with a related person as subscriber": "ins-coverage-parent-subscriber",
    "find coverage (present)": "ins-find-coverage",
    "find coverage (absent)": "ins-find-coverage-absent",
    "create a related person": "ins-create-related-person",
    "create an account": "ins-create-account",
    "add a guarantor": "ins-add-guarantor",
    "account already exists": "ins-account-exists",
    "find the guarantor (present)": "ins-find-guarantor",
    "find the guarantor (absent)": "ins-find-guarantor-absent",
    "earliest free slot": "sched-earliest-free-slot",
    "slot by language, gender and city": "sched-slot-by-doctor-traits",
    "count free slots for a specialty": "sched-count-specialty-slots",
    "slots of a named provider": "sched-doctor-free-week",
    "urgent slots in a window": "sched-urgent-today",
    "free slots on the next given weekday": "sched-next-weekday-slots",
    "follow-up window N days out": "sched-follow-up-day",
    "weekday mornings within N days": "sched-weekday-mornings",
    "patient who booked a slot": "sched-who-booked-slot",
    "book and mark the slot busy": "sched-book-appointment",
    "cancel the next appointment": "sched-cancel-next",
    "cancel by provider": "sched-cancel-with-doctor",
    "cancel by weekday": "sched-cancel-on-weekday",
    "add to a waitlist": "sched-waitlist-add",
    "book from a waitlist": "sched-waitlist-book",
    "remove from a waitlist": "sched-waitlist-remove",
    "reschedule, same provider next week": "sched-reschedule-next-week",
    "reschedule, another provider same time": "sched-reschedule-other-doctor",
    "order whole-genome sequencing": "ord-order-wgs",
    "only the relevant genetic reports": "ord-relevant-reports",
    "family history as supporting information": "ord-family-history-support",
    "family member history with relationship and onset age": "rec-family-history",
    "consent for genetic testing": "ord-genetic-consent",
    "specimen": "ord-collect-specimen",
    "results review": "ord-review-results",
}


def test_suite_size_and_families(suite):
    families = Counter(task.family for task in suite.values())
    assert len(suite) >= 43
    assert set(families) == {"records", "insurance", "scheduling", "orders"}
    assert all(count >= 8 for count in families.values())


@pytest.mark.parametrize("item", list(COVERAGE))
def test_coverage_item_has_a_task(suite, item):
    assert COVERAGE[item] in suite


def test_ids_are_stable_slugs_named_like_their_files(suite):
    for task in suite.values():
        assert re.fullmatch(r"(rec|ins|sched|ord)-[a-z0-9]+(-[a-z0-9]+)*", task.id)
        assert Path(task.source).stem == task.id
        assert Path(task.source).parent.name == task.family


def _ordered_subsequence(template: tuple[str, ...], calls: list[str]) -> bool:
    remaining = iter(calls)
    return all(any(call == tool for call in remaining) for tool in template)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_metadata_agrees_with_the_gold_plan(suite, task_id):
    task = suite[task_id]
    meta = task.render(0).meta
    calls = [s.call for s in task.render(0).gold_plan.steps if isinstance(s, ToolStep)]
    assert isinstance(task.render(0).gold_plan.steps[-1], AnswerStep)
    assert meta.required_tools and all(t and set(t) <= set(TOOLS) for t in meta.required_tools)
    assert any(_ordered_subsequence(t, calls) for t in meta.required_tools), calls
    assert not set(calls) & set(meta.prohibited_tools)
    assert meta.min_tool_calls <= len(calls)
    writes = {"createResource", "updateResource", "deleteResource"}
    assert meta.writes == bool(set(calls) & writes)
    assert meta.required_resources and 1 <= meta.difficulty <= 3
    if not meta.writes:
        assert writes <= set(meta.prohibited_tools) | {"createResource", "updateResource"}


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_seed_is_a_valid_transaction_with_twenty_bystanders(suite, task_id):
    task = suite[task_id]
    for variation in VARIATIONS:
        rendered = task.render(variation)
        bundle = rendered.seed_bundle
        assert bundle["resourceType"] == "Bundle" and bundle["type"] == "transaction"
        refs = [f"{e['resource']['resourceType']}/{e['resource']['id']}" for e in bundle["entry"]]
        assert len(refs) == len(set(refs))
        assert all(e["request"] == {"method": "PUT", "url": ref} for e, ref in zip(bundle["entry"], refs, strict=True))
        mentioned = json.dumps(rendered.params) + json.dumps(msgspec.to_builtins(rendered.check_spec)) + rendered.prompt
        bystanders = [r for r in refs if r.split("/")[1] not in mentioned]
        assert len(bystanders) >= 20


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_people_are_unambiguous(suite, task_id):
    """No two patients share name and birth date; no two practitioners share a name."""
    for variation in VARIATIONS:
        resources = bundle_resources(suite[task_id].render(variation).seed_bundle)
        patients = [
            (r["name"][0]["family"], tuple(r["name"][0]["given"]), r["birthDate"])
            for r in resources
            if r["resourceType"] == "Patient"
        ]
        doctors = [
            (r["name"][0]["family"], tuple(r["name"][0]["given"]))
            for r in resources
            if r["resourceType"] == "Practitioner"
        ]
        assert len(patients) == len(set(patients))
        assert len(doctors) == len(set(doctors))


def _strings(value, found):
    if isinstance(value, str):
        found.add(value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        found.add(str(value))
    elif isinstance(value, dict):
        for v in value.values():
            _strings(v, found)
    elif isinstance(value, list):
        for v in value:
            _strings(v, found)
    return found


def _stated(value, prompt: str, seed_strings: set[str]) -> bool:
    text = str(value)
    return text.lower() in prompt.lower() or text in seed_strings


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_every_demanded_constant_is_in_the_prompt_or_the_seed(suite, task_id):
    task = suite[task_id]
    for variation in VARIATIONS:
        rendered = task.render(variation)
        seed = bundle_resources(rendered.seed_bundle)
        seed_ids = {r["id"] for r in seed}
        strings = _strings(seed, set())
        seed_instants = {instant(s) for s in strings} - {None}
        prompt = rendered.prompt
        missing = []
        for kind, value in demanded_constants(rendered.check_spec):
            if kind == "count":
                continue  # a count is derived by counting seed resources, not a constant to state
            if kind in ("id", "ref"):
                ok = str(value).split("/")[-1] in seed_ids
            elif kind == "coding":
                system, _, code = str(value).partition("|")
                ok = _stated(system, prompt, strings) and _stated(code, prompt, strings)
            elif kind == "instant":
                ok = instant(value) in seed_instants or str(value) in prompt
            elif kind == "words":
                ok = all(_stated(w, prompt, strings) or any(w in s for s in strings) for w in str(value).split())
            else:
                ok = _stated(value, prompt, strings)
            if not ok:
                missing.append((kind, value))
        assert not missing, f"variation {variation}: demanded but never given: {missing}"


def test_docs_list_every_task_once(suite):
    text = DOCS.read_text(encoding="utf-8")
    for task_id in suite:
        assert len(re.findall(rf"`{re.escape(task_id)}`", text)) == 1, task_id


GOOD = {
    "id": "x",
    "title": "t",
    "difficulty": 1,
    "writes": False,
    "scenario": "known_patient",
    "prompt": "p",
    "gold_plan": [{"answer": "a"}],
    "check": {},
    "answer_tags": ["A"],
}


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        ({**GOOD, "difficulty": 5}, "x.yaml: difficulty: Invalid enum value 5; one of 1, 2, 3"),
        ({**GOOD, "scenario": "nope"}, "x.yaml: scenario: family records has no scenario 'nope'"),
        ({**GOOD, "colour": 1}, "x.yaml: top level: Object contains unknown field `colour`"),
        ({**GOOD, "required_tools": [["fly"]]}, "x.yaml: required_tools[0][0]: Invalid enum value 'fly'; one of "),
        ({**GOOD, "prohibited_tools": "deleteResource"}, "x.yaml: prohibited_tools: Expected `array`, got `str`"),
        ({**GOOD, "answer_tags": []}, "x.yaml: answer_tags: Expected `array` of length >= 1"),
        ({**GOOD, "min_tool_calls": "2"}, "x.yaml: min_tool_calls: Expected `int`, got `str`"),
        ({k: v for k, v in GOOD.items() if k != "prompt"}, "x.yaml: top level: Object missing required field `prompt`"),
        (["not", "a", "mapping"], "x.yaml: top level: Expected `object`, got `array`"),
    ],
)
def test_a_malformed_task_file_is_refused_naming_the_file_and_field(broken, said):
    with pytest.raises(TaskError) as raised:
        task_from_dict(broken, "records", source="x.yaml")
    assert str(raised.value).startswith(said), raised.value


def test_a_well_formed_task_file_loads_and_a_bad_placeholder_fails_when_rendered():
    assert task_from_dict(GOOD, "records").id == "x"
    with pytest.raises(TaskError):
        task_from_dict({**GOOD, "prompt": "{nothing_here}"}, "records").render(0)
    with pytest.raises(TaskError):
        load_suite()["no-such-task"]


def test_a_placeholder_filled_with_the_wrong_kind_of_value_fails_when_rendered():
    """An id placeholder filled with a list is named when the variation renders, not when it is judged."""
    task = task_from_dict(
        {**GOOD, "options": [{"both": ["a-1", "b-2"]}], "check": {"answer": {"A": {"id": "{both}"}}}}, "records"
    )
    with pytest.raises(TaskError, match=r"task x: check.answer.A.id: Expected `str \| null`, got `array`"):
        task.render(0)


def test_every_built_in_task_loads_as_typed_values(suite):
    assert len(suite) == 49
    for task in suite.values():
        assert isinstance(task.check, CheckSpec) and isinstance(task.render(0).check_spec, CheckSpec), task.id


@pytest.mark.parametrize(
    ("check", "said"),
    [
        ({"creates": [{"type": "Condition", "fields": {"code": {"nearly": "x"}}}]}, "unknown matcher 'nearly'"),
        ({"creates": [{"type": "Condition", "fields": {"code": {"equals": 1, "ci": 1}}}]}, "one kind"),
        (
            {"creates": [{"type": "Condition", "feilds": {}}]},
            "check.creates[0]: Object contains unknown field `feilds`",
        ),
        ({"creates": [{"fields": {}}]}, "check.creates[0]: Object missing required field `type`"),
        ({"creates": [{"type": "Condition", "count": "2"}]}, "check.creates[0].count: Expected `int`, got `str`"),
        (
            {"updates": [{"ref": "Slot/s", "may_chnage": []}]},
            "check.updates[0]: Object contains unknown field `may_chnage`",
        ),
        ({"answer": {"A": {"id": "x"}, "B": {"idd": "x"}}}, "check.answer.B: Object contains unknown field `idd`"),
        ({"answer": {"A": {"id": "x", "count": 1}}}, "check.answer.A: an answer check has one kind"),
        ({"answer": {"A": {"among": ["x"]}}}, "check.answer.A: an answer check has one kind"),
        ({"answer": {"A": {"id": "x", "tolerance": 1}}}, "check.answer.A: `tolerance` goes only beside `number`"),
        ({"answer": {"A": {"number": 1, "tolerance": 0.1}}, "deletes": "Slot/s"}, "check.deletes: Expected `array`"),
        ({"updates": [{"ref": "Slot/s", "fields": {"status": {"equals": "busy", "key": ["x"]}}}]}, "`key` goes only"),
        ({"creates": [{"type": "Appointment", "fields": {"participant": {"exactly": {"actor": 1}}}}]}, "a list of"),
        ({"creates": [{"type": "X", "fields": {"p": {"all": {"q": {"refz": []}}}}}]}, "check.creates[0].fields.p.q"),
        ({"creates": [{"type": "X", "allow": [{"a": 1, "b": 2}]}]}, "allow"),
        ({"delets": []}, "check: Object contains unknown field `delets`"),
    ],
)
def test_a_misspelt_check_is_refused_when_the_task_loads(check, said):
    good = {
        "id": "x",
        "title": "t",
        "difficulty": 1,
        "writes": True,
        "scenario": "known_patient",
        "prompt": "p",
        "gold_plan": [{"answer": "a"}],
        "answer_tags": ["A"],
    }
    with pytest.raises(TaskError, match="x.yaml: ") as raised:
        task_from_dict({**good, "check": check}, "records", source="x.yaml")
    assert said in str(raised.value)


def test_membership_is_a_plain_answer_not_an_error():
    suite = load_suite()
    assert "rec-find-patient" in suite
    assert "no-such-task" not in suite
