"""Mutation agents that get the writes wrong (or, for the must-pass class, only their form)."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from fae.errors import TaskError
from fae.plan import AnswerStep, Plan, ToolStep
from fae.tasks.check_spec import CheckSpec, CreateCheck, UpdateCheck
from fae.tasks.fhir_values import covered, element_path, instant
from fae.tasks.model import Rendered
from fae.tasks.state import MemoryState

WRITE_CALLS = ("createResource", "updateResource", "deleteResource")


def steps_without_answer(plan: Plan) -> list[Any]:
    return [s for s in plan.steps if not isinstance(s, AnswerStep)]


def answer_step(plan: Plan) -> AnswerStep:
    last = plan.steps[-1]
    assert isinstance(last, AnswerStep)
    return last


def replace_strings(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [replace_strings(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: replace_strings(v, old, new) for k, v in value.items()}
    return value


def replace_in_step(step: Any, old: str, new: str) -> Any:
    if isinstance(step, AnswerStep):
        return AnswerStep(step.answer.replace(old, new))
    return ToolStep(step.call, replace_strings(step.args, old, new), step.save)


def no_write(gold: Plan, gold_answer: str | None) -> Plan:
    """The gold's reads, no write, and the gold's answer word for word."""
    reads = [s for s in steps_without_answer(gold) if s.call not in WRITE_CALLS]
    return Plan(name="no-write", steps=(*reads, AnswerStep(gold_answer or "")))


def wrong_record(gold: Plan, target: str, distractor: str) -> Plan | None:
    """The gold plan whose update of ``target`` goes to ``distractor`` (read first), answer unchanged."""
    kind, _, wrong_id = distractor.partition("/")
    steps: list[Any] = []
    retargeted = False
    for step in gold.steps:
        body = step.args.get("body_json") if isinstance(step, ToolStep) else None
        if (
            not retargeted
            and isinstance(step, ToolStep)
            and step.call == "updateResource"
            and step.args.get("resourceType") == kind
            and isinstance(body, dict)
            and "$merge" in body
        ):
            steps.append(ToolStep("getResourceById", {"resourceType": kind, "resourceId": wrong_id}, "_wrong"))
            patch = body["$merge"][-1]
            steps.append(
                ToolStep(
                    "updateResource",
                    {"resourceType": kind, "resourceId": wrong_id, "body_json": {"$merge": ["${_wrong}", patch]}},
                    step.save,
                )
            )
            retargeted = True
        else:
            steps.append(step)
    return Plan(name="wrong-record", steps=tuple(steps)) if retargeted else None


def collateral_write(gold: Plan, bystander: str) -> Plan:
    return Plan(
        name="collateral-write",
        steps=(
            *steps_without_answer(gold),
            ToolStep("getResourceById", {"resourceType": "Patient", "resourceId": bystander}, "_bystander"),
            ToolStep(
                "updateResource",
                {
                    "resourceType": "Patient",
                    "resourceId": bystander,
                    "body_json": {
                        "$merge": ["${_bystander}", {"telecom": [{"system": "phone", "value": "555-000-0000"}]}]
                    },
                },
            ),
            answer_step(gold),
        ),
    )


def extra_or_duplicate_create(gold: Plan) -> tuple[str, Plan]:
    creates = [s for s in gold.steps if isinstance(s, ToolStep) and s.call == "createResource"]
    if creates:
        duplicate = ToolStep(creates[0].call, copy.deepcopy(creates[0].args), "_duplicate")
        index = gold.steps.index(creates[0]) + 1
        return "duplicate-create", Plan(
            name="duplicate-create", steps=(*gold.steps[:index], duplicate, *gold.steps[index:])
        )
    extra = ToolStep(
        "createResource",
        {
            "resourceType": "Patient",
            "body_json": {"resourceType": "Patient", "name": [{"family": "Extra", "given": ["Anne"]}]},
        },
    )
    return "extra-create", Plan(name="extra-create", steps=(*steps_without_answer(gold), extra, answer_step(gold)))


def partial_update(gold: Plan) -> Plan | None:
    """An agent that sends only the changed elements, as if PUT were PATCH."""
    updates = [
        s
        for s in gold.steps
        if isinstance(s, ToolStep)
        and s.call == "updateResource"
        and isinstance(s.args.get("body_json"), dict)
        and "$merge" in s.args["body_json"]
    ]
    if not updates:
        return None
    first = updates[0]
    partial = ToolStep(first.call, {**first.args, "body_json": first.args["body_json"]["$merge"][-1]}, first.save)
    return Plan(name="partial-update", steps=tuple(partial if s is first else s for s in gold.steps))


# ---------------------------------------------------------------- outcome changes


def did_nothing(answer: str | None, state: MemoryState, written: frozenset[str]):
    return answer, MemoryState(state.seed.all(), state.seed.all()), frozenset()


def drop_first_field(spec: CheckSpec):
    """Remove the element behind the first declared field of the first written resource."""

    def alter(answer: str | None, state: MemoryState, written: frozenset[str]):
        seed_refs = {f"{r['resourceType']}/{r['id']}" for r in state.seed.all()}
        entry: CreateCheck | UpdateCheck
        if spec.creates:
            entry = spec.creates[0]
            kind = entry.type
            target = next(
                r
                for r in state.all()
                if r["resourceType"] == kind and f"{r['resourceType']}/{r['id']}" not in seed_refs
            )
        else:
            entry = spec.updates[0]
            target = _updated(state, entry.ref)
        element = next(iter(entry.fields)).split(".")[0].split("(")[0]
        final = [r for r in state.all() if (r["resourceType"], r["id"]) != (target["resourceType"], target["id"])]
        final.append({k: v for k, v in target.items() if k != element})
        return answer, MemoryState(final, state.seed.all()), written

    return alter


def _updated(state: MemoryState, ref: str) -> dict[str, Any]:
    """The resource a task updates, from a state the gold run left; its absence is a suite bug."""
    kind, _, rid = ref.partition("/")
    found = state.read(kind, rid)
    if found is None:
        raise TaskError(f"the updated {ref} is not in the final state")
    return found


def _leaves(value: Any, path: str = "", trail: tuple = ()) -> list[tuple[str, tuple]]:
    """(element path, location) of every primitive, the location as keys and indices."""
    if isinstance(value, dict):
        return [
            leaf
            for key in sorted(value)
            for leaf in _leaves(value[key], f"{path}.{key}" if path else key, (*trail, key))
        ]
    if isinstance(value, list):
        return [leaf for i, item in enumerate(value) for leaf in _leaves(item, path, (*trail, i))]
    return [(path, trail)]


def changed(value: Any) -> Any:
    """A primitive changed into another of its kind (an instant moved within its day)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    moment = instant(value)
    if moment is not None:
        return value[:11] + ("23" if value[11:13] != "23" else "22") + value[13:]
    return f"{value}-changed"


