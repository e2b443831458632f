"""Validators as data: a task's check spec, judged strictly or lightly over a StateView.

A check spec (``fae.tasks.check_spec.CheckSpec``, filled with a variation's parameters) has up to four
parts: answer, creates, updates and deletes.

Both modes require that the agent itself wrote every declared target in this run: created
the resources, changed the updated ones (a write that leaves a resource as the seed had it
is no write) and deleted the deleted ones. ``written`` names the resources the agent's own
requests created or updated; when it is not known, any change since the seed counts.
Strict: every answer tag right, exactly the declared resources created (no duplicates),
updated or deleted, each declared field right, and nothing else changed since the seed —
neither another resource nor any element of an updated one (compared as FHIR values, whole
tree) that no field names, unless it is listed under ``may_change``.
Light: every answer tag present, non-empty and consistent, and every declared field present
on the written targets; values and extra writes not enforced.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from fae.tasks import answers
from fae.tasks.answer_checks import answer_problems_light, answer_problems_strict, expected_ids
from fae.tasks.check_spec import AnswerCheck, CheckSpec, CreateCheck, UpdateCheck
from fae.tasks.fhir_values import changed_paths, content, covered, element_path, instant, is_mapping, same_resource
from fae.tasks.matchers import ITEM_KINDS, kind_of, match, quantity, reference
from fae.tasks.selection import values
from fae.tasks.state import Snapshot, StateView
from fae.tasks.whole import uninvited

__all__ = ["Check", "diff", "expected_ids", "instant", "judge_light", "judge_strict", "match", "reference", "values"]


class Check(msgspec.Struct, frozen=True):
    """A validator's verdict: passed or not, why, and what it looked at."""

    passed: bool
    reasons: list[str] = []
    evidence: dict[str, Any] = {}


# ---------------------------------------------------------------- fields


def field_problems(
    resource: Mapping[str, Any], fields: Mapping[str, Any], created: Mapping[str, str] | None = None
) -> list[str]:
    """What is wrong with a resource's declared fields: each matcher applied to what its path selects."""
    problems = []
    for path, matcher in fields.items():
        wrong = match(values(resource, path), matcher, created)
        if wrong:
            problems.append(f"{path}: {wrong}")
    return problems


def present_problems(
    resource: Mapping[str, Any], fields: Mapping[str, Any], created: Mapping[str, str] | None = None
) -> list[str]:
    """The light reading of declared fields: only whether each is there (an ``absent`` or ``count`` matcher
    asks nothing of presence and is passed over)."""
    return [
        f"{path}: missing"
        for path, matcher in fields.items()
        if not (is_mapping(matcher) and ("absent" in matcher or "count" in matcher)) and not values(resource, path)
    ]


def created_problems(resource: Mapping[str, Any], entry: CreateCheck, created: Mapping[str, str]) -> list[str]:
    """What is wrong with a created resource: its fields, its optional fields (checked where given) and every
    element neither looks at (``fae.tasks.whole``)."""
    problems = field_problems(resource, entry.fields, created)
    for path, matcher in entry.optional.items():
        found = values(resource, path)
        wrong = match(found, matcher, created) if found else None
        if wrong:
            problems.append(f"{path} (optional, given): {wrong}")
    problems.extend(
        uninvited(entry.type, dict(resource), {**entry.fields, **entry.optional}, created=created, allow=entry.allow)
    )
    return problems


def created_present(resource: Mapping[str, Any], entry: CreateCheck, created: Mapping[str, str]) -> list[str]:
    """The light reading of a created resource: its declared fields are there."""
    return present_problems(resource, entry.fields, created)


# ---------------------------------------------------------------- diff


def diff(state: StateView) -> dict[str, list[str]]:
    """``Type/id`` lists of what was created, updated and deleted since the seed (FHIR-aware)."""
    derived = getattr(state, "derived", None)  # a folded state keeps what is read off it until its next write
    if derived is not None:
        found = derived.get("diff")
        if found is None:
            found = derived["diff"] = _diff(state)
        return {what: list(refs) for what, refs in found.items()}
    return _diff(state)


def _diff(state: StateView) -> dict[str, list[str]]:
    seed: Snapshot = state.seed
    created, updated, deleted = [], [], []
    written = getattr(state, "written_refs", None)
    if written is not None:
        # A folded state names what writes touched; every other resource is the seed's own object.
        pairs = sorted(written())
    else:
        pairs = sorted(
            (kind, r["id"])
            for kind in set(seed.resource_types()) | set(state.resource_types())
            for snapshot in (seed, state)
            for r in snapshot.resources(kind)
        )
        pairs = sorted(set(pairs))
    for kind, rid in pairs:
        before, after = seed.read(kind, rid), state.read(kind, rid)
        if after is None and before is not None:
            deleted.append(f"{kind}/{rid}")
        elif before is None and after is not None:
            created.append(f"{kind}/{rid}")
        elif before is not None and after is not None and not same_resource(before, after):
            updated.append(f"{kind}/{rid}")
    return {"created": created, "updated": updated, "deleted": deleted}


