"""Mutation agents that get a written resource subtly wrong, and honest agents that write it in another form.

Each is a change to the gold run's outcome that only a check reading the resource whole,
every value of a list and every field of one list item together can see: a contradicting
element (a modifier the task did not ask for, a declined participant, a nested denial), a
contradicting sibling in a list, the right values spread over two list items, a unit or a
code system swapped, another participant on an update. ``equivalent-create`` changes only
form (other offsets, absolute references, an extra coding of the same concept, wording):
a validator that fails it is wrong.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta, timezone
from typing import Any

from fae.fhir.elements import locate
from fae.fhir.spec import load_spec
from fae.tasks import mutant_writes as writes
from fae.tasks.fhir_values import instant
from fae.tasks.locations import Location, selected, value_at
from fae.tasks.matchers import ITEM_KINDS, kind_of
from fae.tasks.model import Rendered
from fae.tasks.state import MemoryState

Outcome = tuple[str | None, MemoryState, frozenset[str]]
Alter = Callable[[str | None, MemoryState, frozenset[str]], Outcome]
Change = Callable[[dict[str, Any]], None]

MADE_UP_SYSTEM = "http://example.org/made-up-codes"
NEGATION = {"url": "http://example.org/fhir/StructureDefinition/not-done", "valueBoolean": True}

CONTRADICTIONS: dict[str, dict[str, list[Any]]] = {
    "Condition": {
        "verificationStatus": [
            {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/condition-ver-status", "code": code}]}
            for code in ("entered-in-error", "refuted")
        ]
    },
    "AllergyIntolerance": {
        "verificationStatus": [
            {
                "coding": [
                    {"system": "http://terminology.hl7.org/CodeSystem/allergyintolerance-verification", "code": code}
                ]
            }
            for code in ("entered-in-error", "refuted")
        ]
    },
    "ServiceRequest": {"doNotPerform": [True]},
    "Patient": {"active": [False], "deceasedBoolean": [True]},
    "RelatedPerson": {"active": [False]},
}
"""Per created type, a modifier element (JSON name) and values of it that contradict what every task asks."""

EVERY_TYPE: dict[str, list[Any]] = {
    "implicitRules": ["http://example.org/rules/everything-reversed"],
    "modifierExtension": [[NEGATION]],
}
"""Modifier elements of every resource, with a contradicting value."""

DATATYPE_MODIFIERS = {
    "HumanName": ("use", "old"),
    "ContactPoint": ("use", "old"),
    "Address": ("use", "old"),
    "Identifier": ("use", "old"),
    "Quantity": ("comparator", "<"),
    "Age": ("comparator", "<"),
}
"""A modifier element inside a datatype, and a value that changes what the element means."""


# ---------------------------------------------------------------- the written resource in a gold outcome


def _created(state: MemoryState, kind: str) -> dict[str, Any] | None:
    seeded = {(r["resourceType"], r["id"]) for r in state.seed.all()}
    return next((r for r in state.resources(kind) if (kind, r["id"]) not in seeded), None)


def on_created(kind: str, change: Change) -> Alter:
    """An outcome change: the gold run's new resource of ``kind``, changed in place (on a copy)."""

    def alter(answer: str | None, state: MemoryState, written: frozenset[str]) -> Outcome:
        target = _created(state, kind)
        if target is None:
            return answer, state, written
        changed = copy.deepcopy(target)
        change(changed)
        final = [r for r in state.all() if r is not target and (r["resourceType"], r["id"]) != (kind, target["id"])]
        return answer, MemoryState([*final, changed], state.seed.all()), written

    return alter


def on_updated(ref: str, change: Change) -> Alter:
    """An outcome change: the gold run's updated ``ref``, changed in place (on a copy)."""
    kind, _, rid = ref.partition("/")

    def alter(answer: str | None, state: MemoryState, written: frozenset[str]) -> Outcome:
        target = state.read(kind, rid)
        if target is None:
            return answer, state, written
        changed = copy.deepcopy(target)
        change(changed)
        final = [r for r in state.all() if (r["resourceType"], r["id"]) != (kind, rid)]
        return answer, MemoryState([*final, changed], state.seed.all()), written

    return alter


