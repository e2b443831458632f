"""What a FHIR exchange meant: the REST interaction, the resource, the outcome."""

from __future__ import annotations

import re
from typing import Any

from fae.recorder.jsonbody import items, json_node, members, value
from fae.store.bodies import Body
from fae.store.events import FhirInteracted, OperationIssue

_TYPE = re.compile(r"[A-Z][A-Za-z]+")
_ETAG_VERSION = re.compile(r'W/"([^"]+)"')


def _split(path: str) -> tuple[list[str], str]:
    raw, _, query = path.partition("?")
    return [p for p in raw.split("/") if p], query


def _locate(segments: list[str]) -> list[str]:
    """The segments from the resource type on, skipping any base prefix such as sandbox/{id}/fhir."""
    for index, segment in enumerate(segments):
        if _TYPE.fullmatch(segment):
            return segments[index:]
    for index, segment in enumerate(segments):
        if segment in ("metadata", "_history", "_search") or segment.startswith("$"):
            return segments[index:]
    return []


def interaction_of(method: str, path: str, request: Any) -> tuple[str, str | None, str | None, str | None]:
    """(interaction, resource type, id, version) from the request line and body."""
    segments, query = _split(path)
    method = method.upper()
    if segments[:1] == ["sandbox"] and "fhir" not in segments:
        return "sandbox-admin", None, None, None
    rest = _locate(segments)
    if not rest:
        if method == "POST" and isinstance(request, dict) and request.get("resourceType") == "Bundle":
            kind = request.get("type")
            return ("transaction" if kind == "transaction" else "batch"), None, None, None
        if method == "GET":
            return ("search-system" if query else "unknown"), None, None, None
        return "unknown", None, None, None
    head = rest[0]
    if head == "metadata":
        return "capabilities", None, None, None
    if head == "_history":
        return "history-system", None, None, None
    if head.startswith("$"):
        return "operation", None, None, None
    rtype = head
    if len(rest) == 1:
        if method == "POST":
            return "create", rtype, None, None
        if method == "GET":
            return "search-type", rtype, None, None
        if method == "PUT":
            return "update-conditional", rtype, None, None
        if method == "DELETE":
            return "delete-conditional", rtype, None, None
        if method == "PATCH":
            return "patch-conditional", rtype, None, None
        return "unknown", rtype, None, None
    second = rest[1]
    if second == "_search":
        return "search-type", rtype, None, None
    if second == "_history":
        return "history-type", rtype, None, None
    if second.startswith("$"):
        return "operation", rtype, None, None
    rid = second
    if len(rest) == 2:
        return (
            {"GET": "read", "PUT": "update", "DELETE": "delete", "PATCH": "patch", "HEAD": "read"}.get(
                method, "unknown"
            ),
            rtype,
            rid,
            None,
        )
    if rest[2] == "_history":
        if len(rest) >= 4:
            return "vread", rtype, rid, rest[3]
        return "history-instance", rtype, rid, None
    if rest[2].startswith("$"):
        return "operation", rtype, rid, None
    if len(rest) == 3 and method == "GET" and _TYPE.fullmatch(rest[2]):
        return "search-compartment", rest[2], None, None  # Patient/P1/AllergyIntolerance: a search
    return "unknown", rtype, rid, None


def _issues(outcome: dict[str, Any]) -> tuple[OperationIssue, ...]:
    issues = []
    for issue in outcome.get("issue") or []:
        if not isinstance(issue, dict):
            continue
        given = issue.get("details")
        details = given if isinstance(given, dict) else {}
        issues.append(
            OperationIssue(
                severity=str(issue.get("severity", "")),
                code=str(issue.get("code", "")),
                diagnostics=str(issue.get("diagnostics") or details.get("text") or ""),
                expression=tuple(str(e) for e in (issue.get("expression") or []) if isinstance(e, str)),
            )
        )
    return tuple(issues)


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    for key, given in headers:
        if key.lower() == name:
            return given
    return None


def _request_head(body: Body | None) -> dict[str, Any] | None:
    """The request's members that decide its interaction (a transaction or batch Bundle), decoded."""
    found = members(json_node(body))
    return None if found is None else {k: value(found[k]) for k in ("resourceType", "type") if k in found}


def _entries(entry: Any) -> tuple[list[str], tuple[OperationIssue, ...]]:
    """A Bundle's entry ids, and the issues of its OperationOutcome entries (each resource decoded on its own)."""
    search_ids: list[str] = []
    issues: tuple[OperationIssue, ...] = ()
    for item in items(entry) or []:  # an entry that is no list holds no resources
        found = members(item)
        resource = members(found.get("resource")) if found is not None else None
        if resource is None:
            continue
        kind = value(resource.get("resourceType"))
        if kind != "OperationOutcome":
            search_ids.append(f"{kind}/{value(resource.get('id'))}")
        else:
            issues += _issues({"issue": value(resource.get("issue"))})
    return search_ids, issues


def fhir_event(
    exchange_id: str,
    method: str,
    path: str,
    request_body: Body | None,
    status: int | None,
    response_headers: list[tuple[str, str]],
    response_body: Body | None,
) -> FhirInteracted:
    interaction, rtype, rid, version = interaction_of(method, path, _request_head(request_body))
    issues: tuple[OperationIssue, ...] = ()
    search_ids: list[str] = []
    total = None
    response = members(json_node(response_body))
    if response is not None:
        kind = value(response.get("resourceType"))
        if kind == "OperationOutcome":
            issues = _issues({"issue": value(response.get("issue"))})
        elif kind == "Bundle" and (interaction.startswith(("search", "history")) or interaction == "operation"):
            given_total = value(response.get("total"))
            total = given_total if isinstance(given_total, int) else None
            search_ids, issues = _entries(response.get("entry"))
        elif kind and interaction in (
            "create",
            "read",
            "vread",
            "update",
            "patch",
            "update-conditional",
            "patch-conditional",
        ):
            rtype = rtype or kind
            rid = value(response.get("id")) or rid
            meta = members(response.get("meta")) or {}
            version = value(meta.get("versionId")) or version
    if interaction in ("create", "update", "update-conditional", "patch") and (rid is None or version is None):
        location = _header(response_headers, "location") or _header(response_headers, "content-location")
        if location:
            parts = [p for p in location.split("?")[0].split("/") if p]
            if "_history" in parts:
                i = parts.index("_history")
                if i >= 1 and i + 1 < len(parts):
                    rid = rid or parts[i - 1]
                    version = version or parts[i + 1]
            elif len(parts) >= 1:
                rid = rid or parts[-1]
        etag = _header(response_headers, "etag")
        if etag and version is None:
            match = _ETAG_VERSION.match(etag)
            version = match.group(1) if match else etag.strip('"')
    return FhirInteracted(
        exchange_id=exchange_id,
        interaction=interaction,
        resource_type=rtype,
        resource_id=rid,
        version=version,
        status=status,
        issues=issues,
        search_ids=tuple(search_ids),
        search_total=total,
    )
