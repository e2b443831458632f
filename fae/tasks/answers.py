"""Tolerant reading of an agent's final answer: tags, ids, counts and "none"."""

from __future__ import annotations

import re

_NONE_WORDS = re.compile(
    r"^\s*(none|null|nil|n/?a|no|not\s*found|nothing(\s+found)?|no\s+\w+(\s+\w+)*\s+found|-|—)\s*[.!]?\s*$",
    re.IGNORECASE,
)
_SEPARATORS = re.compile(r"[\s,;|]+")
_STRIP = "\"'`[](){}<>."


def tag_value(answer: str | None, tag: str) -> str | None:
    """The text inside ``<TAG>…</TAG>`` (tag case-insensitive, last occurrence wins), or None."""
    if not answer:
        return None
    pattern = re.compile(
        rf"<\s*{re.escape(tag)}\s*>(.*?)<\s*/\s*{re.escape(tag)}\s*>", re.IGNORECASE | re.DOTALL
    )
    found = pattern.findall(answer)
    if not found:
        return None
    # An agent that repeats the output contract before answering leaves a placeholder
    # first; the answer it means is the last one.
    return found[-1].strip()


def bare_id(token: str) -> str:
    """An id without quotes, a ``Type/`` prefix, a base URL or a ``/_history`` suffix."""
    token = token.strip().strip(_STRIP)
    token = re.sub(r"/_history/[^/]+$", "", token)
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
