"""Plan registry: loading a plans directory, matching prompts, and rejecting malformed entries."""

from __future__ import annotations

from pathlib import Path

import pytest

from fae.errors import PlanError
from fae.llm.plan_registry import PlanRegistry, entry_from_dict, entry_to_dict, load_plans_dir

STEPS = "steps:\n  - call: searchResources\n    args: {resourceType: Patient}\n  - answer: done\n"


def test_plans_dir_loads_match_and_extras_beside_the_plan(tmp_path: Path) -> None:
    (tmp_path / "lookup.yaml").write_text(
        "match: Find Ada\nwrong_answer: nobody\n"
        "mistake: {call: searchResources, args: {resourceType: Patinet}}\n" + STEPS
    )
    (tmp_path / "fallback.json").write_text('{"steps": [{"answer": "no idea"}]}')
    (tmp_path / "notes.txt").write_text("not a plan")
    registry = load_plans_dir(tmp_path)
    entries = {entry.match: entry for entry in registry.entries()}
    assert set(entries) == {"Find Ada", ""}
    lookup = entries["Find Ada"]
    assert lookup.plan is not None and lookup.plan.name == "lookup"
    assert lookup.wrong_answer == "nobody"
    assert lookup.mistake is not None and lookup.mistake.step.args == {"resourceType": "Patinet"}
    assert entry_to_dict(lookup)["plan"]["steps"][1] == {"answer": "done"}


def test_longest_match_wins_and_empty_match_is_a_catch_all() -> None:
    plan = {"steps": [{"answer": "x"}]}
    registry = PlanRegistry(
        [
            entry_from_dict({"match": "book an appointment", "plan": plan}),
            entry_from_dict({"match": "book", "plan": plan}),
            entry_from_dict({"match": "", "plan": plan}),
        ]
    )
    assert registry.find("please book an appointment").match == "book an appointment"
    assert registry.find("book a room").match == "book"
    assert registry.find("something else").match == ""
    registry.add(entry_from_dict({"match": "book", "plan": {"name": "newer", "steps": [{"answer": "y"}]}}))
    assert registry.find("book a room").plan.name == "newer"
    assert len(registry.entries()) == 3


def test_two_files_with_the_same_match_are_refused(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("match: same\n" + STEPS)
    (tmp_path / "b.yaml").write_text("match: same\n" + STEPS)
    with pytest.raises(PlanError, match="a.yaml and b.yaml both match 'same'"):
        load_plans_dir(tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("match: x\nsteps: []\n", "at least one step"),
        ("match: [1]\n" + STEPS, "'match' must be text"),
        ("steps:\n  - call: x\n    bogus: 1\n", "unknown field `bogus`"),
        ("match: x\nmistake: {args: {}}\n" + STEPS, "'mistake' must be a mapping"),
        ("match: x\nmistake: {call: y, at: 5}\n" + STEPS, "the plan has 1 tool steps"),
        ("match: x\nsteps: [\n", "not valid YAML"),
    ],
)
def test_malformed_plan_files_name_the_file_and_the_fault(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "broken.yaml").write_text(text)
    with pytest.raises(PlanError, match=message) as raised:
        load_plans_dir(tmp_path)
    assert "broken.yaml" in str(raised.value)


def test_missing_plans_dir_is_a_plan_error(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="does not exist"):
        load_plans_dir(tmp_path / "absent")


def test_yaml_dates_become_iso_text(tmp_path: Path) -> None:
    (tmp_path / "dated.yaml").write_text(
        "steps:\n  - call: searchResources\n    args: {date: 2024-05-01, at: 2024-05-01T10:30:00}\n  - answer: done\n"
    )
    (entry,) = load_plans_dir(tmp_path).entries()
    assert entry.plan.steps[0].args == {"date": "2024-05-01", "at": "2024-05-01T10:30:00"}