# ---------------------------------------------------------------- judging


def _read_ref(state: Snapshot, ref: str) -> dict[str, Any] | None:
    kind, _, rid = ref.partition("/")
    return state.read(kind, rid)


def untouchable_changes(before: Mapping[str, Any], after: Mapping[str, Any], entry: UpdateCheck) -> list[str]:
    """Element paths of an updated resource that differ from the seed though no field or ``may_change`` names them."""
    allowed = {
        element_path(path)
        for path, matcher in entry.fields.items()
        if not (isinstance(matcher, Mapping) and set(matcher) & {"absent", "count", "present"})
    }
    allowed |= set(entry.may_change)
    return [p for p in changed_paths(content(before), content(after)) if not covered(p, allowed)]


def _count_problems(kind: str, count: int, mine: list[str]) -> list[str]:
    return [] if len(mine) == count else [f"expected {count} new {kind}, found {len(mine)}: {mine}"]


def _untouched_problems(state: StateView, ref: str, resource: Mapping[str, Any], entry: UpdateCheck) -> list[str]:
    before = _read_ref(state.seed, ref) or {}
    return [
        f"{ref} {path}: changed, but the task leaves it alone" for path in untouchable_changes(before, resource, entry)
    ]


def _unasked_problems(
    changes: Mapping[str, list[str]], created_left: list[str], updates: set[str], deletes: set[str]
) -> list[str]:
    extra = {
        "created": created_left,
        "updated": [r for r in changes["updated"] if r not in updates],
        "deleted": [r for r in changes["deleted"] if r not in deletes],
    }
    return [f"unexpected writes ({what}): {refs}" for what, refs in extra.items() if refs]


def _nothing(*_: Any) -> list[str]:
    return []


@dataclass(frozen=True)
class Reading:
    """How a check spec is read: what the answer, a declared field, a created resource, the count of new ones,
    an update's other elements and the writes nobody asked for are each held to."""

    mode: str
    answer: Callable[[Mapping[str, AnswerCheck], str | None, Mapping[str, str]], tuple[list[str], dict[str, Any]]]
    fields: Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, str]], list[str]]
    created: Callable[[Mapping[str, Any], CreateCheck, Mapping[str, str]], list[str]]
    count: Callable[[str, int, list[str]], list[str]]
    untouched: Callable[[StateView, str, Mapping[str, Any], UpdateCheck], list[str]]
    unasked: Callable[[Mapping[str, list[str]], list[str], set[str], set[str]], list[str]]


STRICT = Reading(
    "strict",
    answer_problems_strict,
    field_problems,
    created_problems,
    _count_problems,
    _untouched_problems,
    _unasked_problems,
)
"""Every value right, exactly the declared resources created, nothing else changed."""
LIGHT = Reading(
    "light",
    answer_problems_light,
    present_problems,
    created_present,
    _nothing,
    _nothing,
    _nothing,
)
"""Tags and declared fields present; values, counts and extra writes not enforced."""


def judge_strict(
    spec: CheckSpec, answer: str | None, state: StateView, *, written: Collection[str] | None = None
) -> Check:
    """The strict validator: the answer and the final state held to every value the filled check spec names."""
    return _judge(STRICT, spec, answer, state, written)


def judge_light(
    spec: CheckSpec, answer: str | None, state: StateView, *, written: Collection[str] | None = None
) -> Check:
    """The light validator: the answer's tags and the declared fields of what was written are there."""
    return _judge(LIGHT, spec, answer, state, written)


def _judge(
    reading: Reading, spec: CheckSpec, answer: str | None, state: StateView, written: Collection[str] | None
) -> Check:
    """Judge an answer and a final state against a filled check spec, read as ``reading`` says.

    ``written``: ``Type/id`` of every resource the agent's own requests created or updated
    (None when unknown: then any change since the seed is taken as the agent's).
    """
    changes = diff(state)
    mine: Callable[[str], bool] = (lambda ref: True) if written is None else (lambda ref: ref in written)
    chosen: dict[str, str] = {}  # resource type -> the created resource judged for it
    created_left = list(changes["created"])  # what no declared create accounts for (the creates take theirs out)
    problems = _creates_problems(reading, spec, state, _named_created(spec, answer), mine, chosen, created_left)
    problems.extend(_updates_problems(reading, spec, state, changes, mine, chosen))
    declared_deletes = set(spec.deletes)
    problems.extend(f"{ref} should have been deleted" for ref in sorted(declared_deletes - set(changes["deleted"])))
    problems.extend(reading.unasked(changes, created_left, {u.ref for u in spec.updates}, declared_deletes))
    said_problems, said = reading.answer(spec.answer, answer, chosen)
    problems = said_problems + problems
    return Check(
        passed=not problems,
        reasons=problems,
        evidence={"mode": reading.mode, "answer": said, "changes": changes, "judged": chosen},
    )