def _objects(value: Any, keys: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every object inside a resource with its element path (keys from the resource down)."""
    if isinstance(value, dict):
        yield keys, value
        for key, child in value.items():
            yield from _objects(child, (*keys, key))
    elif isinstance(value, list):
        for child in value:
            yield from _objects(child, keys)


def _set(key: str, value: Any) -> Change:
    return lambda resource: resource.__setitem__(key, copy.deepcopy(value))


# ---------------------------------------------------------------- contradicting elements


def contradicting_elements(
    kind: str, resource: Mapping[str, Any], fields: Mapping[str, Any]
) -> list[tuple[str, Change]]:
    """(element, change) for each contradiction that fits a created resource of ``kind`` as the gold wrote it."""
    made: list[tuple[str, Change]] = []
    for element, options in {**EVERY_TYPE, **CONTRADICTIONS.get(kind, {})}.items():
        made.extend((element, _set(element, value)) for value in options)
    for keys, _holder in _objects(dict(resource)):
        place = locate(kind, keys) if keys else None
        if place is None:
            continue
        if place.datatype in DATATYPE_MODIFIERS:
            name, value = DATATYPE_MODIFIERS[place.datatype]
            made.append((".".join((*keys, name)), _nested(keys, name, value)))
        elif place.datatype is None and keys:  # a backbone element: it may carry a modifierExtension
            made.append((".".join((*keys, "modifierExtension")), _nested(keys, "modifierExtension", [NEGATION])))
    if kind == "Appointment":
        if "participant" in resource:
            made.append(("participant.status", _nested(("participant",), "status", "declined")))
        if resource.get("status") in ("waitlist", "proposed") and "requestedPeriod" in resource:
            made.append(("start", _concrete_time))
    if kind == "Consent" and isinstance(resource.get("provision"), dict):
        made.append(("provision.provision", _nested_denial))
    named = [name for name, _ in made]
    return [
        (name, change)
        for i, (name, change) in enumerate(made)
        if name not in named[:i] or name in EVERY_TYPE or name in CONTRADICTIONS.get(kind, {})
    ]


def _nested(keys: tuple[str, ...], name: str, value: Any) -> Change:
    """Set ``name`` on the first object at ``keys``."""

    def change(resource: dict[str, Any]) -> None:
        for found, holder in _objects(resource):
            if found == keys:
                holder[name] = copy.deepcopy(value)
                return

    return change


def _concrete_time(resource: dict[str, Any]) -> None:
    """A waitlist entry that also holds a concrete time: its window's start and end."""
    period = resource["requestedPeriod"][0]
    resource["start"], resource["end"] = period.get("start"), period.get("end")


def _nested_denial(resource: dict[str, Any]) -> None:
    """A consent that permits at the top and, in a nested provision, denies the same data."""
    provision = resource["provision"]
    denial = {k: copy.deepcopy(v) for k, v in provision.items() if k != "provision"}
    denial["type"] = "deny"
    provision["provision"] = [denial]


# ---------------------------------------------------------------- lists and items


def _field_locations(
    resource: dict[str, Any], fields: Mapping[str, Any], at: Location = ()
) -> Iterator[tuple[str, str, Any, list[Location]]]:
    """(path, kind, matcher, locations) of every field, and of the first item's sub-fields (paths joined)."""
    for path, matcher in fields.items():
        kind, wanted = kind_of(matcher)
        found = selected(value_at(resource, at), path)
        if found is None:
            continue
        locations = [(*at, *location) for location in found[0]]
        yield path, kind, matcher, locations
        if kind in ITEM_KINDS and locations:
            spec = wanted if kind == "all" else wanted[0]
            for sub_path, sub_kind, sub_matcher, sub_locations in _field_locations(resource, spec, locations[0]):
                yield f"{path}.{sub_path}", sub_kind, sub_matcher, sub_locations


def _other_code(kind: str, path: str, code: str) -> str:
    """Another code of the same value set where R4 binds one, else a look-alike code."""
    place = locate(kind, tuple(p for p in path.split(".") if "(" not in p))
    if place is not None and place.trail:
        holder = place.trail[-2] if place.trail[-1].path.endswith(".coding") and len(place.trail) > 1 else None
        codes = load_spec().value_set_codes(holder.value_set) if holder is not None and holder.value_set else None
        for other in sorted(codes or ()):
            if other != code:
                return other
    return code + "9"


def sibling_changes(kind: str, resource: Mapping[str, Any], fields: Mapping[str, Any]) -> list[tuple[str, Change]]:
    """A contradicting sibling per list field: another code of the same system, a second item, a second value."""
    made: list[tuple[str, Change]] = []
    for path, matcher_kind, matcher, locations in _field_locations(dict(resource), fields):
        if not locations:
            continue
        first = locations[0]
        if matcher_kind == "coding":
            system, _, code = str(matcher["coding"]).partition("|")
            other = {"system": system, "code": _other_code(kind, path, code)}
            made.append((path, _append_beside(first, other)))
        elif matcher_kind in ITEM_KINDS and isinstance(first[-1], int):
            made.append((path, _append_changed_copy(first)))
        elif matcher_kind in ("equals", "refs") and isinstance(first[-1], int):
            made.append((path, _append_changed_copy(first)))
    return made


def _append_beside(location: Location, value: Any) -> Change:
    """Add a value to the list holding ``location``."""

    def change(resource: dict[str, Any]) -> None:
        holder = value_at(resource, location[:-1])
        holder.append(copy.deepcopy(value))

    return change


def _append_changed_copy(location: Location) -> Change:
    """Add a copy of the item at ``location`` with its first value changed to its list."""

    def change(resource: dict[str, Any]) -> None:
        holder = value_at(resource, location[:-1])
        item = copy.deepcopy(holder[location[-1]])
        holder.append(_changed_first(item))

    return change


def changed(value: Any) -> Any:
    """A primitive changed into another of its kind: an instant a year later, a reference to another record."""
    moment = instant(value)
    if moment is not None:
        return (moment + timedelta(days=365)).isoformat()
    if isinstance(value, str) and "/" in value:
        return value + "0"
    return writes.changed(value)


def _changed_first(value: Any) -> Any:
    """A value with its first primitive (depth first, in key order) changed."""
    if isinstance(value, dict):
        for key in value:
            if key not in ("system", "display", "text"):
                value[key] = _changed_first(value[key])
                return value
        return value
    if isinstance(value, list):
        return [_changed_first(value[0]), *value[1:]] if value else value
    return changed(value)


def mixed_items(resource: Mapping[str, Any], fields: Mapping[str, Any]) -> list[tuple[str, Change]]:
    """The right values of one item spread over two: each item has one field right and the others wrong."""
    made: list[tuple[str, Change]] = []
    for path, matcher in fields.items():
        kind, wanted = kind_of(matcher)
        specs = [wanted] if kind == "all" else (wanted if kind == "exactly" else [])
        if len(specs) != 1 or len(specs[0]) < 2:
            continue
        found = selected(dict(resource), path)
        if not found or not found[0] or not isinstance(found[0][0][-1], int):
            continue
        made.append((path, _spread(found[0][0], list(specs[0]))))
    return made


def _spread(location: Location, subs: list[str]) -> Change:
    def change(resource: dict[str, Any]) -> None:
        holder: list[Any] = value_at(resource, location[:-1])
        index = int(location[-1])
        first, rest = copy.deepcopy(holder[index]), copy.deepcopy(holder[index])
        _change_sub(first, subs[1:])
        _change_sub(rest, subs[:1])
        holder[index : index + 1] = [first, rest]

    return change


def _change_sub(item: dict[str, Any], subs: list[str]) -> None:
    for sub in subs:
        found = selected(item, sub)
        for location in found[0] if found else []:
            holder: Any = value_at(item, location[:-1])
            holder[location[-1]] = _changed_first(copy.deepcopy(holder[location[-1]]))


# ---------------------------------------------------------------- units, systems, participants


def unit_swaps(resource: Mapping[str, Any], fields: Mapping[str, Any]) -> list[tuple[str, Change]]:
    """An age in months where years were asked (or the other way round): the number unchanged."""
    made: list[tuple[str, Change]] = []
    for path, kind, _matcher, locations in _field_locations(dict(resource), fields):
        if kind == "quantity" and locations:
            made.append((path, _swap_unit(locations[0])))
    return made


def _swap_unit(location: Location) -> Change:
    def change(resource: dict[str, Any]) -> None:
        value = value_at(resource, location)
        months = value.get("code") != "mo"
        value["code"], value["unit"] = ("mo", "months") if months else ("a", "years")

    return change


def system_swaps(resource: Mapping[str, Any], fields: Mapping[str, Any]) -> list[tuple[str, Change]]:
    """The asked code under a made-up code system."""
    made: list[tuple[str, Change]] = []
    for path, kind, _matcher, locations in _field_locations(dict(resource), fields):
        if kind == "coding" and locations:
            made.append((path, _swap_system(locations)))
    return made


def _swap_system(locations: list[Location]) -> Change:
    def change(resource: dict[str, Any]) -> None:
        for location in locations:
            value_at(resource, location)["system"] = MADE_UP_SYSTEM

    return change


def participant_swap(resource: Mapping[str, Any]) -> Change | None:
    """Another practitioner in place of the appointment's practitioner (the patient stays)."""
    for participant in resource.get("participant") or []:
        actor = (participant.get("actor") or {}).get("reference", "")
        if actor.startswith("Practitioner/"):
            return _replace_actor(actor, re.sub(r"[0-9a-f]$", lambda m: "0" if m.group(0) != "0" else "1", actor))
    return None


def _replace_actor(old: str, new: str) -> Change:
    def change(resource: dict[str, Any]) -> None:
        for participant in resource.get("participant") or []:
            if (participant.get("actor") or {}).get("reference") == old:
                participant["actor"]["reference"] = new

    return change


# ---------------------------------------------------------------- the same resource in another form


def equivalent_form(resource: dict[str, Any]) -> None:
    """Form only: instants at +01:00 (the same written date), absolute references, an extra coding of the same
    concept, other wording of texts and units."""
    for _keys, holder in list(_objects(resource)):
        for key, value in list(holder.items()):
            moment = instant(value)
            if moment is not None:
                shifted = moment.astimezone(_PLUS_ONE).isoformat()
                holder[key] = shifted if shifted[:10] == value[:10] else value
            elif key == "reference" and isinstance(value, str) and re.fullmatch(r"[A-Z][A-Za-z]+/[^/]+", value):
                holder[key] = "https://fhir.example.org/r4/" + value
            elif key == "coding" and isinstance(value, list) and value and isinstance(value[0], dict):
                value.append({**value[0], "display": "(the same concept)", "userSelected": True})
            elif key == "unit" and isinstance(value, str):
                holder[key] = {"years": "yr", "a": "years"}.get(value, value + " (unit)")
        if isinstance(holder.get("coding"), list) and holder["coding"]:
            holder["text"] = f"as recorded: {holder.get('text') or holder['coding'][0].get('code')}"


_PLUS_ONE = timezone(timedelta(hours=1))


def outcome_mutants(rendered: Rendered, gold: MemoryState) -> list[tuple[str, Alter]]:
    """(mutant name, outcome change) of every class here that fits the variation, built on its gold outcome."""
    spec = rendered.check_spec
    made: list[tuple[str, Alter]] = []

    def add(kind: str, name: str, alter: Alter, before: dict[str, Any], change: Change) -> None:
        after = copy.deepcopy(before)
        change(after)
        if after != before:  # a change the gold already made is no mutant
            made.append((f"{kind}.{name}", alter))

    for created in spec.creates:
        kind, fields = created.type, created.fields
        resource = _created(gold, kind)
        if resource is None:
            continue
        for cls, changes in (
            ("contradicting-element", contradicting_elements(kind, resource, fields)),
            ("contradicting-sibling", sibling_changes(kind, resource, fields)),
            ("mixed-items", mixed_items(resource, fields)),
            ("unit-swap", unit_swaps(resource, fields)),
            ("system-swap", system_swaps(resource, fields)),
        ):
            for element, change in changes:
                add(cls, f"{kind}.{element}", on_created(kind, change), resource, change)
        made.append((f"equivalent-create.{kind}", on_created(kind, equivalent_form)))
    for updated in spec.updates:
        ref, fields = updated.ref, updated.fields
        kind, _, rid = ref.partition("/")
        resource = gold.read(kind, rid)
        if resource is None:
            continue
        for cls, changes in (
            ("contradicting-sibling", [c for c in sibling_changes(kind, resource, fields) if "coding" in c[0]]),
            ("system-swap", system_swaps(resource, fields)),
        ):
            for element, change in changes:
                add(cls, f"{kind}.{element}", on_updated(ref, change), resource, change)
        swap = participant_swap(resource)
        if swap is not None:
            add("refset-swap", kind, on_updated(ref, swap), resource, swap)
    return made
