"""The record a suite write task asks for, read from its check spec, for ``ensure_record``.

A check spec names what a strict validator wants of each resource created or
updated. Where a task writes exactly one record, that entry is the write
target: its type; for an update, the record's id; its identity — the fields
that say who or what the record is about (a patient's name and birth date, a
clinical record's subject and code) —; and the expected values, the rest of
the declared fields. Fields keep the spec's own matchers (``refs``, ``coding``,
``instant``, ...), so ensure_record judges values exactly as the strict
validator does.

A task that writes several records (a booking that also marks the slot busy,
a coverage that needs a new subscriber first) has one target per record
(``spec_targets``); a field that refers to another record the run creates
(``{created: RelatedPerson}``) is resolved, at judging time, to the record
chosen for that target (``resolve_created``). ``not_covered`` says why a task
has no targets (read-only, deletes, a type with no known identity).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from fae.tasks.check_spec import CheckSpec, CreateCheck, UpdateCheck
from fae.tasks.checks import values
from fae.tasks.state import bundle_resources
from fae.tasks.suite import rendered_task


@dataclass(frozen=True)
class WriteTarget:
    """The record the agent was to write: its type, who it is, what it must say."""

    resource_type: str
    identity: dict[str, Any]
    expected: dict[str, Any] = field(default_factory=dict)
    action: str = "create"  # or "update"
    record_id: str | None = None  # the record to update


# Per resource type, the top-level elements that say who or what a record is.
IDENTITY: dict[str, tuple[str, ...]] = {
    "Patient": ("name", "birthDate"),
    "RelatedPerson": ("patient", "name", "birthDate"),
    "AllergyIntolerance": ("patient", "code"),
    "Condition": ("subject", "code"),
    "FamilyMemberHistory": ("patient", "relationship", "condition"),
    "Account": ("subject",),
    "Coverage": ("beneficiary", "payor"),
    "Appointment": ("participant", "start", "requestedPeriod"),  # who, with whom, when
    "Slot": ("schedule", "start"),
    "Specimen": ("subject", "request"),
    "ServiceRequest": ("subject", "code"),
    "Consent": ("patient", "category", "provision"),
}

# For an update, who the record is comes from the seeded record where the spec does not say it.
SEED_IDENTITY: dict[str, tuple[str, ...]] = {
    "Patient": ("name.family", "name.given", "birthDate"),
    "ServiceRequest": ("subject.reference", "code.coding.code"),
    "Slot": ("schedule.reference", "start"),
    "Appointment": ("participant.actor.reference", "start"),
}


def _top(path: str) -> str:
    return re.split(r"[.(\[]", path, maxsplit=1)[0]


def _matcher(value: Any) -> Any:
    """A spec matcher, a plain value made explicit (ensure_record compares text for plain values)."""
    return value if isinstance(value, Mapping) else {"equals": value}


def _entries(spec: CheckSpec) -> list[CreateCheck | UpdateCheck]:
    """The records a spec names: what it creates, then what it updates."""
    return [*spec.creates, *spec.updates]


def _kind(entry: CreateCheck | UpdateCheck) -> str:
    return entry.type if isinstance(entry, CreateCheck) else entry.ref.partition("/")[0]


def not_covered(spec: CheckSpec, writes: bool = True) -> str | None:
    """Why a task's check spec names no write targets, or None when it names one or more."""
    if not writes:
        return "a read-only task writes no record"
    if spec.deletes:
        return "the task deletes a record; ensure_record verifies records written"
    if not spec.creates and not spec.updates:
        return "the check names no record written"
    if any(entry.count != 1 for entry in spec.creates):
        return "the task creates several records of one kind; a target is one record"
    for entry in _entries(spec):
        kind = _kind(entry)
        if kind not in IDENTITY:
            return f"no identity fields are known for {kind}"
    return None


def _entry_target(entry: CreateCheck | UpdateCheck, seed_resources: list[dict[str, Any]] | None) -> WriteTarget:
    kind = _kind(entry)
    identity: dict[str, Any] = {}
    expected: dict[str, Any] = {}
    for path, matcher in entry.fields.items():
        (identity if _top(path) in IDENTITY[kind] else expected)[path] = _matcher(matcher)
    if isinstance(entry, CreateCheck):
        return WriteTarget(kind, identity=identity, expected=expected)
    record_id = entry.ref.partition("/")[2]
    seeded = next((r for r in seed_resources or [] if r.get("resourceType") == kind and r.get("id") == record_id), None)
    named = {_top(path) for path in identity}
    for path in SEED_IDENTITY.get(kind, ()):
        found = values(seeded, path) if seeded is not None else []
        if _top(path) not in named and found:
            identity[path] = {"equals": found[0]} if len(found) == 1 else {"set": found}
    return WriteTarget(kind, identity=identity, expected=expected, action="update", record_id=record_id)


def spec_targets(spec: CheckSpec, seed_resources: list[dict[str, Any]] | None = None) -> list[WriteTarget]:
    """One target per record the spec names (creates first, then updates); see ``not_covered``."""
    return [_entry_target(entry, seed_resources) for entry in _entries(spec)]


def spec_target(spec: CheckSpec, seed_resources: list[dict[str, Any]] | None = None) -> WriteTarget:
    """The first write target of a spec that names one (see ``not_covered``)."""
    return spec_targets(spec, seed_resources)[0]


def refers_to_created(target: WriteTarget) -> set[str]:
    """The types whose new record a target's fields refer to (``{created: Type}``)."""
    return {
        m["created"]
        for m in (*target.identity.values(), *target.expected.values())
        if isinstance(m, Mapping) and "created" in m
    }


def resolve_created(target: WriteTarget, created: Mapping[str, str]) -> WriteTarget:
    """The target with each ``{created: Type}`` matcher made ``{refs: [the record chosen for Type]}``."""

    def one(fields: dict[str, Any]) -> dict[str, Any]:
        return {
            path: (
                {"refs": [created.get(m["created"], f"{m['created']}/(none created)")]}
                if isinstance(m, Mapping) and "created" in m
                else m
            )
            for path, m in fields.items()
        }

    return replace(target, identity=one(target.identity), expected=one(target.expected))


def ordered_targets(targets: list[WriteTarget]) -> list[WriteTarget]:
    """Targets that another's fields refer to (``{created: Type}``) come before it."""
    return sorted(targets, key=lambda t: len(refers_to_created(t)))


def suite_targets(task_id: str, variation: int) -> list[WriteTarget]:
    """The records a suite task's variation asks the agent to write (empty where its spec names none)."""
    return list(_suite_targets(task_id, variation))


@lru_cache(maxsize=1024)
def _suite_targets(task_id: str, variation: int) -> tuple[WriteTarget, ...]:
    """Made once per variation, as its rendering is (``rendered_task``): every repeat asks for the same records."""
    found = rendered_task(task_id, variation)
    if found is None:
        return ()
    task, rendered = found
    if not_covered(rendered.check_spec, task.writes) is not None:
        return ()
    return tuple(spec_targets(rendered.check_spec, bundle_resources(rendered.seed_bundle)))
