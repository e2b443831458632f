"""Mutation agents: the gold agent with one mistake each, which a strict (or light) validator must catch.

Most mutants are plans played against the embedded server (an agent that also wrote
something else, wrote twice, or worked on the wrong patient). Two are outcomes of the gold
run changed after the fact, because the mistake cannot be sent through a validating server
(a required element missing) or is about the answer text alone (a wrong id answered).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fae.plan import AnswerStep, Plan, ToolStep
from fae.tasks.checks import expected_ids
from fae.tasks.model import Rendered
from fae.tasks.state import MemoryState, bundle_resources

Alter = Callable[[str | None, MemoryState], tuple[str | None, MemoryState]]


@dataclass(frozen=True)
class Mutant:
    """One faulty agent: a plan to play (None = the gold plan) and an optional change to its outcome."""

    name: str
    plan: Plan | None = None
    alter: Alter | None = None
    light_must_fail: bool = False


def _seed_ids(rendered: Rendered) -> dict[str, list[str]]:
    by_type: dict[str, list[str]] = {}
    for resource in bundle_resources(rendered.seed_bundle):
        by_type.setdefault(resource["resourceType"], []).append(resource["id"])
    return by_type


def _mentioned(rendered: Rendered) -> set[str]:
    """Every id-looking string the variation's parameters or check spec mention."""
    text = json.dumps(rendered.params) + json.dumps(rendered.check_spec)
    return set(re.findall(r"[a-z]+-[0-9a-f]{6}", text))


def _bystander(rendered: Rendered, kind: str = "Patient") -> str:
    mentioned = _mentioned(rendered)
    return next(i for i in _seed_ids(rendered)[kind] if i not in mentioned)


def _other_patient(rendered: Rendered) -> str:
    """The unmentioned patient most other seed resources point at (so a mix-up shows)."""
    mentioned = _mentioned(rendered)
    text = json.dumps(rendered.seed_bundle)
    counts = {
        pid: text.count(f"Patient/{pid}")
        for pid in _seed_ids(rendered)["Patient"]
        if pid not in mentioned
    }
    return max(sorted(counts), key=lambda pid: counts[pid])


def _replace_tag(answer: str | None, tag: str, value: str) -> str:
    pattern = re.compile(rf"(<\s*{tag}\s*>)(.*?)(<\s*/\s*{tag}\s*>)", re.IGNORECASE | re.DOTALL)
    return pattern.sub(lambda m: f"{m.group(1)}{value}{m.group(3)}", answer or "")


def _wrong_value(rendered: Rendered, tag: str, want: dict[str, Any]) -> str:
    seed = _seed_ids(rendered)
    all_ids = [i for ids in seed.values() for i in ids]
    if "count" in want:
        return str(int(want["count"]) + 1)
    if "words" in want:
        return "UNKNOWN"
    if "ids" in want and expected_ids(want["ids"]):
        expected = expected_ids(want["ids"])
        prefix = expected[0].split("-")[0]
        others = [i for i in all_ids if i.startswith(prefix + "-") and i not in expected]
        # A list answer that misses one id, or a single answer naming a look-alike.
        return ", ".join(expected[1:]) if len(expected) > 1 else others[0]
    if "created" in want or "updated" in want:
        kind = want.get("created") or want["updated"].split("/")[0]
        taken = want.get("updated", "/").split("/")[1]
        return next(i for i in seed.get(kind, []) + all_ids if i != taken)
    # Expected NONE: answer with a resource of the type the task is about.
    kind = rendered.meta.required_resources[-1]
    return seed.get(kind, all_ids)[0]


def _steps_without_answer(plan: Plan) -> list[Any]:
    return [s for s in plan.steps if not isinstance(s, AnswerStep)]


def _answer_step(plan: Plan) -> AnswerStep:
    last = plan.steps[-1]
    assert isinstance(last, AnswerStep)
    return last


