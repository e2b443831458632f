r"""FHIR CRUD tools as plain async functions over an ``httpx.AsyncClient``.

Each function takes a client whose ``base_url`` is a FHIR base (``.../fhir``)
and returns FHIR JSON. Nothing here raises for a FHIR or network failure: a
non-2xx answer, a server that is down and a malformed argument all come back
as an error dict (see ``docs/mcp.md``), because an agent must be able to read
the failure and try again. The MCP server in ``fae.mcp.fhir_server`` exposes
these functions as tools; their docstrings are what an LLM reads.

Every argument that becomes part of a URL is checked first, so that no value
can change what a call does: ``resourceType`` must name an R4 resource type,
``resourceId`` must be a FHIR id (``[A-Za-z0-9\-.]{1,64}``) and not ``.`` or
``..`` (which a URL resolves away: a read would become a search, a delete a
conditional delete), search parameter names and ``ifNoneExist`` must be
search parameters, and ``ifMatchVersion`` a version id.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl

import httpx

from fae.fhir.spec import load_spec
from fae.fhir.types import Resource
from fae.mcp.fhir_links import link_url, rebase_link, server_base_path

FHIR_JSON = "application/fhir+json"
DEFAULT_PAGE_LIMIT = 20
"""Most pages one ``searchResources`` call follows when the caller gives no limit."""

BODY_EXCERPT_CHARS = 500

# Friendly search-parameter names an LLM tends to write, mapped to FHIR's own.
_SEARCH_ALIASES = {
    "count": "_count",
    "sort": "_sort",
    "include": "_include",
    "revinclude": "_revinclude",
    "elements": "_elements",
    "summary": "_summary",
    "total": "_total",
    "id": "_id",
    "lastUpdated": "_lastUpdated",
}
_RESOURCE_ID = re.compile(r"[A-Za-z0-9\-.]{1,64}")
_DOT_SEGMENTS = (".", "..")
# a search parameter name with its modifier, chain or reverse chain: subject:Patient.name, _has:Observation:subject:code
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-.:]{0,127}")
_VERSION_ID = re.compile(r'(W/)?("?)([A-Za-z0-9\-.]{1,64})\2')

Result = dict[str, Any]


class _BadArgument(Exception):
    """An argument the tool cannot use; becomes an ``INVALID_ARGUMENT`` result."""

    def __init__(self, argument: str, diagnostics: str):
        super().__init__(diagnostics)
        self.argument = argument
        self.diagnostics = diagnostics


def invalid_argument(argument: str, diagnostics: str) -> Result:
    """The error result for an argument the tool cannot use."""
    return {"error": "INVALID_ARGUMENT", "argument": argument, "diagnostics": diagnostics}


def is_error_result(result: Any) -> bool:
    """Whether a tool result is one of this module's error dicts."""
    return isinstance(result, dict) and isinstance(result.get("error"), str)


# --- arguments -------------------------------------------------------------


