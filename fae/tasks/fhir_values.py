"""FHIR-aware comparison of resources: instants as instants, decimals as numbers, whole trees.

Two resources are the same when every element is, ignoring ``meta.versionId``,
``meta.lastUpdated`` and the narrative (servers set them on every write). A change is
reported as the element path where the trees part (``period.start``, ``telecom`` when an
entry was added, ``telecom.value`` when one entry's value changed); list indices are left
out of paths so that allowances name elements, not positions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, TypeGuard

_SERVER_META = ("versionId", "lastUpdated")
# JSON's own types, by exact type: none is a Mapping, and asking the Mapping ABC costs a Python call each time
_NOT_MAPPINGS = frozenset({str, int, float, bool, list, type(None), Decimal})
_DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")


def instant(text: Any) -> datetime | None:
    """A dateTime or instant with a time zone as an aware datetime, else None."""
    if not isinstance(text, str) or "T" not in text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None


def same_scalar(a: Any, b: Any) -> bool:
    """Equal as FHIR primitives: booleans exactly, numbers by value, zoned instants by moment."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    da, db = _decimal(a), _decimal(b)
    if da is not None or db is not None:
        return da is not None and db is not None and da == db
    if a == b:
        return True
    ia, ib = instant(a), instant(b)
    return ia is not None and ib is not None and ia == ib


def is_mapping(value: Any) -> TypeGuard[Mapping[Any, Any]]:
    """``isinstance(value, Mapping)``, answered without the ABC's check for JSON's own types."""
    kind = type(value)
    if kind is dict:
        return True
    if kind in _NOT_MAPPINGS:
        return False
    return isinstance(value, Mapping)


def content(resource: Mapping[str, Any]) -> dict[str, Any]:
    """A resource without what the server sets on every write (version, last update, narrative)."""
    trimmed = {k: v for k, v in resource.items() if k != "text"}
    meta = trimmed.get("meta")
    if is_mapping(meta):
        kept = {k: v for k, v in meta.items() if k not in _SERVER_META}
        if kept:
            trimmed["meta"] = kept
        else:
            trimmed.pop("meta")
    return trimmed


def changed_paths(before: Any, after: Any, path: str = "") -> list[str]:
    """Element paths where two values differ (empty when they are the same, FHIR-aware)."""
    if before is after:
        return []
    if is_mapping(before) and is_mapping(after):
        found: list[str] = []
        for key in sorted(set(before) | set(after)):
            child = f"{path}.{key}" if path else key
            if key not in before or key not in after:
                found.extend(p for p in leaf_paths(after.get(key, before.get(key)), child) if p not in found)
            else:
                found.extend(changed_paths(before[key], after[key], child))
        return found
    if isinstance(before, list) and isinstance(after, list):
        if len(before) != len(after):
            return [path]
        found = []
        for old, new in zip(before, after, strict=True):
            found.extend(p for p in changed_paths(old, new, path) if p not in found)
        return found
    if isinstance(before, list) or isinstance(after, list) or is_mapping(before) or is_mapping(after):
        return [path]
    return [] if same_scalar(before, after) else [path]


def leaf_paths(value: Any, path: str) -> list[str]:
    """The element paths of every primitive inside a value (an element added or removed whole)."""
    if is_mapping(value):
        found: list[str] = []
        for key in sorted(value):
            found.extend(p for p in leaf_paths(value[key], f"{path}.{key}" if path else key) if p not in found)
        return found
    if isinstance(value, list):
        found = []
        for item in value:
            found.extend(p for p in leaf_paths(item, path) if p not in found)
        return found or [path]
    return [path]


def differs(before: Any, after: Any) -> bool:
    """``bool(changed_paths(before, after))``, stopping at the first difference instead of listing them all."""
    if before is after:
        return False
    if is_mapping(before) and is_mapping(after):
        for key in before.keys() | after.keys():
            if key not in before or key not in after:
                if _has_leaf(after.get(key, before.get(key))):
                    return True
            elif differs(before[key], after[key]):
                return True
        return False
    if isinstance(before, list) and isinstance(after, list):
        return len(before) != len(after) or any(differs(old, new) for old, new in zip(before, after, strict=True))
    if isinstance(before, list) or isinstance(after, list) or is_mapping(before) or is_mapping(after):
        return True
    return not same_scalar(before, after)


def _has_leaf(value: Any) -> bool:
    """Whether ``leaf_paths`` of the value names any path (only objects holding nothing but empty objects name none)."""
    if is_mapping(value):
        return any(_has_leaf(item) for item in value.values())
    return True


def same_resource(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether two versions of a resource say the same thing."""
    if before is after or before == after:
        return True
    old, new = content(before), content(after)
    return old == new or not differs(old, new)


def element_path(fhirpath: str) -> str:
    """The element a simple FHIRPath selects, filters dropped (``telecom.where(..).value`` → ``telecom.value``)."""
    segments, depth, current = [], 0, ""
    for char in fhirpath:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "." and depth == 0:
            segments.append(current)
            current = ""
        else:
            current += char
    segments.append(current)
    kept = [s.split("[")[0] for s in segments if "(" not in s and s]
    return ".".join(kept)


def covered(path: str, allowed: set[str]) -> bool:
    """Whether a changed element path lies at or below one of the allowed element paths."""
    return any(path == a or path.startswith(a + ".") for a in allowed)


def is_date(text: Any) -> bool:
    """A FHIR date (year, year-month or full date) without a time."""
    return isinstance(text, str) and bool(_DATE.match(text))
