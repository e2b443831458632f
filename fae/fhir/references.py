"""Parsing of FHIR reference strings: relative, versioned, absolute, contained and urn forms."""

from __future__ import annotations

import re

ID_RE = re.compile(r"^[A-Za-z0-9\-.]{1,64}$")
TYPE_RE = re.compile(r"^[A-Z][A-Za-z]+$")


def parse_reference(ref: str) -> tuple[str, str, str | None] | None:
    """(type, id, version) for `Type/id`, `Type/id/_history/v` or an absolute URL ending so."""
    parts = ref.split("?", 1)[0].rstrip("/").split("/")
    version = None
    if len(parts) >= 4 and parts[-2] == "_history":
        version = parts[-1]
        parts = parts[:-2]
    if len(parts) < 2:
        return None
    rtype, rid = parts[-2], parts[-1]
    if not TYPE_RE.match(rtype) or not ID_RE.match(rid):
        return None
    return rtype, rid, version


def is_absolute(ref: str) -> bool:
    return ref.startswith(("http://", "https://"))


def is_well_formed(ref: str) -> bool:
    """A reference a server can store: relative, absolute, contained (#id) or urn."""
    if ref.startswith("#"):
        return bool(ID_RE.match(ref[1:])) or ref == "#"
    if ref.startswith(("urn:uuid:", "urn:oid:")):
        return len(ref) > 9 and " " not in ref
    if is_absolute(ref):
        return " " not in ref
    parts = ref.split("/")
    if len(parts) == 2:
        return bool(TYPE_RE.match(parts[0]) and ID_RE.match(parts[1]))
    if len(parts) == 4 and parts[2] == "_history":
        return bool(TYPE_RE.match(parts[0]) and ID_RE.match(parts[1]) and ID_RE.match(parts[3]))
    return False


def is_conditional_reference(ref: str) -> bool:
    """`Type?query`: a reference by search, which only a transaction resolves."""
    head, question, _ = ref.partition("?")
    return bool(question) and "/" not in head and bool(TYPE_RE.match(head))