def _json_object(argument: str, value: Any) -> dict[str, Any]:
    """A dict from a dict or a JSON-object string."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise _BadArgument(argument, f"{argument} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise _BadArgument(argument, f"{argument} must be a JSON object, got {type(value).__name__}")
    return value


def _resource_type(value: Any) -> str:
    """A FHIR R4 resource type name, exactly as the specification spells it."""
    types = load_spec().resource_types
    if isinstance(value, str) and value in types:
        return value
    near = [name for name in types if isinstance(value, str) and name.lower() == value.lower()]
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise _BadArgument(
        "resourceType",
        f"resourceType must be a FHIR R4 resource type such as 'Patient', got {value!r}{hint}",
    )


def _resource_id(value: Any) -> str:
    """A FHIR id: 1-64 letters, digits, '-' and '.', and not '.' or '..' (a URL would resolve those away)."""
    if not isinstance(value, str) or not _RESOURCE_ID.fullmatch(value) or value in _DOT_SEGMENTS:
        hint = " (give the logical id only, without 'Type/')" if isinstance(value, str) and "/" in value else ""
        raise _BadArgument(
            "resourceId",
            f"resourceId must be a FHIR id (1-64 letters, digits, '-', '.'; not '.' or '..'), got {value!r}{hint}",
        )
    return value


def _param_name(argument: str, name: str) -> str:
    if not _PARAM_NAME.fullmatch(name):
        raise _BadArgument(
            argument,
            f"{name!r} is not a search parameter name (letters, digits, '_', '-', '.', ':'; such as "
            "'family', 'subject:Patient', '_count')",
        )
    return name


def _if_none_exist(value: Any) -> str | None:
    """A conditional create's search: ``name=value`` pairs joined by '&', each name a search parameter."""
    if value is None or value == "":
        return None
    wrong = _BadArgument(
        "ifNoneExist", f"ifNoneExist must be a search such as 'identifier=http://x|123', got {value!r}"
    )
    if not isinstance(value, str) or any(ch in value for ch in "\r\n#"):
        raise wrong
    try:
        pairs = parse_qsl(value.removeprefix("?"), keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise wrong from None
    for name, _ in pairs:
        _param_name("ifNoneExist", name)
    return value


def _version_id(value: Any) -> str | None:
    """An If-Match value from a version id ('2') or an ETag ('W/"2"')."""
    if value is None or value == "":
        return None
    plain = isinstance(value, str | int) and not isinstance(value, bool)
    matched = _VERSION_ID.fullmatch(str(value)) if plain else None
    if matched is None:
        raise _BadArgument("ifMatchVersion", f"ifMatchVersion must be a version id such as '2', got {value!r}")
    return f'W/"{matched.group(3)}"'


def _param_value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise _BadArgument("params_json", f"search parameter {key!r} has a value FHIR cannot take: {value!r}")


def search_params(params: Any) -> list[tuple[str, str]]:
    """FHIR query pairs from a dict (or JSON string) of search parameters.

    Friendly names (``count``, ``sort``, ``include``, ...) become their ``_``
    names; a list value becomes a repeated parameter (``include`` twice, or an
    AND of two dates); ``None`` values are dropped.
    """
    if params is None or params == "":
        return []
    mapping = _json_object("params_json", params)
    pairs: list[tuple[str, str]] = []
    for key, value in mapping.items():
        name = _param_name("params_json", _SEARCH_ALIASES.get(key, key))
        values = value if isinstance(value, list) else [value]
        pairs.extend((name, _param_value(key, item)) for item in values if item is not None)
    return pairs


# --- answers ---------------------------------------------------------------


def _operation_outcome_summary(outcome: Resource) -> dict[str, Any]:
    issues = [issue for issue in outcome.get("issue") or [] if isinstance(issue, dict)]
    diagnostics = []
    for issue in issues:
        text = issue.get("diagnostics") or (issue.get("details") or {}).get("text")
        if text:
            diagnostics.append(str(text))
    first_expression = None
    for issue in issues:
        where = issue.get("expression") or issue.get("location") or []
        if where:
            first_expression = str(where[0])
            break
    return {
        "diagnostics": "; ".join(diagnostics),
        "issue_codes": [str(issue.get("code")) for issue in issues if issue.get("code")],
        "issue_count": len(issues),
        "first_expression": first_expression,
    }


def _parse_json(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def error_result(response: httpx.Response) -> Result:
    """The error dict for a non-2xx FHIR answer, carrying its OperationOutcome if any."""
    request = response.request
    base: Result = {
        "status": response.status_code,
        "method": request.method,
        "url": str(request.url),
    }
    body = _parse_json(response)
    if isinstance(body, dict) and body.get("resourceType") == "OperationOutcome":
        return {
            "error": "OPERATION_OUTCOME",
            **base,
            "operationOutcome": body,
            **_operation_outcome_summary(body),
        }
    return {
        "error": "HTTP_ERROR",
        **base,
        "diagnostics": f"HTTP {response.status_code} {response.reason_phrase}".strip(),
        "issue_codes": [],
        "issue_count": 0,
        "body_excerpt": response.text[:BODY_EXCERPT_CHARS],
    }


def connection_error(method: str, url: httpx.URL | str, exc: Exception) -> Result:
    """The error dict for a FHIR server that could not be reached or did not answer."""
    detail = str(exc) or type(exc).__name__
    return {
        "error": "CONNECTION_ERROR",
        "method": method,
        "url": str(url),
        "diagnostics": f"{type(exc).__name__}: {detail}",
    }


def _no_body_result(response: httpx.Response, resource_type: str) -> Result:
    """What a 2xx answer without a JSON body tells: status, Location, id and version."""
    result: Result = {"status": response.status_code, "resourceType": resource_type}
    location = response.headers.get("location") or response.headers.get("content-location")
    if location:
        result["location"] = location
        match = re.search(rf"{resource_type}/([A-Za-z0-9\-.]+)(?:/_history/([^/?#]+))?", location)
        if match:
            result["id"] = match.group(1)
            if match.group(2):
                result["versionId"] = match.group(2)
    etag = response.headers.get("etag")
    if etag and "versionId" not in result:
        result["versionId"] = etag.removeprefix("W/").strip('"')
    return result


async def _send(client: httpx.AsyncClient, method: str, url: str | httpx.URL, **kwargs: Any) -> httpx.Response | Result:
    """Send one FHIR request; a network failure comes back as a CONNECTION_ERROR dict."""
    headers = {"Accept": FHIR_JSON, **kwargs.pop("headers", {})}
    if "json" in kwargs:
        headers["Content-Type"] = FHIR_JSON
        kwargs["content"] = json.dumps(kwargs.pop("json"))
    request = client.build_request(method, url, headers=headers, **kwargs)
    try:
        return await client.send(request)
    except httpx.TransportError as exc:
        return connection_error(method, request.url, exc)


def _answer(response: httpx.Response | Result, resource_type: str) -> Result:
    if isinstance(response, dict):
        return response
    if not response.is_success:
        return error_result(response)
    body = _parse_json(response)
    if isinstance(body, dict):
        return body
    return _no_body_result(response, resource_type)


# --- paging ----------------------------------------------------------------


async def _follow_pages(
    client: httpx.AsyncClient,
    first: dict[str, Any],
    first_url: httpx.URL,
    resource_type: str,
    page_limit: int,
) -> Result:
    """Merge the entries of up to ``page_limit`` pages into the first Bundle."""
    merged = dict(first)
    entries = list(first.get("entry") or [])
    server_base = server_base_path(link_url(first, "self"), first_url, resource_type)
    page, pages = first, 1
    seen = {str(first_url)}
    while pages < page_limit:
        next_link = link_url(page, "next")
        if not next_link:
            break
        url = rebase_link(
            next_link,
            client_base=client.base_url,
            request_url=first_url,
            search_path=resource_type,
            server_base_path=server_base,
        )
        if str(url) in seen:
            break
        seen.add(str(url))
        response = await _send(client, "GET", url)
        answer = _answer(response, resource_type)
        if is_error_result(answer):
            return {**answer, "pages_fetched": pages}
        if answer.get("resourceType") != "Bundle":
            return {
                "error": "HTTP_ERROR",
                "status": getattr(response, "status_code", None),
                "method": "GET",
                "url": str(url),
                "diagnostics": "a search page did not return a Bundle",
                "issue_codes": [],
                "issue_count": 0,
                "body_excerpt": json.dumps(answer)[:BODY_EXCERPT_CHARS],
                "pages_fetched": pages,
            }
        page = answer
        pages += 1
        entries.extend(page.get("entry") or [])
    # Links of the last page fetched: a next link left means the limit cut the search short.
    merged["link"] = [
        link for link in (first.get("link") or []) if not (isinstance(link, dict) and link.get("relation") == "next")
    ]
    remaining = link_url(page, "next")
    if remaining and pages >= page_limit:
        merged["link"].append({"relation": "next", "url": remaining})
    if entries or "entry" in first:
        merged["entry"] = entries
    return merged


# --- the tools -------------------------------------------------------------


async def createResource(
    client: httpx.AsyncClient,
    resourceType: str,
    body_json: dict[str, Any] | str,
    ifNoneExist: str | None = None,
) -> Result:
    """Create a FHIR resource (POST [base]/{resourceType}); returns the created resource with its new id.

    Args:
        resourceType: FHIR resource type, e.g. "Patient".
        body_json: the resource as a JSON object (or a JSON string); "resourceType" is set for you,
            any "id" is ignored by the server.
        ifNoneExist: optional search query (e.g. "identifier=http://x|123") for a conditional create:
            if a match exists, nothing is created and the match is returned.

    Returns the resource as stored (with id and meta.versionId). On failure returns
    {"error": "OPERATION_OUTCOME" | "HTTP_ERROR" | "CONNECTION_ERROR" | "INVALID_ARGUMENT", ...}
    with "status", "diagnostics", "issue_codes" and the server's "operationOutcome" when it sent one.
    """
    try:
        resource_type = _resource_type(resourceType)
        body = dict(_json_object("body_json", body_json))
        condition = _if_none_exist(ifNoneExist)
    except _BadArgument as bad:
        return invalid_argument(bad.argument, bad.diagnostics)
    body["resourceType"] = resource_type
    headers = {"Prefer": "return=representation"}
    if condition:
        headers["If-None-Exist"] = condition
    response = await _send(client, "POST", resource_type, json=body, headers=headers)
    return _answer(response, resource_type)


async def searchResources(
    client: httpx.AsyncClient,
    resourceType: str,
    params_json: dict[str, Any] | str | None = None,
    all_pages: bool = True,
    page_limit: int | None = None,
) -> Result:
    """Search FHIR resources (GET [base]/{resourceType}?params); returns a searchset Bundle.

    Args:
        resourceType: FHIR resource type to search, e.g. "Observation".
        params_json: search parameters as a JSON object (or JSON string), e.g.
            {"patient": "Patient/123", "code": "http://loinc.org|8867-4", "date": ["ge2024-01-01", "lt2024-02-01"]}.
            A list value repeats the parameter. The names count, sort, include, revinclude,
            elements, summary, total, id and lastUpdated are sent as _count, _sort, ... .
        all_pages: follow the Bundle's "next" links and merge every page's entries into one
            Bundle (default true); false returns the first page only.
        page_limit: most pages to fetch (default 20). If pages remain, the returned Bundle keeps
            a "next" link.

    Returns the Bundle (entries under "entry", each with "resource"). On failure returns an
    error object like the other tools ({"error": ..., "status", "diagnostics", ...}).
    """
    try:
        resource_type = _resource_type(resourceType)
        params = search_params(params_json)
        if page_limit is not None and (not isinstance(page_limit, int) or page_limit < 1):
            raise _BadArgument("page_limit", f"page_limit must be a whole number >= 1, got {page_limit!r}")
    except _BadArgument as bad:
        return invalid_argument(bad.argument, bad.diagnostics)
    response = await _send(client, "GET", resource_type, params=params)
    first = _answer(response, resource_type)
    if is_error_result(first) or not all_pages or first.get("resourceType") != "Bundle":
        return first
    assert isinstance(response, httpx.Response)
    limit = page_limit if page_limit is not None else DEFAULT_PAGE_LIMIT
    return await _follow_pages(client, first, response.request.url, resource_type, limit)


async def getResourceById(client: httpx.AsyncClient, resourceType: str, resourceId: str) -> Result:
    """Read one FHIR resource (GET [base]/{resourceType}/{resourceId}).

    Args:
        resourceType: FHIR resource type, e.g. "Patient".
        resourceId: the logical id only, e.g. "123" (not "Patient/123").

    Returns the resource. A missing or deleted resource returns an error object with status 404
    or 410 ({"error": "OPERATION_OUTCOME" | "HTTP_ERROR", "status", "diagnostics", ...}).
    """
    try:
        path = f"{_resource_type(resourceType)}/{_resource_id(resourceId)}"
    except _BadArgument as bad:
        return invalid_argument(bad.argument, bad.diagnostics)
    return _answer(await _send(client, "GET", path), resourceType)


async def updateResource(
    client: httpx.AsyncClient,
    resourceType: str,
    resourceId: str,
    body_json: dict[str, Any] | str,
    ifMatchVersion: str | None = None,
) -> Result:
    """Replace a FHIR resource (PUT [base]/{resourceType}/{resourceId}); returns the new version.

    Args:
        resourceType: FHIR resource type, e.g. "Patient".
        resourceId: the logical id of the resource to replace.
        body_json: the complete new resource as a JSON object (or JSON string); its
            "resourceType" and "id" are set from the other arguments. Fields you leave out are removed,
            so read the resource first and send it back changed.
        ifMatchVersion: optional meta.versionId the resource must still have (e.g. "2"); if it has
            moved on, the server refuses with 412 and nothing changes.

    Returns the resource as stored (meta.versionId incremented). On failure returns an error
    object ({"error": ..., "status", "diagnostics", "operationOutcome"?, ...}).
    """
    try:
        path = f"{_resource_type(resourceType)}/{_resource_id(resourceId)}"
        body = dict(_json_object("body_json", body_json))
        if_match = _version_id(ifMatchVersion)
    except _BadArgument as bad:
        return invalid_argument(bad.argument, bad.diagnostics)
    body["resourceType"] = resourceType
    body["id"] = resourceId
    headers = {"Prefer": "return=representation"}
    if if_match:
        headers["If-Match"] = if_match
    response = await _send(client, "PUT", path, json=body, headers=headers)
    return _answer(response, resourceType)


async def deleteResource(client: httpx.AsyncClient, resourceType: str, resourceId: str) -> Result:
    """Delete a FHIR resource (DELETE [base]/{resourceType}/{resourceId}).

    Args:
        resourceType: FHIR resource type, e.g. "Patient".
        resourceId: the logical id of the resource to delete.

    Returns {"deleted": true, "resourceType", "id", "status"} plus the server's "operationOutcome"
    when it sent one. On failure returns an error object ({"error": ..., "status", ...}).
    """
    try:
        path = f"{_resource_type(resourceType)}/{_resource_id(resourceId)}"
    except _BadArgument as bad:
        return invalid_argument(bad.argument, bad.diagnostics)
    response = await _send(client, "DELETE", path)
    if isinstance(response, dict):
        return response
    if not response.is_success:
        return error_result(response)
    result: Result = {
        "deleted": True,
        "resourceType": resourceType,
        "id": resourceId,
        "status": response.status_code,
    }
    body = _parse_json(response)
    if isinstance(body, dict) and body.get("resourceType") == "OperationOutcome":
        result["operationOutcome"] = body
    return result


async def listResourceTypes(client: httpx.AsyncClient) -> Result:
    """List the resource types this FHIR server supports, from its CapabilityStatement.

    Returns {"resourceTypes": ["AllergyIntolerance", "Condition", ...], "fhirVersion": "4.0.1"}.
    On failure returns an error object ({"error": ..., "status", "diagnostics", ...}).
    """
    answer = _answer(await _send(client, "GET", "metadata"), "CapabilityStatement")
    if is_error_result(answer):
        return answer
    types = sorted(
        {
            str(resource["type"])
            for rest in answer.get("rest") or []
            for resource in rest.get("resource") or []
            if isinstance(resource, dict) and resource.get("type")
        }
    )
    return {"resourceTypes": types, "fhirVersion": answer.get("fhirVersion")}
