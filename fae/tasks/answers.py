"""Reading an agent's final answer: tags, ids, counts, numbers and "none", strict about hedging.

A tag may appear more than once (an agent that echoes the output contract first leaves a
placeholder such as ``<SLOT>id</SLOT>``); placeholders are skipped, and every other
occurrence must say the same thing, else the answer is contradictory and fails. A tag that
holds nothing but placeholders gives no answer. Inside an id tag, labelling words ("The id
is: slot-1.", "Appointment appt-1") are read past; any other word counts as one more id.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import cache, lru_cache
from typing import NamedTuple

from fae.fhir.spec import load_spec

_NONE_WORDS = re.compile(
    r"^\s*(none(\s+found)?|null|nil|n/?a|no|not\s*found|nothing(\s+found)?|no\s+\w+(\s+\w+)*\s+found|-|—)\s*[.!]?\s*$",
    re.IGNORECASE,
)
# The texts that prompts show inside a tag as the shape of an answer (never an answer themselves).
_PLACEHOLDER = re.compile(
    r"^\s*(((new|the)\s+)?(\w+\s+){0,2}(id|ids|id,\s*id|n|number|symbol)|\.\.\.|…|\?+)\s*$", re.IGNORECASE
)
_ECHO = re.compile(r"^\[echoed from the prompt: (.*)\]$", re.DOTALL)
_TOKEN = re.compile(r"[^\s,;|]+")
_STRIP = "\"'`[](){}<>.:=*"
_HISTORY = re.compile(r"/_history/[^/]+$")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w]|\.\d)")
_INTEGER = re.compile(r"-?\d+")
# Words that label an id rather than add to it: "The id is: slot-1.", "Appointment appt-1", "a-1 and b-2".
LABEL_WORDS = frozenset(
    "the a an id ids identifier identifiers is are was were it its of new newly created updated booked "
    "cancelled canceled revoked completed resource resources record records reference answer and".split()
)


class Contradiction(ValueError):
    """A tag given several times with different contents."""


class Occurrence(NamedTuple):
    """One ``<TAG>…</TAG>`` in an answer: where it starts and ends, and its content as written."""

    start: int
    end: int
    text_start: int
    text: str


@lru_cache(maxsize=256)
def _tag_pattern(tag: str) -> re.Pattern[str]:
    """The pattern of one tag's ``<TAG>…</TAG>``, made once per tag (judging reads the same tags every run)."""
    return re.compile(rf"<\s*{re.escape(tag)}\s*>(.*?)<\s*/\s*{re.escape(tag)}\s*>", re.IGNORECASE | re.DOTALL)


@lru_cache(maxsize=1024)
def occurrences(answer: str | None, tag: str) -> tuple[Occurrence, ...]:
    """Every ``<TAG>…</TAG>`` of an answer, in order (tag case-insensitive); kept for the answer's other reads."""
    if not answer:
        return ()
    return tuple(Occurrence(m.start(), m.end(), m.start(1), m.group(1)) for m in _tag_pattern(tag).finditer(answer))


def echo_mark(text: str) -> str:
    """The content a tag is given when it only echoes the prompt's own answer format (read as a placeholder)."""
    return f"[echoed from the prompt: {text.strip()}]"


@lru_cache(maxsize=1024)
def is_placeholder(text: str, tag: str) -> bool:
    """Whether a tag's content is the shape of an answer rather than one: ``id``, ``new slot id``, ``n``,
    ``…``, the tag's own name, or a content marked as echoed from the prompt."""
    words = re.sub(r"[\s_]+", " ", text).strip().casefold()
    return bool(_PLACEHOLDER.match(text) or _ECHO.match(text.strip())) or words == tag.replace("_", " ").casefold()


def placeholders(answer: str | None, tag: str) -> list[str]:
    """The placeholder contents of a tag, as written (an echoed one as the prompt had it)."""
    found = [o.text.strip() for o in occurrences(answer, tag) if is_placeholder(o.text, tag)]
    return [m.group(1) if (m := _ECHO.match(text)) else text for text in found]


def tag_values(answer: str | None, tag: str) -> list[str]:
    """Every ``<TAG>…</TAG>`` content in order (tag case-insensitive), stripped, placeholders dropped."""
    return [o.text.strip() for o in occurrences(answer, tag) if not is_placeholder(o.text, tag)]


def tag_value(answer: str | None, tag: str) -> str | None:
    """The one thing a tag says, or None when it is absent or holds only placeholders; Contradiction when
    repeats disagree."""
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


@cache
def _labels() -> frozenset[str]:
    return LABEL_WORDS | {name.casefold() for name in load_spec().resource_types}


@lru_cache(maxsize=1024)
def id_spans(text: str | None) -> tuple[tuple[int, int, str], ...]:
    """(start, end, id) of each id written in the text, labelling words skipped, repeats kept."""
    if text is None:
        return ()
    labels = _labels()
    found = []
    for match in _TOKEN.finditer(text):
        token = bare_id(match.group(0))
        if token and token.casefold() not in labels:
            found.append((match.start(), match.end(), token))
    return tuple(found)


def id_list(text: str | None) -> list[str]:
    """Ids in a list written with commas, spaces, semicolons or newlines, in order, de-duplicated."""
    return list(dict.fromkeys(token for _, _, token in id_spans(text)))


def is_none(text: str | None) -> bool:
    """Whether the text says "nothing" (NONE, not found, n/a …); an empty tag says nothing at all."""
    if text is None:
        return False
    return bool(_NONE_WORDS.match(text))


def integer_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _INTEGER.finditer(text)]


def integer(text: str | None) -> int | None:
    """The single whole number in the text, or None when there is none or more than one."""
    if text is None:
        return None
    numbers = _INTEGER.findall(text)
    return int(numbers[0]) if len(numbers) == 1 else None


def number_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _NUMBER.finditer(text)]


def number(text: str | None) -> Decimal | None:
    """The single number in the text (``7``, ``7.0 %``, ``6.5%``), or None when there is none or several:
    ``6.5 % (48 mmol/mol)`` gives one value in two units, which is two numbers (the prompts ask for one)."""
    if text is None:
        return None
    found = _NUMBER.findall(text)
    if len(found) != 1:
        return None
    try:
        return Decimal(found[0])
    except InvalidOperation:
        return None


def term_spans(text: str, vocabulary: list[str]) -> list[tuple[int, int, str]]:
    """(start, end, term) of each vocabulary word the text names (case-insensitive, whole words)."""
    known = {term.casefold(): term for term in vocabulary}
    return [
        (m.start(), m.end(), known[m.group(0).casefold()])
        for m in re.finditer(r"[A-Za-z0-9]+", text)
        if m.group(0).casefold() in known
    ]


def terms(text: str | None, vocabulary: list[str]) -> list[str]:
    """Which words of a vocabulary the text names (case-insensitive, whole words), in vocabulary order."""
    if text is None:
        return []
    named = {term for _, _, term in term_spans(text, vocabulary)}
    return [term for term in vocabulary if term in named]
