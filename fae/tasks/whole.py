"""A created resource judged whole: every element the task's check looked at, or a benign addition, or a problem.

The check's fields name what the task asks for; the rest of a created resource must be on
the allow-list of benign additions (``data/additions.yaml``: per resource type, for every
type, and parts of datatypes such as a coding's display) or the task's own ``allow`` list.
A modifier element of R4 (``isModifier``: verificationStatus, doNotPerform, a quantity's
comparator, any modifierExtension, …) counts only where the check looked at it: an
allowance never covers one. What a check looked at is found by location, item by item, so
a filter such as ``telecom.where(system='phone')`` vouches for the phone entry, not for an
email beside it; a field whose path is not plain FHIRPath vouches for its element path.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from fae.fhir.elements import Located, locate
from fae.tasks.fhir_values import content, covered, element_path, is_mapping
from fae.tasks.locations import Location, selected, value_at
from fae.tasks.matchers import ITEM_KINDS, Created, item_fits, kind_of, match, same_key
from fae.util.data_files import read_yaml

ADDITIONS = Path(__file__).parent / "data" / "additions.yaml"
_SKIPPED = frozenset({"id", "resourceType"})

Allowance = tuple[str, Any]
"""An element path and the matcher its values must fit (None: any value)."""


@dataclass(frozen=True)
class Additions:
    """The allow-list of benign additions, read from ``data/additions.yaml``."""

    every_resource: tuple[Allowance, ...]
    datatypes: Mapping[str, frozenset[str]]
    resources: Mapping[str, tuple[Allowance, ...]]

    def for_type(self, resource_type: str) -> tuple[Allowance, ...]:
        return self.every_resource + tuple(self.resources.get(resource_type, ()))


def allowances(entries: Sequence[Any]) -> tuple[Allowance, ...]:
    """Allow-list entries (a path, or ``{path: matcher}``) as (path, matcher) pairs."""
    found: list[Allowance] = []
    for entry in entries:
        if is_mapping(entry):
            found.extend((str(path), matcher) for path, matcher in entry.items())
        else:
            found.append((str(entry), None))
    return tuple(found)


@lru_cache(maxsize=1)
def additions() -> Additions:
    raw = read_yaml(ADDITIONS)
    return Additions(
        every_resource=allowances(raw["every_resource"]),
        datatypes={name: frozenset(parts) for name, parts in raw["datatypes"].items()},
        resources={name: allowances(entries) for name, entries in raw["resources"].items()},
    )


# ---------------------------------------------------------------- what the check looked at


@dataclass
class Looked:
    """The locations a check's fields looked at, and element paths for fields walked by fhirpathpy."""

    locations: set[Location]
    elements: set[str]


def looked_at(
    resource: Any, fields: Mapping[str, Any], created: Created, into: Looked | None = None, at: Location = ()
) -> Looked:
    """What the fields of a check looked at in a resource (or in one item of a repeating element)."""
    looked = into if into is not None else Looked(set(), set())
    for path, matcher in fields.items():
        kind, wanted = kind_of(matcher)
        if kind == "absent":
            continue
        found = selected(resource, path)
        if found is None:
            looked.elements.add(_joined(at, element_path(path)))
            continue
        locations, compared = found
        looked.locations.update((*at, *location) for location in compared)
        if kind not in ITEM_KINDS:
            looked.locations.update((*at, *location) for location in locations)
            continue
        specs = [wanted] if kind == "all" else list(wanted)
        key = matcher.get("key") or []
        for location in locations:
            item = value_at(resource, location)
            if kind == "contains" and not any(
                item_fits(item, spec, created) or (key and same_key(item, spec, key, created)) for spec in specs
            ):
                continue  # another entry of the list: judged as an addition
            for spec in specs:
                looked_at(item, spec, created, looked, (*at, *location))
    return looked


def _joined(at: Location, path: str) -> str:
    keys = [step for step in at if isinstance(step, str)]
    return ".".join([*keys, path]) if keys else path


# ---------------------------------------------------------------- the rest of the resource


def _leaves(value: Any, location: Location = ()) -> Iterator[Location]:
    """The location of every primitive (and of every empty object or list) inside a value."""
    if is_mapping(value) and value:
        for key in value:
            yield from _leaves(value[key], (*location, key))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from _leaves(item, (*location, index))
    else:
        yield location


def _keys(location: Location) -> tuple[str, ...]:
    """The element path of a location: its keys, indices dropped."""
    return tuple(step for step in location if isinstance(step, str))


