"""Search values: what a resource holds for a parameter, and how one query value matches it.

Extraction turns FHIRPath output into a small typed index per parameter type;
matching compares one query value (already parsed) with that index, following
the FHIR R4 search rules (prefixes, implicit ranges by precision, modifiers).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from typing import Any

from fae.fhir.outcome import FhirProblem
from fae.fhir.references import parse_reference
from fae.fhir.types import SearchIndex

PREFIXES = ("eq", "ne", "gt", "lt", "ge", "le", "sa", "eb", "ap")
INF = float("inf")
DATE_RE = re.compile(
    r"^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2})(?::(\d{2})(?::(\d{2})(\.\d+)?)?)?"
    r"(Z|[+-]\d{2}:\d{2})?)?)?)?$"
)
NAME_PARTS = ("family", "given", "prefix", "suffix", "text")
ADDRESS_PARTS = ("line", "city", "district", "state", "postalCode", "country", "text")


def normalise(text: str) -> str:
    """Case- and accent-insensitive form used by string search."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


# ---- dates -------------------------------------------------------------------------------


def date_range(text: str) -> tuple[float, float] | None:
    """[low, high) in epoch seconds for a FHIR date/dateTime/instant, by its precision."""
    m = DATE_RE.match(text.strip()) if isinstance(text, str) else None
    if not m:
        return None
    year, month, day, hour, minute, second, fraction, tz = m.groups()
    try:
        tzinfo = UTC
        if tz and tz != "Z":
            sign = 1 if tz[0] == "+" else -1
            tzinfo = timezone(sign * timedelta(hours=int(tz[1:3]), minutes=int(tz[4:6])))
        if month is None:
            start = datetime(int(year), 1, 1, tzinfo=tzinfo)
            end = datetime(int(year) + 1, 1, 1, tzinfo=tzinfo)
        elif day is None:
            start = datetime(int(year), int(month), 1, tzinfo=tzinfo)
            end = datetime(int(year) + int(month) // 12, int(month) % 12 + 1, 1, tzinfo=tzinfo)
        elif hour is None:
            start = datetime(int(year), int(month), int(day), tzinfo=tzinfo)
            end = start + timedelta(days=1)
        elif minute is None:
            start = datetime(int(year), int(month), int(day), int(hour), tzinfo=tzinfo)
            end = start + timedelta(hours=1)
        elif second is None:
            start = datetime(int(year), int(month), int(day), int(hour), int(minute), tzinfo=tzinfo)
            end = start + timedelta(minutes=1)
        else:
            micro = int((fraction or ".0")[1:7].ljust(6, "0"))
            start = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tzinfo=tzinfo)
            end = start + (timedelta(microseconds=1) if fraction else timedelta(seconds=1))
    except (ValueError, OverflowError):
        return None
    return start.timestamp(), end.timestamp()


def _date_index(values: list) -> list[tuple[float, float]]:
    out = []
    for v in values:
        if isinstance(v, str):
            r = date_range(v)
            if r:
                out.append(r)
        elif isinstance(v, dict):
            if "start" in v or "end" in v:
                lo = date_range(v["start"]) if isinstance(v.get("start"), str) else None
                hi = date_range(v["end"]) if isinstance(v.get("end"), str) else None
                if lo or hi:
                    out.append((lo[0] if lo else -INF, hi[1] if hi else INF))
            for event in v.get("event", []) if isinstance(v.get("event"), list) else []:
                r = date_range(event) if isinstance(event, str) else None
                if r:
                    out.append(r)
    return out


# ---- numbers and quantities ---------------------------------------------------------------


def _decimal(value: object) -> Decimal | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        d = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return d if d.is_finite() else None


def _number_index(values: list) -> list[tuple[Decimal, Decimal]]:
    out = []
    for v in values:
        d = _decimal(v)
        if d is not None:
            out.append((d, d))
    return out


