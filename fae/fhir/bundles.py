"""Bundles the server answers with: searchset and history (batch and transaction: `transactions`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fae.fhir.outcome import FhirProblem, outcome
from fae.fhir.search import SearchContext, filter_resources, is_result_param
from fae.fhir.search_results import (
    DEFAULT_COUNT,
    MAX_COUNT,
    includes,
    int_param,
    link_query,
    sort_resources,
)
from fae.fhir.search_values import date_range
from fae.fhir.shaping import select_elements, summarise, summary_mode
from fae.fhir.types import Resource
from fae.fhir.versions import Version
from fae.fhir.wire import FhirResponse, Request, respond

if TYPE_CHECKING:
    from fae.fhir.interactions import Interactions
    from fae.fhir.sandboxes import Sandbox


def _full_url(base: str, rtype: str, rid: str) -> str:
    return f"{base}/{rtype}/{rid}" if base else f"{rtype}/{rid}"


def search_bundle(rest: Interactions, sandbox: Sandbox, req: Request, rtype: str | None) -> Resource:
    """A search's searchset: the matches (sorted when asked), the total, the page's links, the page's entries
    shaped by ``_summary``/``_elements``, what ``_include``/``_revinclude`` add, and the search's warnings."""
    ctx = SearchContext(rest.spec, sandbox.store, rest.clock().timestamp(), strict=req.strict, budget=req.budget)
    matches = _matches(rest, sandbox, req, rtype, ctx)
    sort_text = [v for k, v in req.pairs if k == "_sort"]
    if sort_text and rtype:
        matches = sort_resources(ctx, rtype, matches, sort_text[-1])
    total_mode = next((v for k, v in req.pairs if k == "_total"), "accurate")
    mode = summary_mode(req.pairs)
    bundle: Resource = {"resourceType": "Bundle", "type": "searchset"}
    if total_mode != "none" or mode == "count":
        bundle["total"] = len(matches)
    path = rtype or ""
    link_base = f"{req.base}/{path}" if req.base else path
    if mode == "count":
        bundle["link"] = [{"relation": "self", "url": f"{link_base}?{link_query(req.pairs, 0, 0)}"}]
        return _with_warnings(bundle, ctx)
    count = int_param(req.pairs, "_count", DEFAULT_COUNT, MAX_COUNT)
    offset = int_param(req.pairs, "_offset", 0, 10**9)
    page = matches[offset : offset + count]
    bundle["link"] = _page_links(req, link_base, offset, count, len(matches))
    elements = [n.strip() for k, v in req.pairs if k == "_elements" for n in v.split(",") if n.strip()]

    def shape(resource: Resource) -> Resource:
        if mode and mode != "false":
            resource = summarise(rest.spec, resource, mode)
        return select_elements(rest.spec, resource, elements) if elements else resource

    entries = [_entry(req, v, shape(v.live_resource), "match") for v in page]
    inc, rev = _include_params(req, "_include"), _include_params(req, "_revinclude")
    if inc or rev:
        extra = includes(ctx, page, inc, rev, {v.key for v in page})
        entries.extend(_entry(req, v, v.live_resource, "include") for v in extra)
    bundle["entry"] = entries
    return _with_warnings(bundle, ctx)


def _matches(
    rest: Interactions, sandbox: Sandbox, req: Request, rtype: str | None, ctx: SearchContext
) -> list[Version]:
    """The versions a search's filters select: of ``rtype``, or for a search across types, of the types ``_type``
    names (every type the sandbox holds when it names none)."""
    filters = [(k, v) for k, v in req.pairs if not is_result_param(k)]
    if rtype is not None:
        return filter_resources(ctx, rtype, filters)
    types = [t for k, v in req.pairs if k == "_type" for t in v.split(",") if t]
    unknown = [t for t in types if t not in rest.spec.resource_types]
    if unknown:
        raise FhirProblem(400, f"Unknown resource type(s) in _type: {', '.join(unknown)[:200]}")
    matches: list[Version] = []
    for t in types or sandbox.store.types():
        matches.extend(filter_resources(ctx, t, filters))
    return matches


def _page_links(req: Request, link_base: str, offset: int, count: int, total: int) -> list[Resource]:
    """The page's self link, and its next and previous pages' where there are such pages."""
    links = [{"relation": "self", "url": f"{link_base}?{link_query(req.pairs, offset, count)}"}]
    if count and offset + count < total:
        links.append({"relation": "next", "url": f"{link_base}?{link_query(req.pairs, offset + count, count)}"})
    if offset > 0 and count:
        links.append(
            {"relation": "previous", "url": f"{link_base}?{link_query(req.pairs, max(0, offset - count), count)}"}
        )
    return links


def _entry(req: Request, version: Version, resource: Resource, mode: str) -> Resource:
    return {
        "fullUrl": _full_url(req.base, version.resource_type, version.id),
        "resource": resource,
        "search": {"mode": mode},
    }


def _include_params(req: Request, name: str) -> list[str]:
    """The values of ``name`` (``_include`` or ``_revinclude``), an ``:iterate`` or ``:recurse`` one marked
    ``:iterate``."""
    return [
        v + ":iterate" if k.endswith((":iterate", ":recurse")) else v
        for k, v in req.pairs
        if k in (name, f"{name}:iterate", f"{name}:recurse")
    ]


def _with_warnings(bundle: Resource, ctx: SearchContext) -> Resource:
    if ctx.warnings:
        bundle.setdefault("entry", []).append({"resource": outcome(*ctx.warnings), "search": {"mode": "outcome"}})
    return bundle


def history(rest: Interactions, sandbox: Sandbox, req: Request, rtype: str | None, rid: str | None) -> FhirResponse:
    store = sandbox.store
    if rtype is not None and rid is not None:
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
    page = versions[offset : offset + count]
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
        entry["response"] = {
            "status": "204 No Content" if v.deleted else status,
            "etag": f'W/"{v.version_id}"',
            "lastModified": v.last_updated,
        }
        entries.append(entry)
    bundle = {"resourceType": "Bundle", "type": "history", "total": len(versions), "link": links, "entry": entries}
    return respond(200, bundle)


__all__ = ["history", "search_bundle"]
