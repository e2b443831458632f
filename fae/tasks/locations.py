"""Where in a resource a plain FHIRPath selection lands: the keys and list indices of each selected value.

Judging a created resource whole needs to know which parts of it a check looked at.
``selected`` walks the same plain paths as ``fae.tasks.fhirpath_walk`` (member steps and
``where(x = 'text')`` filters) and returns locations instead of values; the elements a
filter compared (``telecom[0].system`` for ``telecom.where(system='phone')``) are
returned too, as looked at. A path of any other shape gives None.
"""

from __future__ import annotations

from typing import Any

from fae.tasks.fhirpath_walk import parse_simple

Location = tuple[str | int, ...]
Found = list[tuple[Location, Any]]


def _member(items: Found, key: str) -> Found:
    found: Found = []
    for location, item in items:
        if not isinstance(item, dict):
            continue
        value = item.get(key)
        if isinstance(value, list):
            found.extend(((*location, key, index), child) for index, child in enumerate(value))
        elif value is not None:
            found.append(((*location, key), value))
    return found


def selected(resource: Any, path: str) -> tuple[list[Location], list[Location]] | None:
    """(locations the path selects, locations its filters compared), or None for a path that is not plain."""
    steps = parse_simple(path)
    if steps is None:
        return None
    items: Found = [((), resource)]
    compared: list[Location] = []
    for kind, argument in steps:
        if kind == "member":
            items = _member(items, argument)
            continue
        inner, text = argument
        kept: Found = []
        for location, item in items:
            chosen: Found = [(location, item)]
            for key in inner:
                chosen = _member(chosen, key)
            if len(chosen) == 1 and chosen[0][1] == text:
                kept.append((location, item))
                compared.append(chosen[0][0])
        items = kept
    return [location for location, _ in items], compared


def value_at(resource: Any, location: Location) -> Any:
    """The value at a location (keys and indices from the resource down)."""
    value = resource
    for step in location:
        value = value[step]
    return value