def _quantity_index(values: list) -> list[tuple[Decimal, Decimal, str | None, str | None, str | None]]:
    out = []
    for v in values:
        if not isinstance(v, dict):
            continue
        if "low" in v or "high" in v:
            low, high = v.get("low") or {}, v.get("high") or {}
            lo = _decimal(low.get("value")) if isinstance(low, dict) else None
            hi = _decimal(high.get("value")) if isinstance(high, dict) else None
            unit_of = low if isinstance(low, dict) and low else high if isinstance(high, dict) else {}
            if lo is not None or hi is not None:
                out.append(
                    (
                        lo if lo is not None else Decimal("-Infinity"),
                        hi if hi is not None else Decimal("Infinity"),
                        unit_of.get("system"),
                        unit_of.get("code"),
                        unit_of.get("unit"),
                    )
                )
            continue
        d = _decimal(v.get("value"))
        if d is not None:
            out.append((d, d, v.get("system"), v.get("code"), v.get("unit") or v.get("currency")))
    return out


# ---- tokens, strings, references -----------------------------------------------------------


def _token_index(values: list) -> tuple[list[tuple[str | None, str]], list[str]]:
    """(system, code) pairs and the normalised texts (:text) a resource holds."""
    codes: list[tuple[str | None, str]] = []
    texts: list[str] = []

    def coding(c: dict) -> None:
        if isinstance(c.get("code"), str):
            codes.append((c.get("system"), c["code"]))
        if isinstance(c.get("display"), str):
            texts.append(normalise(c["display"]))

    for v in values:
        if isinstance(v, bool):
            codes.append((None, "true" if v else "false"))
        elif isinstance(v, (str, int, float)):
            codes.append((None, str(v)))
        elif isinstance(v, dict):
            if isinstance(v.get("coding"), list) or "text" in v and "value" not in v:
                for c in v.get("coding") or []:
                    if isinstance(c, dict):
                        coding(c)
                if isinstance(v.get("text"), str):
                    texts.append(normalise(v["text"]))
            elif "value" in v and isinstance(v["value"], str):
                codes.append((v.get("system"), v["value"]))
                vtype = v.get("type")
                if isinstance(vtype, dict) and isinstance(vtype.get("text"), str):
                    texts.append(normalise(vtype["text"]))
            else:
                coding(v)
    return codes, texts


def _string_index(values: list) -> list[str]:
    out: list[str] = []
    for v in values:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            parts = NAME_PARTS if "family" in v or "given" in v else ADDRESS_PARTS
            for part in parts:
                item = v.get(part)
                for s in item if isinstance(item, list) else [item]:
                    if isinstance(s, str):
                        out.append(s)
    return out


def _reference_index(values: list) -> tuple[set[str], list[tuple[str | None, str]]]:
    """Keys a reference matches (raw, Type/id, canonical without version) and its identifiers."""
    keys: set[str] = set()
    identifiers: list[tuple[str | None, str]] = []
    for v in values:
        ref = v.get("reference") if isinstance(v, dict) else v
        if isinstance(v, dict) and isinstance(v.get("identifier"), dict):
            ident = v["identifier"]
            if isinstance(ident.get("value"), str):
                identifiers.append((ident.get("system"), ident["value"]))
        if not isinstance(ref, str):
            continue
        keys.add(ref)
        if "|" in ref:
            keys.add(ref.split("|", 1)[0])
        parsed = parse_reference(ref)
        if parsed:
            keys.add(f"{parsed[0]}/{parsed[1]}")
    return keys, identifiers


def build_index(param_type: str, values: list) -> SearchIndex:
    if param_type == "string":
        raw = _string_index(values)
        return raw, [normalise(s) for s in raw]
    if param_type == "token":
        return _token_index(values)
    if param_type == "reference":
        return _reference_index(values)
    if param_type == "date":
        return _date_index(values)
    if param_type == "number":
        return _number_index(values)
    if param_type == "quantity":
        return _quantity_index(values)
    if param_type == "uri":
        return [v for v in values if isinstance(v, str)]
    return values


