"""Decoding client JSON: strict UTF-8 (no lone surrogates), no NaN, and a nesting limit.

Anything refused here would otherwise be stored and break later (a lone
surrogate cannot be encoded back, so every search of the sandbox would fail),
or recurse past the interpreter's limit deep inside the engine.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from fae.fhir.outcome import FhirProblem
from fae.fhir.types import Resource

# FHIR resources nest a few dozen levels at most; extensions of extensions go deepest
MAX_NESTING = 100


def nesting_depth_over(value: object, limit: int = MAX_NESTING) -> bool:
    """Whether JSON data nests arrays/objects more than `limit` deep (iterative: no recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children: Iterable[object]
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def parse_json(data: bytes, what: str = "Body") -> object:
    """JSON bytes as Python data; a 400 FhirProblem naming `what` for anything not clean JSON."""
    try:
        value = msgspec.json.decode(data)
    except RecursionError:
        raise FhirProblem(400, f"{what} is nested more than {MAX_NESTING} levels deep") from None
    except msgspec.DecodeError as exc:
        text = str(exc)
        if "surrogate" in text or "UTF-8" in text or "truncated" in text and b"\\u" in data:
            text = f"invalid Unicode ({text})"
        raise FhirProblem(400, f"{what} is not valid JSON: {text[:200]}") from None
    if nesting_depth_over(value):
        raise FhirProblem(400, f"{what} is nested more than {MAX_NESTING} levels deep")
    return value


def clean_copy(value: Resource, what: str = "Content") -> Resource:
    """A deep copy of an in-process JSON object, refused (400) when it nests too deep or holds invalid text."""
    if nesting_depth_over(value):
        raise FhirProblem(400, f"{what} is nested more than {MAX_NESTING} levels deep")
    try:
        return msgspec.json.decode(msgspec.json.encode(value))
    except (UnicodeEncodeError, TypeError, msgspec.EncodeError) as exc:
        raise FhirProblem(400, f"{what} is not valid JSON data: {str(exc)[:200]}") from None
