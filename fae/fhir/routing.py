"""Which interaction a request is: the FHIR REST URL grammar, relative to a sandbox's base."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fae.fhir import bundles, patching, transactions
from fae.fhir.capability import capability_statement
from fae.fhir.outcome import FhirProblem
from fae.fhir.references import ID_RE
from fae.fhir.wire import FhirResponse, Request, respond

if TYPE_CHECKING:
    from fae.fhir.interactions import Interactions
    from fae.fhir.sandboxes import Sandbox


def dispatch(rest: Interactions, sandbox: Sandbox, req: Request, assigned_id: str | None = None) -> FhirResponse:
    """Serve one parsed request on a sandbox; a FhirProblem for what it cannot serve."""
    seg, method = req.segments, req.method
    if not seg:
        if method == "POST":
            return transactions.process_bundle(rest, sandbox, req)
        if method == "GET":
            return rest.search(sandbox, req, None)
        raise FhirProblem(405, f"{method} is not allowed on the base URL")
    head = seg[0]
    if head == "metadata" and len(seg) == 1:
        if method != "GET":
            raise FhirProblem(405, "Only GET is allowed on /metadata")
        return respond(200, capability_statement(rest.spec, req.base))
    if head == "_history" and len(seg) == 1 and method == "GET":
        return bundles.history(rest, sandbox, req, None, None)
    if head == "_search" and len(seg) == 1 and method == "POST":
        return rest.search(sandbox, rest.with_form(req), None)
    if head.startswith("$") or (len(seg) > 1 and seg[-1].startswith("$")):
        raise FhirProblem(400, f"Operation {seg[-1][:60]!r} is not supported", code="not-supported")
    if head not in rest.spec.resource_types:
        raise FhirProblem(404, f"Unknown resource type {head!r}", code="not-supported")
    if len(seg) == 1:
        return _type_level(rest, sandbox, req, head, assigned_id)
    second = seg[1]
    if second == "_search" and len(seg) == 2:
        if method != "POST":
            raise FhirProblem(405, "Use POST for _search")
        return rest.search(sandbox, rest.with_form(req), head)
    if second == "_history" and len(seg) == 2:
        if method != "GET":
            raise FhirProblem(405, "Only GET is allowed on _history")
        return bundles.history(rest, sandbox, req, head, None)
    if not ID_RE.match(second):
        raise FhirProblem(400, f"Invalid id {second[:70]!r}: 1-64 of A-Z a-z 0-9 - .")
    if len(seg) == 2:
        return _instance_level(rest, sandbox, req, head, second)
    if seg[2] == "_history" and method == "GET":
        if len(seg) == 3:
            return bundles.history(rest, sandbox, req, head, second)
        if len(seg) == 4:
            return rest.vread(sandbox, req, head, second, seg[3])
    raise FhirProblem(404, f"Unknown path {'/'.join(seg)[:120]!r}", code="not-found")


def _type_level(
    rest: Interactions, sandbox: Sandbox, req: Request, rtype: str, assigned_id: str | None
) -> FhirResponse:
    method = req.method
    if method == "GET":
        return rest.search(sandbox, req, rtype)
    if method == "POST":
        return rest.create(sandbox, req, rtype, assigned_id)
    if method == "PUT" and req.pairs:
        return rest.conditional_update(sandbox, req, rtype)
    if method == "DELETE" and req.pairs:
        return rest.conditional_delete(sandbox, req, rtype)
    if method == "PATCH" and req.pairs:
        return patching.conditional_patch(rest, sandbox, req, rtype)
    raise FhirProblem(405, f"{method} is not allowed on {rtype}")


def _instance_level(rest: Interactions, sandbox: Sandbox, req: Request, rtype: str, rid: str) -> FhirResponse:
    method = req.method
    if method in ("GET", "HEAD"):
        return rest.read(sandbox, req, rtype, rid)
    if method == "PUT":
        return rest.update(sandbox, req, rtype, rid)
    if method == "DELETE":
        return rest.delete(sandbox, req, rtype, rid)
    if method == "PATCH":
        return patching.patch(rest, sandbox, req, rtype, rid)
    raise FhirProblem(405, f"{method} is not allowed on {rtype}/{rid}")
