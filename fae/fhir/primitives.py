"""Lexical checks of FHIR string-typed primitives, each one pass over the text (no backtracking).

The R4 definitions give each primitive an XML Schema regex. Compiled with
Python's `re` they go wrong twice: `\\s` and `\\S` become Unicode-aware (so a
no-break space in a string is refused), and the base64Binary pattern
backtracks exponentially on long unpadded input. These hand-written checks
keep the XML Schema meaning (whitespace is exactly space, tab, CR and LF) and
run in time linear in the value.
"""

from __future__ import annotations

from collections.abc import Callable

XML_SPACE = frozenset(" \t\r\n")
_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
_ID = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-.")
_DIGITS = frozenset("0123456789")
_HEX_LOWER = frozenset("0123456789abcdef")
_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _digits(text: str, start: int, count: int) -> int | None:
    """The number spelt by `count` ASCII digits at `start`, or None."""
    part = text[start : start + count]
    if len(part) != count or not all(c in _DIGITS for c in part):
        return None
    return int(part)


def _no_xml_space(text: str) -> bool:
    return not any(c in XML_SPACE for c in text)


def is_string(text: str) -> bool:
    """string / markdown: any characters, at least one of them not whitespace."""
    return any(c not in XML_SPACE for c in text)


def is_code(text: str) -> bool:
    """code: tokens of non-whitespace separated by single whitespace characters, none at the ends."""
    if not text or text[0] in XML_SPACE or text[-1] in XML_SPACE:
        return False
    previous_space = False
    for c in text:
        space = c in XML_SPACE
        if space and previous_space:
            return False
        previous_space = space
    return True


def is_uri(text: str) -> bool:
    """uri / url / canonical: no whitespace; empty is refused (FHIR has no empty values)."""
    return bool(text) and _no_xml_space(text)


def is_id(text: str) -> bool:
    return 1 <= len(text) <= 64 and all(c in _ID for c in text)


def is_base64(text: str) -> bool:
    """base64Binary: base64 alphabet, whitespace anywhere, a multiple of four characters in all."""
    count = 0
    for c in text:
        if c in XML_SPACE:
            continue
        if c not in _BASE64:
            return False
        count += 1
    return count % 4 == 0


def is_oid(text: str) -> bool:
    if not text.startswith("urn:oid:"):
        return False
    arcs = text[8:].split(".")
    if len(arcs) < 2 or arcs[0] not in ("0", "1", "2"):
        return False
    return all(a and all(c in _DIGITS for c in a) and (a == "0" or a[0] != "0") for a in arcs[1:])


def is_uuid(text: str) -> bool:
    if len(text) != 45 or not text.startswith("urn:uuid:"):
        return False
    body = text[9:]
    return all((c == "-") if i in (8, 13, 18, 23) else (c in _HEX_LOWER) for i, c in enumerate(body))


def _date_end(text: str, full: bool) -> int | None:
    """Where a YYYY[-MM[-DD]] prefix ends (all three parts when `full`), or None if malformed."""
    year = _digits(text, 0, 4)
    if year is None or year == 0:
        return None
    if len(text) == 4:
        return None if full else 4
    if text[4:5] != "-" or (month := _digits(text, 5, 2)) is None or not 1 <= month <= 12:
        return None
    if len(text) == 7:
        return None if full else 7
    if text[7:8] != "-" or (day := _digits(text, 8, 2)) is None or not 1 <= day <= _DAYS[month - 1]:
        return None
    return 10


def _time_end(text: str, start: int) -> int | None:
    """Where an hh:mm:ss[.fff] at `start` ends, or None."""
    hour, minute, second = _digits(text, start, 2), _digits(text, start + 3, 2), _digits(text, start + 6, 2)
    if (
        hour is None
        or minute is None
        or second is None
        or text[start + 2 : start + 3] != ":"
        or text[start + 5 : start + 6] != ":"
        or hour > 23
        or minute > 59
        or second > 60
    ):
        return None
    end = start + 8
    if text[end : end + 1] == ".":
        digits = end + 1
        while digits < len(text) and text[digits] in _DIGITS:
            digits += 1
        if digits == end + 1:
            return None
        end = digits
    return end


def _zone_ok(text: str, start: int) -> bool:
    zone = text[start:]
    if zone == "Z":
        return True
    if len(zone) != 6 or zone[0] not in "+-" or zone[3] != ":":
        return False
    hours, minutes = _digits(zone, 1, 2), _digits(zone, 4, 2)
    if hours is None or minutes is None or minutes > 59:
        return False
    return hours <= 13 or (hours == 14 and minutes == 0)


def is_date(text: str) -> bool:
    return _date_end(text, full=False) == len(text)


def is_datetime(text: str) -> bool:
    end = _date_end(text, full=False)
    if end is None:
        return False
    if end == len(text):
        return True
    if end != 10 or text[10:11] != "T":
        return False
    after = _time_end(text, 11)
    return after is not None and _zone_ok(text, after)


def is_instant(text: str) -> bool:
    end = _date_end(text, full=True)
    if end != 10 or text[10:11] != "T":
        return False
    after = _time_end(text, 11)
    return after is not None and _zone_ok(text, after)


def is_time(text: str) -> bool:
    return _time_end(text, 0) == len(text)


CHECKS: dict[str, Callable[[str], bool]] = {
    "string": is_string,
    "markdown": is_string,
    "code": is_code,
    "id": is_id,
    "uri": is_uri,
    "url": is_uri,
    "canonical": is_uri,
    "oid": is_oid,
    "uuid": is_uuid,
    "base64Binary": is_base64,
    "date": is_date,
    "dateTime": is_datetime,
    "instant": is_instant,
    "time": is_time,
}


def valid_text(type_code: str, text: str) -> bool:
    """Whether a JSON string is a lexically valid value of a string-typed FHIR primitive."""
    check = CHECKS.get(type_code)
    return check(text) if check else True
