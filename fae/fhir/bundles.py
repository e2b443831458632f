"""Bundles the server answers with or accepts: searchset, history, batch and transaction."""

from __future__ import annotations

import copy
import json
from http import HTTPStatus
from email.utils import format_datetime
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from fae.fhir.outcome import FhirProblem, issue, outcome
from fae.fhir.search import (
    DEFAULT_COUNT, MAX_COUNT, RESULT_PARAMS, SearchContext, filter_resources, includes, int_param,
    link_query, sort_resources,
)
from fae.fhir.search_values import date_range
from fae.fhir.shaping import select_elements, summarise, summary_mode

from fae.fhir.wire import FhirResponse, Request, error_response, parse_request, respond

if TYPE_CHECKING:
    from fae.fhir.interactions import Interactions
    from fae.fhir.sandboxes import Sandbox

MAX_ENTRIES = 1000
# transaction processing order, from the FHIR R4 http page
ORDER = {"DELETE": 0, "POST": 1, "PUT": 2, "PATCH": 2, "GET": 3, "HEAD": 3}


def _full_url(base: str, rtype: str, rid: str) -> str:
    return f"{base}/{rtype}/{rid}" if base else f"{rtype}/{rid}"


def search_bundle(rest: Interactions, sandbox: Sandbox, req: Request, rtype: str | None) -> dict:
    ctx = SearchContext(rest.spec, sandbox.store, rest.clock().timestamp(), strict=req.strict,
                        budget=req.budget)
    filters = [(k, v) for k, v in req.pairs if k not in RESULT_PARAMS]
    if rtype is None:
        types = [t for k, v in req.pairs if k == "_type" for t in v.split(",") if t]
        unknown = [t for t in types if t not in rest.spec.resource_types]
        if unknown:
            raise FhirProblem(400, f"Unknown resource type(s) in _type: {', '.join(unknown)[:200]}")
        types = types or sandbox.store.types()
        if filters and not types:
            types = []
        matches = []
        for t in types:
            shared = [(k, v) for k, v in filters]
            matches.extend(filter_resources(ctx, t, shared))
    else:
        matches = filter_resources(ctx, rtype, filters)
    sort_text = [v for k, v in req.pairs if k == "_sort"]
    if sort_text and rtype:
        matches = sort_resources(ctx, rtype, matches, sort_text[-1])
    total_mode = next((v for k, v in req.pairs if k == "_total"), "accurate")
    mode = summary_mode(req.pairs)
    bundle: dict = {"resourceType": "Bundle", "type": "searchset"}
    if total_mode != "none" or mode == "count":
        bundle["total"] = len(matches)
    path = rtype or ""
    link_base = f"{req.base}/{path}" if req.base else path
    if mode == "count":
        bundle["link"] = [{"relation": "self", "url": f"{link_base}?{link_query(req.pairs, 0, 0)}"}]
        return _with_warnings(bundle, ctx)
    count = int_param(req.pairs, "_count", DEFAULT_COUNT, MAX_COUNT)
    offset = int_param(req.pairs, "_offset", 0, 10**9)
    page = matches[offset:offset + count]
    links = [{"relation": "self", "url": f"{link_base}?{link_query(req.pairs, offset, count)}"}]
    if count and offset + count < len(matches):
        links.append({"relation": "next", "url": f"{link_base}?{link_query(req.pairs, offset + count, count)}"})
    if offset > 0 and count:
        links.append({"relation": "previous",
                      "url": f"{link_base}?{link_query(req.pairs, max(0, offset - count), count)}"})
    bundle["link"] = links
    elements = [n.strip() for k, v in req.pairs if k == "_elements" for n in v.split(",") if n.strip()]

    def shape(resource: dict) -> dict:
        if mode and mode != "false":
            resource = summarise(rest.spec, resource, mode)
        return select_elements(resource, elements) if elements else resource

    entries = [{"fullUrl": _full_url(req.base, v.resource_type, v.id), "resource": shape(v.resource),
                "search": {"mode": "match"}} for v in page]
    inc = [v for k, v in req.pairs if k.startswith("_include")]
    inc = [v + ":iterate" if k.endswith(":iterate") else v for k, v in req.pairs
           if k in ("_include", "_include:iterate", "_include:recurse")]
    rev = [v + ":iterate" if k.endswith((":iterate", ":recurse")) else v for k, v in req.pairs
           if k in ("_revinclude", "_revinclude:iterate", "_revinclude:recurse")]
    if inc or rev:
        extra = includes(ctx, page, inc, rev, {v.key for v in page})
        entries.extend({"fullUrl": _full_url(req.base, v.resource_type, v.id), "resource": v.resource,
                        "search": {"mode": "include"}} for v in extra)
    bundle["entry"] = entries
    return _with_warnings(bundle, ctx)


