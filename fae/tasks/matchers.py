"""Field matchers: one named function per kind, each judging every value a field selects.

A matcher is ``{kind: wanted}`` (a plain value means ``{equals: value}``). Lists mean all:
every value the field selects must fit, and at least one must be there — a second,
contradicting coding, period or participant fails where one that fits would have passed
alone. Codings are compared with their system, quantities with their UCUM unit.

Repeating elements whose items carry several fields (a participant's actor and status, a
relative's condition and onset age) are matched item by item, so the right values on two
different items do not pass:

- ``exactly: [{sub: matcher, ...}, ...]`` — as many items as listed, each fitting its own;
- ``all: {sub: matcher, ...}`` — one item or more, every one fitting;
- ``contains: [{...}, ...]`` with ``key: [sub, ...]`` — each listed item present, and every
  other item with the same key (another phone beside the asked phone) fitting it too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from fae.tasks.fhir_values import instant, is_mapping, same_scalar
from fae.tasks.selection import values

UCUM = "http://unitsofmeasure.org"
ITEM_KINDS = frozenset({"exactly", "all", "contains"})
_HISTORY = re.compile(r"/_history/[^/]+$")

Created = Mapping[str, str]


def reference(value: Any) -> str | None:
    """``Type/id`` from a reference string or Reference (absolute URLs and versions dropped)."""
    if is_mapping(value):
        value = value.get("reference")
    if not isinstance(value, str):
        return None
    return _reference_text(value)


@lru_cache(maxsize=4096)
def _reference_text(value: str) -> str | None:
    """``Type/id`` from a reference string; kept by text: every judge of every run reads the same few references."""
    value = value.strip()
    if "/_history/" in value:
        value = _HISTORY.sub("", value)
    parts = [p for p in value.split("/") if p]
    return "/".join(parts[-2:]) if len(parts) >= 2 else None


def _same(found: Any, wanted: Any) -> bool:
    if isinstance(wanted, bool) or isinstance(found, bool):
        return found is wanted
    if isinstance(wanted, int | float) and isinstance(found, int | float):
        return same_scalar(found, wanted)
    return found == wanted


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _every(found: list[Any], fits: Callable[[Any], bool]) -> bool:
    return bool(found) and all(fits(value) for value in found)


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None


# ---------------------------------------------------------------- one value at a time


def _equals(found: list[Any], wanted: Any, _: Created) -> bool:
    return _every(found, lambda value: _same(value, wanted))


def _ci(found: list[Any], wanted: Any, _: Created) -> bool:
    return _every(found, lambda value: isinstance(value, str) and value.casefold() == str(wanted).casefold())


def _words_in(found: list[Any], wanted: Any, _: Created) -> bool:
    """Every word of the wanted text in the element's text (its values read as one, a phrase split over parts)."""
    need = _words(str(wanted))
    texts = [value for value in found if isinstance(value, str)]
    return len(texts) == len(found) and bool(texts) and all(w in _words(" ".join(texts)) for w in need)


def _instant(found: list[Any], wanted: Any, _: Created) -> bool:
    target = instant(wanted)
    if target is None:
        raise ValueError(f"matcher instant needs a zoned dateTime, got {wanted!r}")
    return _every(found, lambda value: instant(value) == target)


def _day(found: list[Any], wanted: Any, _: Created) -> bool:
    return _every(found, lambda value: isinstance(value, str) and value[:10] == wanted)


def _coding(found: list[Any], wanted: Any, _: Created) -> bool:
    """Every coding is the wanted system and code (a display, version or userSelected flag may differ)."""
    system, _sep, code = str(wanted).partition("|")
    return _every(found, lambda c: is_mapping(c) and c.get("system") == system and c.get("code") == code)


def _plain_reference(value: Any) -> bool:
    """A reference whose ``type``, when given, is the type it points at, and that names no other record."""
    if not is_mapping(value):
        return isinstance(value, str)
    target = reference(value)
    stated = value.get("type")
    return "identifier" not in value and (stated is None or (target is not None and target.split("/")[0] == stated))


