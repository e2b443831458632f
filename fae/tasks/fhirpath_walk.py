"""Plain FHIRPath selections (``a.b.c``, ``a.where(b.c = 'x').d``) evaluated directly, as fhirpathpy would.

Check specs name fields with short member paths, and judging evaluates them for
every run; fhirpathpy's general evaluator costs tens of microseconds a call.
``compile_simple`` turns a path of member steps and ``where(path = 'text')``
filters into a direct walk over the resource that returns exactly what
fhirpathpy (without a model) returns: lists flattened, floats as ``Decimal``,
dicts rebuilt, extension-only dicts left out. Anything else — functions,
operators, keywords, escapes, a primitive's ``_element`` extension in the way —
is not handled here (``compile_simple`` returns None, or the walk raises
``Unsupported``) and the caller uses fhirpathpy.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from functools import lru_cache
from typing import Any

_NAME = r"[a-z][A-Za-z0-9]*"
_STEP = re.compile(rf"where\(\s*(?P<inner>{_NAME}(?:\.{_NAME})*)\s*=\s*'(?P<text>[^'\\]*)'\s*\)|(?P<member>{_NAME})")
# words the FHIRPath grammar reads as something other than a member name
_KEYWORDS = frozenset(
    {"and", "as", "contains", "div", "false", "implies", "in", "is", "length", "mod", "or", "true", "xor", "where"}
)


class Unsupported(Exception):
    """The resource has something the direct walk does not model; evaluate with fhirpathpy."""


Step = tuple[str, Any]


@lru_cache(maxsize=1024)
def parse_simple(path: str) -> tuple[Step, ...] | None:
    """The steps of a plain member path with ``where(x = 'text')`` filters, else None (parsed once per path: the
    strict check locates the same few paths in every created resource it judges whole)."""
    steps: list[Step] = []
    at = 0
    while True:
        found = _STEP.match(path, at)
        if found is None:
            return None
        if found.group("member"):
            if found.group("member") in _KEYWORDS:
                return None
            steps.append(("member", found.group("member")))
        else:
            if not steps:
                return None  # a leading where() filters the root, which member paths never do
            inner = tuple(found.group("inner").split("."))
            if any(name in _KEYWORDS for name in inner):
                return None
            steps.append(("where", (inner, found.group("text"))))
        at = found.end()
        if at == len(path):
            return tuple(steps)
        if path[at] != ".":
            return None
        at += 1


def compile_simple(path: str) -> Callable[[Any], list[Any]] | None:
    """A direct evaluator for a plain member path with ``where(x = 'text')`` filters, else None."""
    frozen = parse_simple(path)
    if frozen is None:
        return None
    return lambda resource: _output(_walk([resource], frozen))


def _member(items: list[Any], key: str) -> list[Any]:
    """Every value of ``key`` in the items that are objects, lists flattened (FHIRPath member access)."""
    found: list[Any] = []
    hidden = "_" + key
    for item in items:
        if isinstance(item, dict):
            if hidden in item:
                raise Unsupported(hidden)
            value = item.get(key)
            if value is None:
                continue
            if isinstance(value, list):
                found.extend(value)
            else:
                found.append(value)
    return found


def _walk(items: list[Any], steps: tuple[Step, ...]) -> list[Any]:
    for kind, arg in steps:
        if kind == "member":
            items = _member(items, arg)
            continue
        inner, text = arg
        kept = []
        for item in items:
            selected = [item]
            for key in inner:
                selected = _member(selected, key)
            # FHIRPath '=' on collections: a single value equal to the text
            if len(selected) == 1 and selected[0] == text:
                kept.append(item)
        items = kept
    return items


def _plain(value: Any) -> Any:
    """A value inside a selected element, as fhirpathpy hands it back."""
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, list):
        kept = []
        for item in value:
            item = _plain(item)
            if isinstance(item, dict) and list(item) == ["extension"]:
                continue
            kept.append(item)
        return kept
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _output(items: list[Any]) -> list[Any]:
    """The selected elements as fhirpathpy returns them (a selected list stays as it is)."""
    result = []
    for item in items:
        if isinstance(item, float):
            item = Decimal(str(item))
        elif isinstance(item, dict):
            item = {key: _plain(value) for key, value in item.items()}
            if list(item) == ["extension"]:
                continue
        result.append(item)
    return result
