"""The record a suite write task asks for, read from its check spec, for ``ensure_record``.

A check spec names what a strict validator wants of each resource created or
updated. Where a task writes exactly one record, that entry is the write
target: its type; for an update, the record's id; its identity — the fields
that say who or what the record is about (a patient's name and birth date, a
clinical record's subject and code) —; and the expected values, the rest of
the declared fields. Fields keep the spec's own matchers (``refs``, ``coding``,
``instant``, ...), so ensure_record judges values exactly as the strict
validator does.

A task that writes more than one record (a booking that also marks the slot
busy, a coverage that needs a new subscriber first) cannot be expressed as one
target: ``not_covered`` says why, and ensure_record stays ``not_applicable``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

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
    "Appointment": ("participant",),
    "Specimen": ("subject", "request"),
    "ServiceRequest": ("subject", "code"),
    "Consent": ("patient", "category", "provision"),
}

# For an update, who the record is comes from the seeded record where the spec does not say it.
SEED_IDENTITY: dict[str, tuple[str, ...]] = {
    "Patient": ("name.family", "name.given", "birthDate"),
    "ServiceRequest": ("subject.reference", "code.coding.code"),
}


def _top(path: str) -> str:
    return re.split(r"[.(\[]", path, maxsplit=1)[0]


def _matcher(value: Any) -> Any:
    """A spec matcher, a plain value made explicit (ensure_record compares text for plain values)."""
    return value if isinstance(value, Mapping) else {"equals": value}


def not_covered(spec: Mapping[str, Any], writes: bool = True) -> str | None:
    """Why a task's check spec names no single write target, or None when it names one."""
    if not writes:
        return "a read-only task writes no record"
    creates, updates = spec.get("creates", []), spec.get("updates", [])
    records = sum(int(entry.get("count", 1)) for entry in creates) + len(updates) + len(spec.get("deletes", []))
    if records != 1:
        return f"the task writes {records} records; ensure_record verifies one"
    entry = (creates or updates)[0]
    kind = entry.get("type") or entry["ref"].partition("/")[0]
    if kind not in IDENTITY:
        return f"no identity fields are known for {kind}"
    if any(isinstance(m, Mapping) and "created" in m for m in entry.get("fields", {}).values()):
        return "a field refers to another record the run creates"
    return None


def spec_target(spec: Mapping[str, Any], seed_resources: list[dict[str, Any]] | None = None) -> WriteTarget:
    """The write target of a spec that names one (see ``not_covered``)."""

    creates = spec.get("creates", [])
    entry = creates[0] if creates else spec["updates"][0]
    kind = entry.get("type") or entry["ref"].partition("/")[0]
    identity: dict[str, Any] = {}
    expected: dict[str, Any] = {}
    for path, matcher in entry.get("fields", {}).items():
        (identity if _top(path) in IDENTITY[kind] else expected)[path] = _matcher(matcher)
    if creates:
        return WriteTarget(kind, identity=identity, expected=expected)
    record_id = entry["ref"].partition("/")[2]
    seeded = next((r for r in seed_resources or [] if r.get("resourceType") == kind and r.get("id") == record_id),
                  None)
    named = {_top(path) for path in identity}
    for path in SEED_IDENTITY.get(kind, ()):
        found = values(seeded, path) if seeded is not None else []
        if _top(path) not in named and found:
            identity[path] = {"equals": found[0]}
    return WriteTarget(kind, identity=identity, expected=expected, action="update", record_id=record_id)


def suite_target(task_id: str, variation: int) -> WriteTarget | None:
    """The record a suite task's variation asks the agent to write, where its spec names one."""
    found = rendered_task(task_id, variation)
    if found is None:
        return None
    task, rendered = found
    if not_covered(rendered.check_spec, task.writes) is not None:
        return None
    return spec_target(rendered.check_spec, bundle_resources(rendered.seed_bundle))
