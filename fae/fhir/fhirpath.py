"""FHIRPath for search: expressions trimmed to one resource type, compiled once, with resolve()."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import fhirpathpy
from fhirpathpy.engine.nodes import ResourceNode
from fhirpathpy.models import models

from fae.fhir.references import parse_reference
from fae.fhir.types import Resource

R4_MODEL = models["r4"]


def _resolve(inputs: list) -> list:
    """Stand-in for a resolved target: a node of the referenced type, so `resolve() is T` works.

    Search only ever asks for the target's type, which the reference itself names,
    so extraction stays a pure function of the resource.
    """
    out = []
    for item in inputs:
        ref = item.get("reference") if isinstance(item, dict) else item
        parsed = parse_reference(ref) if isinstance(ref, str) else None
        if parsed is not None:
            stub = {"resourceType": parsed[0], "id": parsed[1]}
            out.append(ResourceNode.create_node(stub, parsed[0]))
    return out


OPTIONS = {"userInvocationTable": {"resolve": {"fn": _resolve, "arity": {0: []}}}}


def split_top_level(text: str, separator: str) -> tuple[list[str], bool]:
    """``text`` split on ``separator`` outside quotes and parentheses, and whether those balance."""
    pieces, depth, quote, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == "'":
            quote = not quote
        elif quote:
            continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == separator and depth == 0:
            pieces.append(text[start:i])
            start = i + 1
    pieces.append(text[start:])
    return pieces, depth == 0 and not quote


def split_union(expression: str) -> list[str]:
    """Split an expression on its top-level `|` operators."""
    parts, _ = split_top_level(expression, "|")
    return [p.strip() for p in parts if p.strip()]


def _root(part: str) -> str:
    return part.lstrip("(").split(".", 1)[0].split(" ", 1)[0]


@functools.lru_cache(maxsize=8192)
def expression_for(expression: str, resource_type: str) -> str | None:
    """The parts of a (multi-resource) expression that apply to one resource type, or None."""
    kept = []
    for part in split_union(expression):
        root = _root(part)
        if root == resource_type:
            kept.append(part)
        elif root in ("Resource", "DomainResource"):
            kept.append(
                resource_type + part[part.index(root) + len(root) :]
                if part.startswith(root)
                else part.replace(root + ".", resource_type + ".", 1)
            )
    return " | ".join(kept) if kept else None


@functools.lru_cache(maxsize=8192)
def compiled(expression: str) -> Callable[[Mapping[str, Any], Mapping[str, Any] | None], list[Any]]:
    """Compile once; compiled evaluation is ~20x faster than parsing per call."""
    return fhirpathpy.compile(expression, R4_MODEL, OPTIONS)


def evaluate(expression: str, resource: Resource) -> list[Any]:
    """Evaluate a compiled expression; an expression the engine cannot run yields nothing."""
    try:
        return compiled(expression)(resource, {})
    except Exception:
        return []