def _steps(location: Location) -> list[tuple[Location, Location]]:
    """For each key of a location: (the location of its parent, the location up to and including the key)."""
    return [(location[:end], location[: end + 1]) for end, step in enumerate(location) if isinstance(step, str)]


@dataclass
class _Resource:
    resource_type: str
    resource: dict[str, Any]
    looked: Looked
    allowed: tuple[Allowance, ...]
    datatypes: Mapping[str, frozenset[str]]

    def in_play(self, location: Location) -> bool:
        """Whether the check looked at this location or at something inside it."""
        size = len(location)
        return any(seen[:size] == location for seen in self.looked.locations)

    def looked_depth(self, location: Location) -> int | None:
        """How many keys down the check looked at this leaf as a whole (None: it did not)."""
        for end in range(1, len(location) + 1):
            if location[:end] in self.looked.locations:
                return len(_keys(location[:end]))
        keys = _keys(location)
        return next((d for d in range(1, len(keys) + 1) if ".".join(keys[:d]) in self.looked.elements), None)

    def datatype_part(self, location: Location, place: Located | None) -> int | None:
        """How many keys down a datatype's benign part (a display, a text, an extension) starts, under a parent the
        check looked into (None: the leaf is in no such part)."""
        if place is None:
            return None
        for depth, (parent, _here) in enumerate(_steps(location)[1:], start=2):
            key = _keys(_here)[-1]
            owner = place.trail[depth - 2]
            part = key == "extension" or key in self.datatypes.get(owner.types[0] if len(owner.types) == 1 else "", ())
            if part and self.in_play(parent):
                return depth
        return None

    def allowed_by_list(self, location: Location, keys: tuple[str, ...]) -> bool:
        path = ".".join(keys)
        for allowed, matcher in self.allowed:
            if not covered(path, {allowed}):
                continue
            if matcher is None:
                return True
            holder = _steps(location)[len(allowed.split(".")) - 1][1]
            if match([value_at(self.resource, holder)], matcher) is None:
                return True
        return False

    def problem(self, location: Location) -> str | None:
        """Why a leaf is neither looked at nor a benign addition (None: it is one of the two)."""
        keys = _keys(location)
        if not keys or keys[0] in _SKIPPED:
            return None
        hidden = next((i for i, key in enumerate(keys) if key.startswith("_")), None)
        if hidden is not None:  # a primitive's id and extensions: never a change of meaning, and never alone
            parent = _steps(location)[hidden][0]
            return None if self.in_play(parent) or not parent else "carries extensions on an element not asked for"
        place = locate(self.resource_type, keys)
        depth = self.looked_depth(location)
        if depth is None:
            depth = self.datatype_part(location, place)
        if depth is not None:
            if place is None or not any(element.modifier for element in place.trail[depth:]):
                return None
        elif place is not None and not place.modifier and self.allowed_by_list(location, keys):
            return None
        if place is None:
            return "is not an element of R4 " + self.resource_type
        if place.modifier:
            return "is a modifier element the task did not ask for"
        return "is not asked for by the task"

    def shown(self, location: Location) -> Location:
        """The outermost part of a leaf's location the agent added: neither looked into by the check nor on (or
        above) the allow-list, or a modifier element the check did not look at."""
        for end in range(1, len(location) + 1):
            part = location[:end]
            if self.in_play(part):
                continue
            path = ".".join(_keys(part))
            listed = any(covered(path, {allowed}) or allowed.startswith(path + ".") for allowed, _ in self.allowed)
            place = locate(self.resource_type, _keys(part))
            if not listed or (place is not None and place.trail[-1].modifier):
                return part
        return location


def uninvited(
    resource_type: str,
    resource: dict[str, Any],
    fields: Mapping[str, Any],
    *,
    created: Created,
    allow: Sequence[Any] = (),
) -> list[str]:
    """What a created resource carries that its check did not look at and no allowance covers, one line each."""
    body = content(resource)
    state = _Resource(
        resource_type,
        body,
        looked_at(body, fields, created),
        additions().for_type(resource_type) + allowances(allow),
        additions().datatypes,
    )
    found: dict[str, str] = {}
    for location in _leaves(body):
        why = state.problem(location)
        if why is None:
            continue
        added = state.shown(location)
        element = ".".join(_keys(added))
        if element not in found:
            found[element] = f"{resource_type}.{element} {why}: {value_at(body, added)!r:.120}"
    return list(found.values())
