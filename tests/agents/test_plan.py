"""Plan files: shape checks, references, $merge, and playing a plan."""

from __future__ import annotations

import pytest

from fae.agents.plan_runner import ToolOutcome, run_plan
from fae.errors import PlanError
from fae.plan import load_plan, plan_from_dict, plan_to_dict, resolve

pytestmark = pytest.mark.anyio


def test_references_take_whole_values_or_format_into_text():
    scope = {"slots": {"entry": [{"resource": {"id": "s1", "status": "free"}}]}, "n": 3}
    assert resolve("${slots.entry.0.resource}", scope) == {"id": "s1", "status": "free"}
    assert resolve("Slot/${slots.entry.0.resource.id}", scope) == "Slot/s1"
    assert resolve({"count": "${n}", "list": ["${slots.entry.-1.resource.id}"]}, scope) == {"count": 3, "list": ["s1"]}
    with pytest.raises(PlanError, match="names no earlier result"):
        resolve("${missing.id}", scope)
    with pytest.raises(PlanError, match="does not exist"):
        resolve("${slots.entry.5}", scope)


def test_star_walks_every_item_of_a_list():
    found = {"total": 2, "entry": [{"resource": {"id": "a-1"}}, {"resource": {"id": "b-2"}}]}
    scope = {"found": found, "empty": {"total": 0}, "odd": {"entry": [{"resource": {}}]}}
    assert resolve("${found.entry.*.resource.id}", scope) == ["a-1", "b-2"]
    assert resolve("<IDS>${found.entry.*.resource.id}</IDS>", scope) == "<IDS>a-1, b-2</IDS>"
    assert resolve("${found.entry.0.resource.id}", scope) == "a-1"
    # a searchset without matches has no entry: the list is empty, not an error
    assert resolve("${empty.entry.*.resource.id}", scope) == []
    assert resolve("<IDS>${empty.entry.*.resource.id}</IDS>", scope) == "<IDS></IDS>"
    with pytest.raises(PlanError, match=r"empty\.entry"):
        resolve("${empty.entry.0.resource.id}", scope)
    with pytest.raises(PlanError, match=r"odd\.entry\.0\.resource\.id"):
        resolve("${odd.entry.*.resource.id}", scope)
    with pytest.raises(PlanError, match="is not a list"):
        resolve("${found.total.*}", scope)


def test_merge_patches_a_read_resource():
    scope = {"slot": {"resourceType": "Slot", "id": "s1", "status": "free", "meta": {"versionId": "1"}}}
    merged = resolve({"$merge": ["${slot}", {"status": "busy"}]}, scope)
    assert merged == {"resourceType": "Slot", "id": "s1", "status": "busy", "meta": {"versionId": "1"}}
    assert scope["slot"]["status"] == "free"


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"steps": []}, "at least one step"),
        ({"steps": [{"answer": "x"}, {"call": "a"}]}, "answer must be the last"),
        ({"steps": [{"call": "a", "argz": {}}]}, "^step 1: Object contains unknown field `argz`$"),
        ({"steps": [{"call": "a", "save": "not valid"}]}, r"^step 1\.save: Expected `str` matching regex"),
        ({"steps": [{"answer": "x", "call": "a"}]}, "unknown field `call`"),
        (
            {"steps": [{"call": "a"}, {"http": {"method": "GET"}}]},
            r"^step 2\.http: Object missing required field `path`$",
        ),
        ({"steps": [{"http": {"method": "GET", "path": "x"}, "actor": "bob"}]}, "one of fault, other-user, verifier"),
        ({"steps": [{"wait": 61}]}, r"^step 1\.wait: Expected `float` <= 60"),
        ({"steps": [{"save": "x"}]}, "needs 'call'"),
        ({"steps": ["createResource"]}, "expected a mapping"),
        ("just text", "a plan is a mapping"),
    ],
)
def test_malformed_plans_are_refused_with_the_step_named(raw, message):
    with pytest.raises(PlanError, match=message):
        plan_from_dict(raw)


def test_yaml_plan_round_trips_and_dates_stay_text(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        "name: p\nsteps:\n  - call: createResource\n    save: c\n    args:\n"
        "      resourceType: Patient\n      body_json: {birthDate: 1990-01-02}\n"
        "  - answer: <id>${c.id}</id>\n"
    )
    plan = load_plan(path)
    assert plan.steps[0].args["body_json"]["birthDate"] == "1990-01-02"
    assert plan_from_dict(plan_to_dict(plan)) == plan
    with pytest.raises(PlanError, match="cannot read plan"):
        load_plan(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("missing.yaml", None, "cannot read plan .*missing.yaml: No such file or directory$"),
        ("broken.yaml", "name: p\nsteps: [\n", "plan .*broken.yaml is not valid YAML/JSON: "),
    ],
)
def test_a_plan_file_that_gives_no_value_is_one_line_naming_it(tmp_path, name, text, said):
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    with pytest.raises(PlanError, match=said) as raised:
        load_plan(path)
    assert "\n" not in str(raised.value), str(raised.value)


async def test_run_plan_feeds_results_forward_and_keeps_going_after_a_tool_error():
    calls = []

    async def call_tool(name, args):
        calls.append((name, args))
        if name == "createResource":
            return ToolOutcome({"resourceType": "Patient", "id": "p9"})
        return ToolOutcome({"error": "OPERATION_OUTCOME"}, is_error=True)

    plan = plan_from_dict(
        {
            "steps": [
                {"call": "createResource", "save": "p", "args": {"resourceType": "Patient"}},
                {"call": "updateResource", "args": {"resourceId": "${p.id}"}},
                {"answer": "<patient_id>${p.id}</patient_id>"},
            ]
        }
    )
    played = await run_plan(plan, call_tool)
    assert played.answer == "<patient_id>p9</patient_id>"
    assert calls[1] == ("updateResource", {"resourceId": "p9"})
    assert played.calls[1][2].is_error


def test_agent_slugs_are_safe_and_never_shared():
    from fae.agents.base import agent_slug

    long_a = "langchain:memory-spec+specs@provider/a-very-long-model-name-2025-01-01-preview"
    long_b = long_a + "2"
    assert agent_slug("plan:my plan.yaml") == "plan-my-plan-yaml"
    assert agent_slug(long_a) != agent_slug(long_b)
    assert len(agent_slug(long_a)) <= 48