def _with_warnings(bundle: dict, ctx: SearchContext) -> dict:
    if ctx.warnings:
        bundle.setdefault("entry", []).append(
            {"resource": outcome(*ctx.warnings), "search": {"mode": "outcome"}})
    return bundle


def _http_date(instant_text: str) -> str:
    moment = datetime.fromisoformat(instant_text.replace("Z", "+00:00"))
    return format_datetime(moment.astimezone(UTC), usegmt=True)


def history(rest: Interactions, sandbox: Sandbox, req: Request, rtype: str | None,
            rid: str | None) -> FhirResponse:
    store = sandbox.store
    if rid is not None:
        versions = list(store.instance_history(rtype, rid))
        if not versions:
            raise FhirProblem(404, f"{rtype}/{rid} is not known", code="not-found")
    elif rtype is not None:
        versions = [v for v in store.history if v.resource_type == rtype]
    else:
        versions = list(store.history)
    since = next((v for k, v in req.pairs if k == "_since"), None)
    if since:
        bound = date_range(since)
        if bound is None:
            raise FhirProblem(400, f"Invalid _since {since!r}", expression="_since")
        versions = [v for v in versions if (date_range(v.last_updated) or (0, 0))[0] >= bound[0]]
    versions.reverse()
    count = int_param(req.pairs, "_count", DEFAULT_COUNT, MAX_COUNT)
    offset = int_param(req.pairs, "_offset", 0, 10**9)
    page = versions[offset:offset + count]
    path = "/".join(x for x in (rtype, rid, "_history") if x)
    link_base = f"{req.base}/{path}" if req.base else path
    links = [{"relation": "self", "url": f"{link_base}?{link_query(req.pairs, offset, count)}"}]
    if count and offset + count < len(versions):
        links.append({"relation": "next", "url": f"{link_base}?{link_query(req.pairs, offset + count, count)}"})
    entries = []
    for v in page:
        entry: dict = {"fullUrl": _full_url(req.base, v.resource_type, v.id)}
        if v.resource is not None:
            entry["resource"] = v.resource
        url = f"{v.resource_type}/{v.id}" if v.method != "POST" else v.resource_type
        status = "201 Created" if v.method == "POST" or v.version_id == "1" else "200 OK"
        entry["request"] = {"method": v.method, "url": url}
        entry["response"] = {"status": "204 No Content" if v.deleted else status,
                             "etag": f'W/"{v.version_id}"', "lastModified": v.last_updated}
        entries.append(entry)
    bundle = {"resourceType": "Bundle", "type": "history", "total": len(versions), "link": links,
              "entry": entries}
    return respond(200, bundle)


# ---- batch and transaction ------------------------------------------------------------------