def _refs(found: list[Any], wanted: Any, _: Created) -> bool:
    return all(map(_plain_reference, found)) and {reference(v) for v in found} == {reference(w) for w in wanted}


def _has_refs(found: list[Any], wanted: Any, _: Created) -> bool:
    return all(map(_plain_reference, found)) and {reference(w) for w in wanted} <= {reference(v) for v in found}


def _created(found: list[Any], wanted: Any, created: Created) -> bool:
    return _refs(found, [created.get(wanted, f"{wanted}/(none created)")], created)


def quantity(wanted: Any) -> tuple[Decimal, str, str]:
    """(value, system, code) of a quantity matcher: ``"52 a"`` or ``{value: 52, code: a, system: URL}``."""
    if is_mapping(wanted):
        value, code, system = wanted.get("value"), wanted.get("code"), wanted.get("system", UCUM)
    else:
        value, _sep, code = str(wanted).strip().partition(" ")
        system = UCUM
    number = _decimal(value)
    if number is None or not code:
        raise ValueError(f"matcher quantity needs a value and a unit code, got {wanted!r}")
    return number, str(system), str(code).strip()


def _quantity(found: list[Any], wanted: Any, _: Created) -> bool:
    """Every value is the quantity: its number, and its unit as a UCUM code and system; no comparator."""
    number, system, code = quantity(wanted)

    def fits(value: Any) -> bool:
        return (
            is_mapping(value)
            and "comparator" not in value
            and value.get("system") == system
            and value.get("code") == code
            and _decimal(value.get("value")) == number
        )

    return _every(found, fits)


def _in(found: list[Any], wanted: Any, _: Created) -> bool:
    """Every value is one of the listed ones (``in: [home, mobile]``)."""
    return _every(found, lambda value: any(_same(value, one) for one in wanted))


def _set(found: list[Any], wanted: Any, _: Created) -> bool:
    """The selected values, as a set, are the listed ones (each found is listed, each listed is found)."""
    return all(any(_same(value, one) for one in wanted) for value in found) and all(
        any(_same(value, one) for value in found) for one in wanted
    )


def _count(found: list[Any], wanted: Any, _: Created) -> bool:
    return len(found) == int(wanted)


def _absent(found: list[Any], wanted: Any, _: Created) -> bool:
    return not found


def _present(found: list[Any], wanted: Any, _: Created) -> bool:
    return bool(found)


VALUE_MATCHERS: dict[str, Callable[[list[Any], Any, Created], bool]] = {
    "equals": _equals,
    "ci": _ci,
    "words": _words_in,
    "instant": _instant,
    "day": _day,
    "coding": _coding,
    "refs": _refs,
    "has_refs": _has_refs,
    "created": _created,
    "quantity": _quantity,
    "in": _in,
    "set": _set,
    "count": _count,
    "absent": _absent,
    "present": _present,
}
"""Kind -> whether the selected values fit."""


# ---------------------------------------------------------------- items of a repeating element


def kind_of(matcher: Any) -> tuple[str, Any]:
    """(kind, wanted) of a matcher; a plain value is ``equals``."""
    if not is_mapping(matcher):
        return "equals", matcher
    kinds = [key for key in matcher if key != "key"]
    if len(kinds) != 1 or ("key" in matcher and kinds[0] != "contains"):
        raise ValueError(f"a matcher has one kind (and `key` beside `contains`), got {sorted(matcher)}")
    return kinds[0], matcher[kinds[0]]


def item_fits(item: Any, fields: Mapping[str, Any], created: Created) -> bool:
    return is_mapping(item) and all(match(values(item, path), m, created) is None for path, m in fields.items())


