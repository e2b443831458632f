"""A task's check spec as typed values, decoded when the task loads: a misspelt key or matcher is named then, with
its file and field, not at judging time.

A spec has up to four parts (``fae.tasks.checks`` judges them, ``fae.tasks.answer_checks`` the answers)::

    answer:   {TAG: answer check}
    creates:  [{type: T, count: 1, fields: {fhirpath: matcher}, optional: {...}, allow: [...]}]
    updates:  [{ref: T/id, fields: {fhirpath: matcher}, may_change: [element]}]
    deletes:  [T/id]

Every part and entry refuses a key it does not know. Matchers stay plain values (they are a small language of
their own, ``fae.tasks.matchers``); ``check_problems`` checks their kinds. A spec in a task file may hold
``{param}`` placeholders; a rendered variation's spec has them filled (``read_check``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from fae.errors import TaskError
from fae.tasks.matchers import ITEM_KINDS, VALUE_MATCHERS
from fae.util.data_files import field_error


class AnswerCheck(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """What one answer tag must hold: exactly one kind is given (``number`` may have a ``tolerance``, ``term``
    the words it is told apart from, ``among``). A str where a number or list goes is a placeholder."""

    id: str | None = None
    ids: list[str] | str | None = None
    none: bool | None = None
    count: int | str | None = None
    number: int | float | str | None = None
    tolerance: int | float | str | None = None
    term: str | None = None
    among: list[str] | str | None = None
    created: str | None = None
    updated: str | None = None
    words: str | None = None


ANSWER_KINDS = ("id", "ids", "none", "count", "number", "term", "created", "updated", "words")
_BESIDE = {"tolerance": "number", "among": "term"}


class CreateCheck(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """``count`` new resources of ``type`` the agent must create, with these fields (and nothing else but
    ``optional`` fields, checked where given, and what ``allow`` names: an element path or one {path: matcher})."""

    type: str
    count: int = 1
    fields: dict[str, Any] = {}
    optional: dict[str, Any] = {}
    allow: list[str | dict[str, Any]] = []


class UpdateCheck(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """The record ``ref`` the agent must change to hold these fields; only they and ``may_change`` may differ."""

    ref: str
    fields: dict[str, Any] = {}
    may_change: list[str] = []


class CheckSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """What a task's validators hold an answer and the final state to."""

    answer: dict[str, AnswerCheck] = {}
    creates: list[CreateCheck] = []
    updates: list[UpdateCheck] = []
    deletes: list[str] = []


def read_check(raw: Any, where: str = "check spec") -> CheckSpec:
    """A check spec from plain data (a rendered variation's, filled), or TaskError naming ``where`` and the field."""
    try:
        return msgspec.convert(raw, CheckSpec)
    except msgspec.ValidationError as exc:
        raise TaskError(f"{where}: {field_error(exc, 'check', kind=CheckSpec, raw=raw)}") from None


def _answer_problems(where: str, want: AnswerCheck) -> list[str]:
    given = [name for name in msgspec.structs.asdict(want) if getattr(want, name) is not None]
    kinds = [name for name in given if name in ANSWER_KINDS]
    if len(kinds) != 1:
        return [f"{where}: an answer check has one kind of {', '.join(ANSWER_KINDS)}; got {kinds or 'none'}"]
    return [
        f"{where}: `{extra}` goes only beside `{_BESIDE[extra]}`"
        for extra in given
        if _BESIDE.get(extra, kinds[0]) != kinds[0]
    ]


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


def _fields_problems(where: str, fields: Mapping[str, Any]) -> list[str]:
    return [p for path, matcher in fields.items() for p in _matcher_problems(f"{where}.{path}", matcher)]


def check_problems(check: CheckSpec) -> list[str]:
    """What is wrong with the kinds a check spec names, its answer checks' and its matchers' (empty: nothing)."""
    problems = [p for tag, want in check.answer.items() for p in _answer_problems(f"check.answer.{tag}", want)]
    for index, created in enumerate(check.creates):
        where = f"check.creates[{index}]"
        problems += _fields_problems(f"{where}.fields", created.fields)
        problems += _fields_problems(f"{where}.optional", created.optional)
        problems += [
            f"{where}.allow: an element path, or one {{path: matcher}}, got {allowed!r:.60}"
            for allowed in created.allow
            if not isinstance(allowed, str) and len(allowed) != 1
        ]
    for index, updated in enumerate(check.updates):
        problems += _fields_problems(f"check.updates[{index}].fields", updated.fields)
    return problems