def rewrite_references(node: object, mapping: dict[str, str]) -> None:
    """Replace urn:uuid (or other placeholder) references in place, anywhere in a resource."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "reference" and isinstance(value, str) and value in mapping:
                node[key] = mapping[value]
            else:
                rewrite_references(value, mapping)
    elif isinstance(node, list):
        for item in node:
            rewrite_references(item, mapping)


def _entry_request(entry: object, index: int) -> tuple[str, str, str, dict]:
    if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict):
        raise FhirProblem(400, f"Bundle.entry[{index}] needs a request", expression=f"Bundle.entry[{index}]")
    request = entry["request"]
    method, url = request.get("method"), request.get("url")
    if method not in ORDER or not isinstance(url, str) or not url:
        raise FhirProblem(400, f"Bundle.entry[{index}].request needs a method and url",
                          expression=f"Bundle.entry[{index}].request")
    parts = urlsplit(url)
    path = parts.path
    if parts.scheme:
        path = path.split("/fhir/", 1)[-1] if "/fhir/" in path else path
    return method, path.strip("/"), parts.query, request


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


def process_bundle(rest: Interactions, sandbox: Sandbox, req: Request) -> FhirResponse:
    bundle = rest.parse_body(req, "Bundle")
    kind = bundle.get("type")
    if kind not in ("batch", "transaction"):
        raise FhirProblem(400, f"POST to the base needs a batch or transaction Bundle, not {kind!r}",
                          expression="Bundle.type")
    entries = bundle.get("entry") or []
    if not isinstance(entries, list) or len(entries) > MAX_ENTRIES:
        raise FhirProblem(400, f"Bundle.entry must be an array of at most {MAX_ENTRIES}",
                          expression="Bundle.entry")
    transaction = kind == "transaction"
    store = sandbox.store.copy() if transaction else sandbox.store
    work = copy.copy(sandbox)
    work.store = store

    parsed: list[tuple[str, str, str, dict] | FhirProblem] = []
    for i, entry in enumerate(entries):
        try:
            parsed.append(_entry_request(entry, i))
        except FhirProblem as problem:
            if transaction:
                raise
            parsed.append(problem)

    assigned: dict[int, str] = {}
    if transaction:
        mapping: dict[str, str] = {}
        for i, item in enumerate(parsed):
            method, path, _, _ = item  # type: ignore[misc]
            full_url = entries[i].get("fullUrl")
            resource = entries[i].get("resource")
            if method == "POST" and isinstance(full_url, str) and isinstance(resource, dict):
                rtype = resource.get("resourceType") or path
                assigned[i] = rest.id_factory()
                mapping[full_url] = f"{rtype}/{assigned[i]}"
        for i, item in enumerate(parsed):
            condition = item[3].get("ifNoneExist") if item[0] == "POST" else None  # type: ignore[index]
            if condition and isinstance(condition, str):
                found = rest.matches(work, item[1], condition.split("?", 1)[-1], req.budget)  # type: ignore[index]
                if len(found) == 1 and entries[i].get("fullUrl"):
                    mapping[entries[i]["fullUrl"]] = found[0].key
        if mapping:
            for entry in entries:
                if isinstance(entry, dict) and isinstance(entry.get("resource"), dict):
                    rewrite_references(entry["resource"], mapping)
                    if isinstance(entry.get("request"), dict) and entry["request"].get("url") in mapping:
                        entry["request"]["url"] = mapping[entry["request"]["url"]]
                        parsed[entries.index(entry)] = _entry_request(entry, entries.index(entry))

    order = sorted(range(len(entries)), key=lambda i: ORDER.get(
        parsed[i][0] if not isinstance(parsed[i], FhirProblem) else "GET", 3)) if transaction \
        else range(len(entries))
    results: dict[int, dict] = {}
    for i in order:
        item = parsed[i]
        if isinstance(item, FhirProblem):
            results[i] = {"response": {"status": f"{item.status} {HTTPStatus(item.status).phrase}",
                                       "outcome": item.outcome()}}
            continue
        method, path, query, request = item
        headers = dict(req.headers)
        headers.pop("if-none-exist", None)
        headers.pop("if-match", None)
        for key, header in (("ifNoneExist", "if-none-exist"), ("ifMatch", "if-match"),
                            ("ifNoneMatch", "if-none-match")):
            if isinstance(request.get(key), str):
                headers[header] = request[key]
        resource = entries[i].get("resource")
        body = json.dumps(resource).encode() if resource is not None else None
        req.budget.check()
        try:
            sub = parse_request(method, path, query, headers, body, req.base, req.budget)
            resp = rest.dispatch(work, sub, assigned_id=assigned.get(i))
        except FhirProblem as problem:
            resp = error_response(problem)
        if transaction and resp.status >= 400:
            body_json = resp.json()
            issues = body_json.get("issue", []) if isinstance(body_json, dict) else []
            for one in issues:
                one["diagnostics"] = f"Bundle.entry[{i}]: {one.get('diagnostics', '')}"
            raise FhirProblem(resp.status, "transaction failed", issues=issues or None)
        results[i] = _response_entry(resp)
    if transaction:
        sandbox.store = store
    reply = {"resourceType": "Bundle", "type": f"{kind}-response",
             "entry": [results[i] for i in range(len(entries))]}
    return respond(200, reply)


__all__ = ["history", "issue", "process_bundle", "rewrite_references", "search_bundle"]