def pairing(items: Sequence[Any], specs: Sequence[Mapping[str, Any]], created: Created) -> bool:
    """Whether each spec can be given its own item that fits it."""
    fits = [[item_fits(item, spec, created) for item in items] for spec in specs]
    owner: dict[int, int] = {}

    def take(spec: int, seen: set[int]) -> bool:
        """Give ``spec`` an item, moving earlier specs to other items where needed (an augmenting path)."""
        for item in range(len(items)):
            if fits[spec][item] and item not in seen:
                seen.add(item)
                if item not in owner or take(owner[item], seen):
                    owner[item] = spec
                    return True
        return False

    return all(take(spec, set()) for spec in range(len(specs)))


def same_key(item: Any, spec: Mapping[str, Any], key: Sequence[str], created: Created) -> bool:
    """Whether an item has a listed item's key (the key's sub-fields fit that item's matchers)."""
    return item_fits(item, {k: spec[k] for k in key if k in spec}, created)


def _items(found: list[Any], kind: str, matcher: Mapping[str, Any], created: Created) -> bool:
    wanted = matcher[kind]
    if kind == "all":
        return _every(found, lambda item: item_fits(item, wanted, created))
    if kind == "exactly":
        return len(found) == len(wanted) and pairing(found, wanted, created)
    key = matcher.get("key") or []
    if not pairing(found, wanted, created):
        return False
    return all(
        item_fits(item, spec, created) for spec in wanted if key for item in found if same_key(item, spec, key, created)
    )


def _item_problems(item: Any, fields: Mapping[str, Any], created: Created) -> list[str]:
    if not is_mapping(item):
        return [f"not an object: {item!r:.60}"]
    return [
        f"{path} {wrong}" for path, m in fields.items() if (wrong := match(values(item, path), m, created)) is not None
    ]


def _explain_items(found: list[Any], kind: str, matcher: Mapping[str, Any], created: Created) -> str:
    """Why a list's items do not fit an item matcher, in words: which listed item found no fitting item, and what
    the nearest item got wrong."""
    wanted = matcher[kind]
    if kind == "all":
        wrong = [(i, p) for i, item in enumerate(found) if (p := _item_problems(item, wanted, created))]
        if not found:
            return "wanted one item or more, found none"
        return "; ".join(f"item {i + 1}: {', '.join(p)}" for i, p in wrong[:3])
    if kind == "exactly" and len(found) != len(wanted):
        return f"wanted exactly {len(wanted)} items, found {len(found)}"
    said = []
    for spec in wanted:
        if any(item_fits(item, spec, created) for item in found):
            continue
        nearest = min((_item_problems(item, spec, created) for item in found), key=len, default=["no items"])
        said.append(f"no item fits {dict(spec)!r:.120} (nearest: {', '.join(nearest)})")
    key = matcher.get("key") or []
    for spec in wanted if kind == "contains" and key else []:
        for i, item in enumerate(found):
            if same_key(item, spec, key, created) and not item_fits(item, spec, created):
                why = ", ".join(_item_problems(item, spec, created))
                said.append(f"item {i + 1} has the key of {dict(spec)!r:.80} but {why}")
    return "; ".join(said) or "the items fit only if one item is used twice"


def match(found: list[Any], matcher: Any, created: Created | None = None) -> str | None:
    """None when the selected values satisfy the matcher, else what is wrong.

    ``created`` maps a resource type to the resource judged as the one created of that type, for
    ``{created: Type}`` (a reference to what the agent just made).
    """
    kind, wanted = kind_of(matcher)
    created = created or {}
    if kind in ITEM_KINDS:
        if _items(found, kind, matcher, created):
            return None
        return f"{kind}: {_explain_items(found, kind, matcher, created)}"
    if kind in VALUE_MATCHERS:
        ok = VALUE_MATCHERS[kind](found, wanted, created)
    else:
        raise ValueError(f"unknown matcher {kind!r}")
    return None if ok else f"wanted {kind} {wanted!r}, found {found!r:.200}"
