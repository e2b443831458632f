"""The shape of a task's check spec, read when the task loads: a misspelt key or matcher is named then, not at
judging time (answers are read by ``fae.tasks.answer_checks``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fae.tasks.matchers import ITEM_KINDS, VALUE_MATCHERS

_PARTS = frozenset({"answer", "creates", "updates", "deletes"})
_CREATE_KEYS = frozenset({"type", "count", "fields", "optional", "allow"})
_UPDATE_KEYS = frozenset({"ref", "fields", "may_change"})


def _matcher_problems(where: str, matcher: Any) -> list[str]:
    if not isinstance(matcher, Mapping):
        return []  # a plain value: equals
    kinds = [key for key in matcher if key != "key"]
    if len(kinds) != 1:
        return [f"{where}: a matcher has one kind, got {sorted(map(str, matcher))}"]
    kind = kinds[0]
    if kind not in VALUE_MATCHERS and kind not in ITEM_KINDS:
        known = ", ".join(sorted({*VALUE_MATCHERS, *ITEM_KINDS}))
        return [f"{where}: unknown matcher {kind!r} (known: {known})"]
    if "key" in matcher and kind != "contains":
        return [f"{where}: `key` goes only beside `contains`"]
    if kind not in ITEM_KINDS:
        return []
    wanted = matcher[kind]
    items = [wanted] if kind == "all" else wanted
    if not isinstance(items, list) or not items or not all(isinstance(item, Mapping) and item for item in items):
        shape = "a mapping of sub-fields" if kind == "all" else "a list of mappings of sub-fields"
        return [f"{where}: {kind} takes {shape}"]
    return [p for item in items for path, inner in item.items() for p in _matcher_problems(f"{where}.{path}", inner)]


def _fields_problems(where: str, fields: Any) -> list[str]:
    if not isinstance(fields, Mapping):
        return [f"{where}: a mapping of FHIRPath to matcher"]
    return [p for path, matcher in fields.items() for p in _matcher_problems(f"{where}.{path}", matcher)]


def check_problems(check: Any) -> list[str]:
    """What is wrong with the shape of a check spec (empty: nothing)."""
    if not isinstance(check, Mapping):
        return ["check: a mapping of answer, creates, updates and deletes"]
    problems = [f"check: unknown part {key!r}" for key in check if key not in _PARTS]
    for part, names, keys, needs in (
        ("creates", "type", _CREATE_KEYS, "a resource type"),
        ("updates", "ref", _UPDATE_KEYS, "the record it updates"),
    ):
        for index, entry in enumerate(check.get(part) or []):
            where = f"check.{part}[{index}]"
            if not isinstance(entry, Mapping) or not isinstance(entry.get(names), str):
                problems.append(f"{where}: needs {needs} (`{names}`)")
                continue
            problems += [f"{where}: unknown key {key!r}" for key in entry if key not in keys]
            problems += _fields_problems(f"{where}.fields", entry.get("fields", {}))
            problems += _fields_problems(f"{where}.optional", entry.get("optional", {}))
            for allowed in entry.get("allow", []):
                if not isinstance(allowed, str) and not (isinstance(allowed, Mapping) and len(allowed) == 1):
                    problems.append(f"{where}.allow: an element path, or one {{path: matcher}}, got {allowed!r:.60}")
    return problems