def _replace_strings(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_replace_strings(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _replace_strings(v, old, new) for k, v in value.items()}
    return value


def mutants(rendered: Rendered) -> list[Mutant]:
    """The faulty agents for one variation of a task."""
    gold = rendered.gold_plan
    spec = rendered.check_spec
    made: list[Mutant] = []

    for tag, want in spec.get("answer", {}).items():
        wrong = _wrong_value(rendered, tag, want)
        made.append(
            Mutant(
                f"wrong-answer:{tag}",
                alter=lambda a, s, tag=tag, wrong=wrong: (_replace_tag(a, tag, wrong), s),
            )
        )

    bystander = _bystander(rendered)
    made.append(
        Mutant(
            "collateral-write",
            plan=Plan(
                name="collateral-write",
                steps=(
                    *_steps_without_answer(gold),
                    ToolStep(
                        "getResourceById",
                        {"resourceType": "Patient", "resourceId": bystander},
                        "_bystander",
                    ),
                    ToolStep(
                        "updateResource",
                        {
                            "resourceType": "Patient",
                            "resourceId": bystander,
                            "body_json": {
                                "$merge": [
                                    "${_bystander}",
                                    {"telecom": [{"system": "phone", "value": "555-000-0000"}]},
                                ]
                            },
                        },
                    ),
                    _answer_step(gold),
                ),
            ),
        )
    )

    creates = [s for s in gold.steps if isinstance(s, ToolStep) and s.call == "createResource"]
    if creates:
        duplicate = ToolStep(creates[0].call, copy.deepcopy(creates[0].args), "_duplicate")
        index = gold.steps.index(creates[0]) + 1
        steps = (*gold.steps[:index], duplicate, *gold.steps[index:])
        made.append(Mutant("duplicate-create", plan=Plan(name="duplicate-create", steps=steps)))
    else:
        made.append(
            Mutant(
                "extra-create",
                plan=Plan(
                    name="extra-create",
                    steps=(
                        *_steps_without_answer(gold),
                        ToolStep(
                            "createResource",
                            {
                                "resourceType": "Patient",
                                "body_json": {
                                    "resourceType": "Patient",
                                    "name": [{"family": "Extra", "given": ["Anne"]}],
                                },
                            },
                        ),
                        _answer_step(gold),
                    ),
                ),
            )
        )

    updates = [
        s
        for s in gold.steps
        if isinstance(s, ToolStep)
        and s.call == "updateResource"
        and isinstance(s.args.get("body_json"), dict)
        and "$merge" in s.args["body_json"]
    ]
    if updates:
        # An agent that sends only the changed elements, as if PUT were PATCH.
        first = updates[0]
        patch = first.args["body_json"]["$merge"][-1]
        partial = ToolStep(first.call, {**first.args, "body_json": patch}, first.save)
        steps = tuple(partial if s is first else s for s in gold.steps)
        made.append(Mutant("partial-update", plan=Plan(name="partial-update", steps=steps)))

    patient = rendered.params.get("patient_id")
    # Working on the wrong patient only shows where the answer or a write depends on the work.
    answer_uses_results = "${" in _answer_step(gold).answer
    if patient and (answer_uses_results or rendered.meta.writes):
        other = _other_patient(rendered)
        steps = tuple(_replace_strings_step(s, patient, other) for s in gold.steps)
        if steps != gold.steps:
            made.append(Mutant("wrong-patient", plan=Plan(name="wrong-patient", steps=steps)))

    if rendered.meta.writes:
        made.append(
            Mutant("did-nothing", alter=lambda a, s: (a, MemoryState(s.seed.all(), s.seed.all())))
        )
        made.append(Mutant("missing-field", alter=_drop_first_field(spec), light_must_fail=True))
    return made


def _replace_strings_step(step: Any, old: str, new: str) -> Any:
    if isinstance(step, AnswerStep):
        return AnswerStep(step.answer.replace(old, new))
    return ToolStep(step.call, _replace_strings(step.args, old, new), step.save)


def _drop_first_field(spec: dict[str, Any]) -> Alter:
    """Remove the element behind the first declared field of the first written resource."""

    def alter(answer: str | None, state: MemoryState) -> tuple[str | None, MemoryState]:
        seed_refs = {f"{r['resourceType']}/{r['id']}" for r in state.seed.all()}
        if spec.get("creates"):
            entry = spec["creates"][0]
            target = next(
                r
                for r in state.all()
                if r["resourceType"] == entry["type"]
                and f"{r['resourceType']}/{r['id']}" not in seed_refs
            )
        else:
            entry = spec["updates"][0]
            kind, _, rid = entry["ref"].partition("/")
            target = state.read(kind, rid)
        element = next(iter(entry["fields"])).split(".")[0].split("(")[0]
        final = [
            r
            for r in state.all()
            if (r["resourceType"], r["id"]) != (target["resourceType"], target["id"])
        ]
        final.append({k: v for k, v in target.items() if k != element})
        return answer, MemoryState(final, state.seed.all())

    return alter
