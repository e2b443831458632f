"""Batch and transaction Bundles: entry URLs, `urn:uuid` and conditional references, processing order.

A transaction runs on a copy of the sandbox's store and replaces it only when
every entry succeeded, so a failure (or running out of time) changes nothing.
Conditional references (`Practitioner?identifier=sys|1`, as Synthea writes
them) are resolved per the R4 transaction rules just before their entry runs:
exactly one match is rewritten to `Type/id`; none is a 400, several a 412.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from http import HTTPStatus
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from fae.fhir.outcome import FhirProblem
from fae.fhir.references import is_conditional_reference
from fae.fhir.wire import FhirResponse, Request, error_response, parse_request, respond

if TYPE_CHECKING:
    from fae.fhir.interactions import Interactions
    from fae.fhir.sandboxes import Sandbox
    from fae.fhir.versions import Version

# the most entries one Bundle may carry, posted to a FHIR base or given as a seed (configurable)
DEFAULT_MAX_ENTRIES = 10_000
# transaction processing order, from the FHIR R4 http page
ORDER = {"DELETE": 0, "POST": 1, "PUT": 2, "PATCH": 2, "GET": 3, "HEAD": 3}


def rewrite_references(node: object, mapping: dict[str, str]) -> None:
    """Replace urn:uuid (or other placeholder) references in place, anywhere in a resource."""
    for holder in _reference_holders(node):
        if holder["reference"] in mapping:
            holder["reference"] = mapping[holder["reference"]]


def _reference_holders(node: object) -> list[dict]:
    """Every object under `node` with a string `reference` (an explicit stack: no recursion)."""
    found, stack = [], [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("reference"), str):
                found.append(item)
            stack.extend(v for v in item.values() if isinstance(v, (dict, list)))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, (dict, list)))
    return found


def resolve_conditional_references(
    resource: object, find: Callable[[str, str], list[Version]], resource_types: frozenset[str]
) -> None:
    """Rewrite each `Type?query` reference in a resource to the one resource `find` answers for it."""
    for holder in _reference_holders(resource):
        ref = holder["reference"]
        if not is_conditional_reference(ref):
            continue
        rtype, _, query = ref.partition("?")
        if rtype not in resource_types:
            raise FhirProblem(400, f"Conditional reference {ref[:120]!r} names unknown type {rtype!r}")
        found = find(rtype, query)
        if not found:
            raise FhirProblem(400, f"Conditional reference {ref[:120]!r} matches no resource", code="not-found")
        if len(found) > 1:
            raise FhirProblem(
                412,
                f"Conditional reference {ref[:120]!r} matches {len(found)} resources; it must match exactly one",
                code="multiple-matches",
            )
        holder["reference"] = found[0].key


def has_conditional_references(resource: object) -> bool:
    return any(is_conditional_reference(h["reference"]) for h in _reference_holders(resource))


def entry_request(entry: object, index: int, base: str) -> tuple[str, str, str, dict]:
    """(method, path relative to the base, query, request) of one entry."""
    where = f"Bundle.entry[{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict):
        raise FhirProblem(400, f"{where} needs a request", expression=where)
    request = entry["request"]
    method, url = request.get("method"), request.get("url")
    if method not in ORDER or not isinstance(url, str) or not url:
        raise FhirProblem(400, f"{where}.request needs a method and url", expression=f"{where}.request")
    parts = urlsplit(url)
    if parts.scheme or parts.netloc:
        if not base or not (url == base or url.startswith(base + "/")):
            raise FhirProblem(
                400,
                f"{where}.request.url {url[:120]!r} is an absolute URL outside this "
                f"server's base ({base or 'unknown here'}); use a relative URL such "
                "as 'Patient/123'",
                expression=f"{where}.request.url",
            )
        parts = urlsplit(url[len(base) :])
    return method, parts.path.strip("/"), parts.query, request


def _response_entry(resp: FhirResponse) -> dict:
    out: dict = {"response": {"status": f"{resp.status} {HTTPStatus(resp.status).phrase}"}}
    for header, key in (("Location", "location"), ("ETag", "etag"), ("Last-Modified", "lastModified")):
        if header in resp.headers:
            out["response"][key] = resp.headers[header]
    body = resp.json() if resp.body else None
    if isinstance(body, dict) and isinstance(body.get("meta"), dict) and "lastModified" in out["response"]:
        out["response"]["lastModified"] = body["meta"].get("lastUpdated")
    if isinstance(body, dict):
        if body.get("resourceType") == "OperationOutcome" and resp.status >= 400:
            out["response"]["outcome"] = body
        else:
            out["resource"] = body
    return out


def _placeholders(
    rest: Interactions, work: Sandbox, entries: list, parsed: list, budget
) -> tuple[dict[int, str], dict[str, str]]:
    """Ids for POSTed entries and the fullUrl -> Type/id map their references are rewritten with."""
    assigned: dict[int, str] = {}
    mapping: dict[str, str] = {}
    for i, (method, path, _, request) in enumerate(parsed):
        full_url = entries[i].get("fullUrl")
        resource = entries[i].get("resource")
        if method == "POST" and isinstance(full_url, str) and isinstance(resource, dict):
            assigned[i] = rest.id_factory()
            mapping[full_url] = f"{resource.get('resourceType') or path}/{assigned[i]}"
        condition = request.get("ifNoneExist") if method == "POST" else None
        if condition and isinstance(condition, str) and isinstance(full_url, str):
            found = rest.matches(work, path, condition.split("?", 1)[-1], budget)
            if len(found) == 1:
                mapping[full_url] = found[0].key
    return assigned, mapping


def process_bundle(rest: Interactions, sandbox: Sandbox, req: Request) -> FhirResponse:
    bundle = rest.parse_body(req, "Bundle")
    kind = bundle.get("type")
    if kind not in ("batch", "transaction"):
        raise FhirProblem(
            400, f"POST to the base needs a batch or transaction Bundle, not {kind!r}", expression="Bundle.type"
        )
    entries = bundle.get("entry") or []
    if not isinstance(entries, list):
        raise FhirProblem(400, "Bundle.entry must be an array", expression="Bundle.entry")
    if len(entries) > rest.max_entries:
        raise FhirProblem(
            413,
            f"Bundle has {len(entries)} entries; this server takes at most {rest.max_entries} per Bundle",
            code="too-costly",
            expression="Bundle.entry",
        )
    transaction = kind == "transaction"
    work = copy.copy(sandbox)
    if transaction:
        work.store = sandbox.store.copy()

    parsed: list = []
    for i, entry in enumerate(entries):
        try:
            parsed.append(entry_request(entry, i, req.base))
        except FhirProblem as problem:
            if transaction:
                raise
            parsed.append(problem)

    assigned: dict[int, str] = {}
    if transaction:
        assigned, mapping = _placeholders(rest, work, entries, parsed, req.budget)
        if mapping:
            for i, entry in enumerate(entries):
                if isinstance(entry.get("resource"), dict):
                    rewrite_references(entry["resource"], mapping)
                if entry["request"].get("url") in mapping:
                    entry["request"]["url"] = mapping[entry["request"]["url"]]
                    parsed[i] = entry_request(entry, i, req.base)

    order = (
        sorted(
            range(len(entries)),
            key=lambda i: ORDER.get(parsed[i][0] if not isinstance(parsed[i], FhirProblem) else "GET", 3),
        )
        if transaction
        else range(len(entries))
    )
    results: dict[int, dict] = {}
    for i in order:
        item = parsed[i]
        if isinstance(item, FhirProblem):
            results[i] = {
                "response": {"status": f"{item.status} {HTTPStatus(item.status).phrase}", "outcome": item.outcome()}
            }
            continue
        req.budget.check()
        resp = _run_entry(rest, work, req, entries[i], item, assigned.get(i), transaction)
        if transaction and resp.status >= 400:
            body_json = resp.json()
            issues = body_json.get("issue", []) if isinstance(body_json, dict) else []
            for one in issues:
                one["diagnostics"] = f"Bundle.entry[{i}]: {one.get('diagnostics', '')}"
            raise FhirProblem(resp.status, "transaction failed", issues=issues or None)
        results[i] = _response_entry(resp)
    if transaction:
        sandbox.store = work.store
    reply = {"resourceType": "Bundle", "type": f"{kind}-response", "entry": [results[i] for i in range(len(entries))]}
    return respond(200, reply)


def _run_entry(
    rest: Interactions,
    work: Sandbox,
    req: Request,
    entry: dict,
    item: tuple[str, str, str, dict],
    assigned_id: str | None,
    transaction: bool,
) -> FhirResponse:
    method, path, query, request = item
    headers = dict(req.headers)
    for header in ("if-none-exist", "if-match", "if-none-match", "content-type"):
        headers.pop(header, None)
    for key, header in (("ifNoneExist", "if-none-exist"), ("ifMatch", "if-match"), ("ifNoneMatch", "if-none-match")):
        if isinstance(request.get(key), str):
            headers[header] = request[key]
    resource = entry.get("resource")
    try:
        if transaction and resource is not None and method in ("POST", "PUT"):
            resolve_conditional_references(
                resource, lambda rtype, query: rest.matches(work, rtype, query, req.budget), rest.spec.resource_types
            )
        body = json.dumps(resource).encode() if resource is not None else None
        sub = parse_request(method, path, query, headers, body, req.base, req.budget)
        return rest.dispatch(work, sub, assigned_id=assigned_id)
    except FhirProblem as problem:
        if problem.status == 503:
            raise
        return error_response(problem)


__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "entry_request",
    "process_bundle",
    "resolve_conditional_references",
    "rewrite_references",
]
