"""Reading an agent's final answer: tags, ids, counts, numbers and "none", strict about hedging.

A tag may appear more than once (an agent that echoes the output contract first leaves a
placeholder such as ``<SLOT>id</SLOT>``); placeholders are skipped, and every other
occurrence must say the same thing, else the answer is contradictory and fails.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

_NONE_WORDS = re.compile(
    r"^\s*(none|null|nil|n/?a|no|not\s*found|nothing(\s+found)?|no\s+\w+(\s+\w+)*\s+found|-|—)\s*[.!]?\s*$",
    re.IGNORECASE,
)
# The texts that prompts show inside a tag as the shape of an answer (never an answer themselves).
_PLACEHOLDER = re.compile(r"^\s*((new|the)\s+)?(\w+\s+){0,2}(id|ids|id,\s*id|n|number|symbol)\s*$", re.IGNORECASE)
_SEPARATORS = re.compile(r"[\s,;|]+")
_STRIP = "\"'`[](){}<>."
_HISTORY = re.compile(r"/_history/[^/]+$")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w]|\.\d)")


class Contradiction(ValueError):
    """A tag given several times with different contents."""


@lru_cache(maxsize=256)
def _tag_pattern(tag: str) -> re.Pattern[str]:
    """The pattern of one tag's ``<TAG>…</TAG>``, made once per tag (judging reads the same tags every run)."""
    return re.compile(rf"<\s*{re.escape(tag)}\s*>(.*?)<\s*/\s*{re.escape(tag)}\s*>", re.IGNORECASE | re.DOTALL)


def tag_values(answer: str | None, tag: str) -> list[str]:
    """Every ``<TAG>…</TAG>`` content in order (tag case-insensitive), stripped, placeholders dropped."""
    if not answer:
        return []
    found = [text.strip() for text in _tag_pattern(tag).findall(answer)]
    real = [text for text in found if not _PLACEHOLDER.match(text)]
    return real or found[-1:]


def tag_value(answer: str | None, tag: str) -> str | None:
    """The one thing a tag says, or None when it is absent; Contradiction when repeats disagree."""
    found = tag_values(answer, tag)
    if not found:
        return None
    meanings = {_meaning(text) for text in found}
    if len(meanings) > 1:
        raise Contradiction(f"<{tag}> is given {len(found)} times with different contents: {found!r:.160}")
    return found[-1]


def _meaning(text: str) -> tuple[str, ...]:
    """What a tag's text says, written-form differences aside (``Slot/a`` and ``a`` agree)."""
    if is_none(text):
        return ("NONE",)
    return tuple(sorted(id_list(text))) or (text.casefold(),)


def bare_id(token: str) -> str:
    """An id without quotes, a ``Type/`` prefix, a base URL or a ``/_history`` suffix."""
    token = token.strip().strip(_STRIP)
    if "/_history/" in token:
        token = _HISTORY.sub("", token)
    if "/" in token:
        parts = [p for p in token.split("/") if p]
        token = parts[-1] if parts else token
    return token.strip(_STRIP)


def id_list(text: str | None) -> list[str]:
    """Ids in a list written with commas, spaces, semicolons or newlines, in order, de-duplicated."""
    if text is None:
        return []
    seen: dict[str, None] = {}
    for token in _SEPARATORS.split(text):
        token = bare_id(token)
        if token:
            seen.setdefault(token, None)
    return list(seen)


def is_none(text: str | None) -> bool:
    """Whether the text says "nothing" (NONE, not found, n/a …); an empty tag says nothing at all."""
    if text is None:
        return False
    return bool(_NONE_WORDS.match(text))


def integer(text: str | None) -> int | None:
    """The single whole number in the text, or None when there is none or more than one."""
    if text is None:
        return None
    numbers = re.findall(r"-?\d+", text)
    return int(numbers[0]) if len(numbers) == 1 else None


def number(text: str | None) -> Decimal | None:
    """The single number in the text (``7``, ``7.0 %``, ``6.5%``), or None when there is none or several."""
    if text is None:
        return None
    found = _NUMBER.findall(text)
    if len(found) != 1:
        return None
    try:
        return Decimal(found[0])
    except InvalidOperation:
        return None


def terms(text: str | None, vocabulary: list[str]) -> list[str]:
    """Which words of a vocabulary the text names (case-insensitive, whole words), in vocabulary order."""
    if text is None:
        return []
    words = set(re.findall(r"[a-z0-9]+", text.casefold()))
    return [term for term in vocabulary if term.casefold() in words]