def index_is_empty(param_type: str, index: SearchIndex) -> bool:
    if param_type in ("string", "token", "reference"):
        return not index[0] and not index[1]
    return not index


# ---- query values ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Comparison[N: (float, Decimal)]:
    """A parsed prefixed query value: prefix, [low, high), the value itself and, for quantities, a unit.

    Dates compare as float epoch seconds, numbers and quantities as exact Decimals.
    """

    prefix: str
    low: N
    high: N
    point: N
    system: str | None = None
    code: str | None = None


def split_prefix(text: str) -> tuple[str, str]:
    if len(text) > 2 and text[:2] in PREFIXES and not text[2].isalpha():
        return text[:2], text[2:]
    return "eq", text


def parse_date_value(text: str, name: str) -> Comparison[float]:
    prefix, rest = split_prefix(text)
    r = date_range(rest)
    if r is None:
        raise FhirProblem(400, f"Invalid date value {text!r} for parameter '{name}'", code="value")
    return Comparison(prefix, r[0], r[1], r[0])


def parse_number_value(text: str, name: str, quantity: bool = False) -> Comparison[Decimal]:
    prefix, rest = split_prefix(text)
    system = code = None
    if quantity:
        parts = rest.split("|")
        if len(parts) not in (1, 3):
            raise FhirProblem(
                400, f"Invalid quantity {text!r} for '{name}': use [prefix]value|system|code", code="value"
            )
        rest = parts[0]
        if len(parts) == 3:
            system, code = parts[1] or None, parts[2] or None
    try:
        d = Decimal(rest)
    except InvalidOperation:
        d = None
    # only a finite decimal has an integer exponent (NaN and infinities carry a letter)
    exponent = d.as_tuple().exponent if d is not None else None
    if d is None or not isinstance(exponent, int):
        raise FhirProblem(400, f"Invalid number {text!r} for parameter '{name}'", code="value")
    half = Decimal(5).scaleb(exponent - 1)
    return Comparison(prefix, d - half, d + half, d, system, code)


def compare_ranges[N: (float, Decimal)](prefix: str, t_lo: N, t_hi: N, s: Comparison[N], *, now: float = 0.0) -> bool:
    """R4 prefix semantics over target range [t_lo, t_hi) and search range [s.low, s.high)."""
    if prefix == "eq":
        return s.low <= t_lo and t_hi <= s.high
    if prefix == "ne":
        return not (s.low <= t_lo and t_hi <= s.high)
    if prefix == "gt":
        return t_hi > s.high
    if prefix == "lt":
        return t_lo < s.low
    if prefix == "ge":
        return t_hi > s.high or (s.low <= t_lo and t_hi <= s.high)
    if prefix == "le":
        return t_lo < s.low or (s.low <= t_lo and t_hi <= s.high)
    if prefix == "sa":
        return t_lo >= s.high
    if prefix == "eb":
        return t_hi <= s.low
    if prefix == "ap":
        gap: Any = abs(now - s.low) * 0.1 if isinstance(s.low, float) else abs(Decimal(s.point)) * Decimal("0.1")
        return t_hi >= s.low - gap and t_lo <= s.high + gap
    return False


def match_point(prefix: str, value: Decimal, s: Comparison[Decimal]) -> bool:
    """Number semantics: the target value against the search value and its precision range."""
    if prefix == "eq":
        return s.low <= value < s.high
    if prefix == "ne":
        return not (s.low <= value < s.high)
    if prefix in ("gt", "sa"):
        return value > s.point
    if prefix in ("lt", "eb"):
        return value < s.point
    if prefix == "ge":
        return value >= s.point
    if prefix == "le":
        return value <= s.point
    if prefix == "ap":
        gap = abs(s.point) * Decimal("0.1")
        return s.point - gap <= value <= s.point + gap
    return False


def match_numeric(lo: Decimal, hi: Decimal, s: Comparison[Decimal]) -> bool:
    if lo == hi:
        return match_point(s.prefix, lo, s)
    return compare_ranges(s.prefix, lo, hi, s)