def _named_created(spec: CheckSpec, answer: str | None) -> dict[str, set[str]]:
    """Per created type, the ``Type/id`` the answer names in a ``created`` tag: where several new resources fit,
    the one named is judged."""
    named: dict[str, set[str]] = {}
    for tag, want in spec.answer.items():
        if want.created is not None:
            try:
                ids = answers.id_list(answers.tag_value(answer, tag))
            except answers.Contradiction:
                ids = []
            named.setdefault(want.created, set()).update(f"{want.created}/{i}" for i in ids)
    return named


def _creates_problems(
    reading: Reading,
    spec: CheckSpec,
    state: StateView,
    named: Mapping[str, set[str]],
    mine: Callable[[str], bool],
    chosen: dict[str, str],
    created_left: list[str],
) -> list[str]:
    """Problems with the declared creates; each type's judged resource goes into ``chosen``, and the resources a
    create accounts for leave ``created_left``."""
    problems: list[str] = []
    for created in spec.creates:
        kind, count = created.type, created.count
        agents = [ref for ref in created_left if ref.startswith(kind + "/") and mine(ref)]
        problems.extend(reading.count(kind, count, agents))
        wrong = {ref: reading.created(_read_ref(state, ref) or {}, created, chosen) for ref in agents}
        fitting = [ref for ref in agents if not wrong[ref]]
        if len(fitting) < count:
            detail = "; ".join(wrong[agents[0]]) if agents else "none created by the agent"
            problems.append(f"new {kind}: {detail}")
        fitting.sort(key=lambda ref: ref not in named.get(kind, set()))
        if fitting:
            chosen[kind] = fitting[0]
        elif agents:
            chosen[kind] = agents[0]
        for ref in (fitting + [r for r in agents if r not in fitting])[:count]:
            created_left.remove(ref)
    return problems


def _updates_problems(
    reading: Reading,
    spec: CheckSpec,
    state: StateView,
    changes: Mapping[str, list[str]],
    mine: Callable[[str], bool],
    chosen: Mapping[str, str],
) -> list[str]:
    """Problems with the declared updates: each record there, changed by the agent, its fields as declared and
    (strict) nothing else of it changed."""
    problems: list[str] = []
    for updated in spec.updates:
        ref = updated.ref
        resource = _read_ref(state, ref)
        if resource is None:
            problems.append(f"{ref} is gone")
        elif ref not in changes["updated"] or not mine(ref):
            problems.append(f"{ref} was not updated by the agent")
        else:
            problems.extend(f"{ref} {problem}" for problem in reading.fields(resource, updated.fields, chosen))
            problems.extend(reading.untouched(state, ref, resource, updated))
    return problems


def demanded_constants(spec: CheckSpec) -> list[tuple[str, Any]]:
    """Every (matcher kind, value) a spec demands, for checking that a task states them."""
    found: list[tuple[str, Any]] = []

    def add_matcher(matcher: Any) -> None:
        kind, wanted = kind_of(matcher)
        if kind in ITEM_KINDS:
            for item in [wanted] if kind == "all" else wanted:
                for inner in item.values():
                    add_matcher(inner)
        elif kind in ("refs", "has_refs"):
            found.extend(("ref", w) for w in wanted)
        elif kind == "quantity":
            number, _system, code = quantity(wanted)
            found.extend((("number", str(number)), ("code", code)))
        elif kind == "in":
            return  # any of several values: none of them is demanded
        elif kind not in ("absent", "present", "count", "created"):
            found.append((kind, wanted))

    for want in spec.answer.values():
        found.extend(("id", i) for i in expected_ids(want.ids if want.ids is not None else []))
        found.extend(("id", i) for i in expected_ids(str(want.id if want.id is not None else "NONE")))
        said = [("number", want.number), ("words", want.term), ("count", want.count), ("ref", want.updated)]
        found.extend((kind, value) for kind, value in [*said, ("words", want.words)] if value is not None)
    for created in spec.creates:
        for matcher in created.fields.values():
            add_matcher(matcher)
    for updated in spec.updates:
        found.append(("ref", updated.ref))
        for matcher in updated.fields.values():
            add_matcher(matcher)
    return found