def nested_collateral(entry: UpdateCheck):
    """Change one nested element (two levels or more) of the updated target that the task leaves alone."""

    def alter(answer: str | None, state: MemoryState, written: frozenset[str]):
        kind, _, rid = entry.ref.partition("/")
        target = copy.deepcopy(_updated(state, entry.ref))
        allowed = {element_path(p) for p in entry.fields} | set(entry.may_change)
        choices = [
            (path, trail)
            for path, trail in _leaves(target)
            if "." in path and not covered(path, allowed) and trail[0] not in ("meta", "text", "id")
        ]
        if not choices:
            return answer, state, written
        path, trail = choices[0]
        holder = target
        for key in trail[:-1]:
            holder = holder[key]
        holder[trail[-1]] = changed(holder[trail[-1]])
        final = [r for r in state.all() if (r["resourceType"], r["id"]) != (kind, rid)] + [target]
        return answer, MemoryState(final, state.seed.all()), written

    return alter


def has_nested_leaf(rendered: Rendered, entry: UpdateCheck) -> bool:
    kind, _, rid = entry.ref.partition("/")
    resource = next(
        (
            r
            for r in rendered.seed_bundle["entry"]
            if r["resource"]["resourceType"] == kind and r["resource"]["id"] == rid
        ),
        None,
    )
    if resource is None:
        return False
    allowed = {element_path(p) for p in entry.fields} | set(entry.may_change)
    return any("." in p and not covered(p, allowed) for p, _ in _leaves(resource["resource"]))


def _reformatted(value: Any) -> Any:
    """The same FHIR values in another form: instants with milliseconds and +00:00, decimals as floats."""
    if isinstance(value, dict):
        return {k: _reformatted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_reformatted(v) for v in value]
    if isinstance(value, str) and instant(value) is not None and value.endswith("Z"):
        return re.sub(r"(:\d{2})Z$", r"\1.000+00:00", value)
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def equivalent_write_back(refs: list[str]):
    """The gold outcome, with the written targets and one untouched resource written back in another form."""

    def alter(answer: str | None, state: MemoryState, written: frozenset[str]):
        chosen = set(refs)
        final = []
        for resource in state.all():
            ref = f"{resource['resourceType']}/{resource['id']}"
            final.append(_reformatted(resource) if ref in chosen else resource)
        return answer, MemoryState(final, state.seed.all()), written | chosen

    return alter


def sent_write_back(gold: Plan, resource: dict[str, Any]) -> Plan:
    """The gold plan, then a PUT of an untouched seed resource in another form, through the server."""
    body = _reformatted({k: v for k, v in resource.items() if k != "meta"})
    put = ToolStep(
        "updateResource",
        {"resourceType": resource["resourceType"], "resourceId": resource["id"], "body_json": body},
    )
    return Plan(name="equivalent-write-back-sent", steps=(*steps_without_answer(gold), put, answer_step(gold)))


def reformattable(rendered: Rendered) -> str | None:
    """A seed resource the task does not write that has an instant (so a form change shows)."""
    declared = {e.ref for e in rendered.check_spec.updates}
    for entry in rendered.seed_bundle["entry"]:
        resource = entry["resource"]
        ref = f"{resource['resourceType']}/{resource['id']}"
        if ref not in declared and re.search(r'T\d{2}:\d{2}:\d{2}Z"', json.dumps(resource)):
            return ref
    return None
